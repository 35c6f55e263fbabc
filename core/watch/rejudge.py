"""What changes a watched lock's verdict without a file event (docs/watching.md, "Liveness
and time", "Empty files"): the holder's process exiting or being replaced (the liveness pass),
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
    holders only, when they are few: :meth:`Directories.liveness_snapshot`) and
    re-judge the entries whose holder's process changed
    (:meth:`core.watch.inventory.Inventory.holders_changed`). No file is read."""
    for d in dirs.dirs:
        dirs.check_dir(d)
        if d.tree:
            continue  # its rescans keep the watches in step with the walk
        # a watch on a proof's ledger/ or locks/ may have gone with its directory
        for path in [p for p in d.watches if p != d.root]:
            if not os.path.isdir(path):
                unschedule(d.watches.pop(path))
    _empty_files_unsettled(dirs)
    if not dirs.inventory.has_holders:
        return
    prev, new = dirs.procs, dirs.liveness_snapshot()
    dirs.procs = new
    for path in dirs.inventory.holders_changed(prev, new):
        e = dirs.inventory.get(path)
        if e is not None:
            dirs.rejudge(path, e, new)

def _empty_files_unsettled(dirs: Directories) -> None:
    """What happens to empty files without any event the watcher follows (docs/watching.md,
    "Empty files"): a kernel lock taken on one (:func:`_kernel_locks_taken`), and a file
    whose verdict waits for a walk of the open descriptors -- ``writing`` because a
    process had it open (closing a file it only read makes ``IN_CLOSE_NOWRITE``, which is
    not followed), ``writing`` or ``free`` because no walk could speak for it yet -- judged
    again with this round's walk (:meth:`Directories.kernel_view`: at most one per
    :data:`core.watch.directories.OPEN_SCAN_GAP`), and only while there are such files."""
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
