"""What changes a watched lock's verdict without a file event (docs/watching.md, "Liveness
and time", "Holders' exits", "Empty files"): the holder's process exiting (told by the kernel:
:func:`holder_exit`, :func:`follow_exits`) or being replaced (the liveness pass, for the
holders the kernel does not follow),
a deadline passing (a TTL, ``stale_after``, the writing grace), a kernel lock taken on an empty
file, a walk of the open descriptors that can now speak for an empty file. Each function
works on a :class:`core.watch.directories.Directories` for the watcher's worker thread,
holding the watcher's lock; reads clocks and ``/proc``, never a lock file but those whose
kernel lock was taken.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from core.watch.sources import unschedule
from core.watch.watched_dir import WatchedDir

if TYPE_CHECKING:
    from core.record import LockStatus
    from core.watch.directories import Directories


def _awaits_walk(st: LockStatus) -> bool:
    """True for an empty file whose verdict a walk of the open descriptors may change: open by
    a process (``empty_open``), young and not yet seen by a walk (``writing``), or free without
    a walk that saw it (``empty_free`` with ``open_seen`` false)."""
    from core.codes import Code

    for r in st.reasons:
        if r.code in (Code.EMPTY_OPEN, Code.WRITING):
            return True
        if r.code is Code.EMPTY_FREE and not r.get("open_seen"):
            return True
    return False


def liveness_pass(dirs: Directories) -> None:
    """Check every directory of ``dirs`` (appeared, vanished, replaced), forget watches of af
    ``ledger/``/``locks/`` directories that are gone, take one process snapshot (of the
    holders only, when they are few: :meth:`core.watch.rounds.RoundViews.liveness_snapshot`) and
    re-judge the entries whose holder's process changed
    (:meth:`core.watch.inventory.Inventory.holders_changed`). Holders whose exit the kernel
    tells (:attr:`core.watch.exits.ExitFollower.followed_pids`) are left out: with every
    holder followed, no process is looked up at all. No file is read."""
    for d in dirs.dirs:
        dirs.check_dir(d)
        if d.tree:
            continue  # its rescans keep the watches in step with the walk
        # a watch on a proof's ledger/ or locks/ may have gone with its directory
        for path in [p for p in d.watches if p != d.root]:
            if not os.path.isdir(path):
                unschedule(d.watches.pop(path))
    _empty_files_unsettled(dirs)
    inventory = dirs.inventory
    if not inventory.has_holders:
        return
    followed = dirs.exits.followed_pids
    pids = inventory.holder_pids - followed  # in C: 10,000 holders every 2 s
    if not pids and not inventory.has_unsettled(followed):
        return  # the kernel tells every holder's exit
    prev, new = dirs.procs, dirs.liveness_snapshot(pids)
    dirs.procs = new
    dirs.exited.clear()  # the new snapshot was taken after them
    for path in inventory.holders_changed(prev, new, followed):
        e = inventory.get(path)
        if e is not None:
            dirs.rejudge(path, e, new)


def holder_exit(dirs: Directories, pid: int, handle: int) -> None:
    """A followed holder process may have exited (``handle`` of
    :class:`core.watch.exits.ExitFollower` fired): when it has, re-judge every entry naming
    ``pid`` at once, looking the PID up directly (it is a zombie, gone, or another process)."""
    if dirs.exits.fired(pid, handle):
        holder_gone(dirs, pid)


def holder_gone(dirs: Directories, pid: int) -> None:
    """Re-judge every entry naming ``pid``, whose process exited (or whose PID names another
    process now), looking the PID up directly."""
    dirs.exited.add(pid)
    inventory = dirs.inventory
    for path in inventory.paths_of_pid(pid):
        e = inventory.get(path)
        if e is not None:
            dirs.rejudge(path, e, None)


def follow_exits(dirs: Directories) -> None:
    """Follow the live holders of the entries this round touched (one exit notification per
    holder process: :meth:`core.watch.exits.ExitFollower.sync`), and re-judge at once those
    found gone while their notification was opened. Call it before the round's change set is
    made: each live holder's status then says how its liveness is followed."""
    inventory = dirs.inventory
    paths: list[str] = list(inventory.touched)
    for _ in range(4):  # a holder found gone is re-judged, which touches its paths again
        gone = dirs.exits.sync(inventory, paths)
        if not gone:
            return
        paths = []
        for pid in gone:
            paths += inventory.paths_of_pid(pid)
            holder_gone(dirs, pid)

def _empty_files_unsettled(dirs: Directories) -> None:
    """What happens to empty files without any event the watcher follows (docs/watching.md,
    "Empty files"): a kernel lock taken on one (:func:`_kernel_locks_taken`), and a file
    whose verdict waits for a walk of the open descriptors -- ``writing`` because a
    process had it open (closing a file it only read makes ``IN_CLOSE_NOWRITE``, which is
    not followed), ``writing`` or ``free`` because no walk could speak for it yet -- judged
    again with this round's walk (:meth:`core.watch.rounds.RoundViews.kernel_view`: at most one per
    :data:`core.watch.rounds.OPEN_SCAN_GAP`), and only while there are such files."""
    candidates = dirs.inventory.unlocked_empty_files()
    if not candidates:
        return
    _kernel_locks_taken(dirs, candidates)
    if not dirs.kernel_view().can_walk:
        return  # no /proc: the writing grace alone decides (core.verdicts.judge)
    for path in candidates:
        e = dirs.inventory.get(path)
        if e is not None and _awaits_walk(e.status):
            dirs.rejudge(path, e, dirs.procs)

def _kernel_locks_taken(dirs: Directories, candidates: list[str]) -> None:
    """Re-read the empty files on which a kernel lock was taken since they were judged
    (a free dpkg/cargo/uv anchor turns held): one ``/proc/locks`` read per liveness pass,
    only while there are such files (docs/specs/devtool-locks.md §2.6: read it on file
    events and on the liveness tick, never in a loop). Nothing happens where the kernel's
    locks cannot be read."""
    from core.kernel.locks import kernel_holders

    try:
        held = kernel_holders(candidates)
    except Exception:  # no /proc/locks and no F_GETLK answer: nothing known
        return
    procs = dirs.procs_for_reads(len(held))
    for path in held:
        e = dirs.inventory.get(path)
        if e is not None:
            dirs.refresh_path(path, e.owner if isinstance(e.owner, WatchedDir) else None,
                              procs=procs)

def run_deadlines(dirs: Directories, now_ts: float) -> None:
    """Re-judge every entry whose deadline (Unix s, UTC) is at or before ``now_ts``."""
    while (due := dirs.inventory.pop_due(now_ts)) is not None:
        path, e = due
        dirs.rejudge(path, e, dirs.procs)
