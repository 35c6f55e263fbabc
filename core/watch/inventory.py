"""The watcher's inventory as a pure value: entries in, change set out (docs/watching.md,
"Live updates" and "Code layout"; docs/DESIGN.md, "Watching").

:class:`Inventory` maps each lock path to its :class:`Entry` (last verdict, the bytes it was
judged from, ``lstat`` identity, owning directory); :meth:`Inventory.flush` gives a
:class:`ChangeSet` (``changed`` only when :func:`same_verdict` says the verdict or record
changed). Its indexes serve the scheduler: paths by holder PID
(:meth:`Inventory.holders_changed`) and the instant each verdict may change with time alone
(:func:`deadline_of`, :meth:`Inventory.pop_due`).

Pure: no threads, no sleeps, no file I/O and no clock reads — the caller passes ``now_ts``
(Unix seconds, UTC) and the process snapshot it judged with. Not thread-safe: the watcher's
worker thread owns it, under the watcher's lock.
"""

from __future__ import annotations

import heapq
import itertools
import math
import os
from collections.abc import Container, Hashable, Iterator, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.codes import Code
from core.reasons import same_reasons
from core.record import Liveness, LockStatus, State

if TYPE_CHECKING:
    from datetime import datetime

    from core.stale_policy import StalePolicy
    from core.verdicts.liveness import ProcessSnapshot, ProcInfo
    from core.watch.scan import FileRead

Sig = tuple[int, int, int, int, int, int]
"""A file's ``lstat`` identity: ``(inode, device, size, mtime_ns, ctime_ns, mode)``."""


@dataclass(frozen=True, slots=True)
class ChangeSet:
    """Changes delivered to ``on_change``: entries that appeared (``added``), whose verdict or
    record changed (``changed``: the new status) and that disappeared (``removed``: the last
    status seen). Each list is sorted by path; a path is in at most one list."""

    added: list[LockStatus] = field(default_factory=list)
    changed: list[LockStatus] = field(default_factory=list)
    removed: list[LockStatus] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)

    def __len__(self) -> int:
        return len(self.added) + len(self.changed) + len(self.removed)

    def events(self) -> Iterator[tuple[str, LockStatus]]:
        """``("added" | "changed" | "removed", status)`` pairs, in that order (one line each
        for ``lockwarden watch``)."""
        for s in self.added:
            yield "added", s
        for s in self.changed:
            yield "changed", s
        for s in self.removed:
            yield "removed", s


def same_verdict(a: LockStatus, b: LockStatus) -> bool:
    """True when ``b`` says nothing new compared with ``a``: same state, liveness, record,
    file identity, error, read-only flag and stale limit, and the same reasons apart from
    their ticking parameters (ages, time left: :func:`core.reasons.same_reasons`).

    The rule of docs/watching.md ("Change sets"): growing ages never emit a change."""
    return (
        a.state is b.state
        and a.liveness is b.liveness
        and a.error == b.error
        and a.read_only == b.read_only
        and a.stale_after == b.stale_after
        and a.file == b.file
        and a.record == b.record
        and same_reasons(a.reasons, b.reasons)
    )


def file_sig(st: os.stat_result | None) -> Sig | None:
    """The :data:`Sig` of an ``lstat`` result, or ``None`` for ``None`` (no result)."""
    if st is None:
        return None
    dev, mode = st.st_dev, st.st_mode  # the same for most files: one int object each
    return (st.st_ino, _SHARED_INTS.setdefault(dev, dev), st.st_size, st.st_mtime_ns,
            st.st_ctime_ns, _SHARED_INTS.setdefault(mode, mode))


_SHARED_INTS: dict[int, int] = {}
"""Devices and modes :func:`file_sig` met (a few distinct values)."""


def proc_key(info: ProcInfo | None) -> tuple[float | None, bool] | None:
    """What of a snapshot's process info can change a liveness verdict: its start time (Unix
    s) and whether it is a zombie (not its running/sleeping status, which flips all the
    time). ``None`` for a process that is not there."""
    if info is None:
        return None
    return (info.create_time, info.status == "zombie")


class Entry:
    """One path of the inventory.

    Attributes:
        status: the last verdict.
        owner: the watched directory that owns the path (any hashable, compared by identity).
        policy: the owner's stale policy, used to re-judge and for :func:`deadline_of`.
        read: the bytes the verdict was judged from (:class:`core.watch.scan.FileRead`), or ``None``
            for an af claim replayed from a ledger (judged from ``status.record``).
        sig: the file's :data:`Sig` when it was read, or ``None`` (unknown, or a claim).
        deadline: set by :meth:`Inventory.put`: Unix seconds (UTC) at which the verdict may
            change with time alone, or ``math.inf``.
    """

    __slots__ = ("deadline", "owner", "policy", "read", "sig", "status")

    def __init__(self, status: LockStatus, owner: Hashable, policy: StalePolicy,
                 read: FileRead | None = None, sig: Sig | None = None) -> None:
        self.status = status
        self.owner = owner
        self.policy = policy
        self.read = read
        self.sig = sig
        self.deadline = math.inf


def _timestamp(dt: datetime) -> float | None:
    try:
        return dt.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


def deadline_of(entry: Entry, now_ts: float) -> float:
    """The next instant (Unix s, UTC) after ``now_ts`` at which ``entry``'s verdict may change
    with time alone, plus 5 ms; ``math.inf`` when none.

    The instants (docs/watching.md, "Liveness and time"): the record's TTL or ``expires_at``
    passing, the lock's age (from ``acquired_at``, else the file's mtime) reaching the
    owner's stale limit for the record's format (``policy.limit_for``); for a file without a
    record (``writing``, ``unreadable``, ``stale``), its mtime plus the writing grace and plus
    ``stale_after``."""
    st = entry.status
    policy = entry.policy
    rec = st.record
    info = entry.read.file if entry.read is not None else None
    mtime = info.mtime_ns / 1e9 if info is not None else None
    cands: list[float] = []
    if rec is not None:
        exp = rec.effective_expiry()
        if exp is not None:
            ts = _timestamp(exp)
            if ts is not None:
                cands.append(ts)
        base = _timestamp(rec.acquired_at) if rec.acquired_at is not None else mtime
        if base is not None:
            cands.append(base + policy.limit_for(rec.format))
    elif mtime is not None and st.state in (State.WRITING, State.UNREADABLE, State.STALE):
        cands.append(mtime + policy.writing_grace)
        cands.append(mtime + policy.stale_after)
    future = [c for c in cands if c > now_ts]
    return min(future) + 0.005 if future else math.inf


def _path_key(s: LockStatus) -> str:
    return s.path


_REREAD_STATES = (State.UNREADABLE, State.WRITING)


class Inventory:
    """Every entry of the watched directories, with the indexes the scheduler needs and the
    changes of the current round (see the module docstring). Never raises for the values it
    is given; no I/O, no clock."""

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}
        self._by_owner: dict[Hashable, set[str]] = {}
        self._pid_of: dict[str, int] = {}  # path -> holder PID
        self._pid_index: dict[int, set[str]] = {}  # holder PID -> paths
        self._unsettled: set[str] = set()  # judged alive by a direct look-up, not the snapshot
        self._empty: dict[str, None] = {}  # empty files no kernel lock held (in order)
        self._reread: dict[str, Hashable] = {}  # path -> owner: never is_current (see rereads)
        self._deadlines: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._before: dict[str, LockStatus | None] = {}  # this round: status before first touch

    # -- reading ----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, path: object) -> bool:
        return path in self._entries

    def get(self, path: str) -> Entry | None:
        """The entry at ``path``, or ``None``."""
        return self._entries.get(path)

    def snapshot(self) -> list[LockStatus]:
        """Every status, sorted by path (a new list)."""
        return sorted((e.status for e in self._entries.values()), key=_path_key)

    def paths_of(self, owner: Hashable) -> Set[str]:
        """The paths ``owner`` owns (a live read-only view: copy it before dropping)."""
        return self._by_owner.get(owner, frozenset())

    def statuses_in(self, owner: Hashable, directory: str) -> list[LockStatus]:
        """Statuses of ``owner``'s entries whose parent directory is ``directory``."""
        out = []
        for p in self.paths_of(owner):
            e = self._entries.get(p)
            if e is not None and os.path.dirname(p) == directory:
                out.append(e.status)
        return out

    def is_current(self, path: str, owner: Hashable, sig: Sig | None) -> bool:
        """True when a rescan need not re-read ``path``: ``owner`` holds it, its ``lstat``
        identity ``sig`` is known and unchanged, and its verdict does not depend on a re-read
        (not ``unreadable``, not ``writing``, not a known tool's kernel-lock anchor: taking a
        kernel lock changes nothing of the file, so a free anchor turns held only on a
        re-read). docs/watching.md, "Rescans"."""
        e = self._entries.get(path)
        return (e is not None and e.owner is owner and sig is not None and e.sig == sig
                and e.status.state not in _REREAD_STATES and not e.status.anchor_tool)

    def rereads(self, owner: Hashable) -> bool:
        """True when ``owner`` holds an entry that every rescan re-reads (:meth:`is_current`
        is never true for it: no ``lstat`` identity, ``unreadable``, ``writing``, a kernel-lock
        anchor): its rescan may not skip the listing (:func:`core.watch.quiet.unchanged`)."""
        return any(o is owner for o in self._reread.values())

    def unlocked_empty_files(self) -> list[str]:
        """Paths of the empty files no kernel lock held when they were judged (free
        kernel-lock anchors, empty files judged ``free`` or ``writing``): a kernel lock taken
        on one changes nothing of the file, so only a look at the kernel's locks sees it
        (:func:`core.watch.rejudge.liveness_pass`)."""
        return list(self._empty)  # kept by put and drop: a pass never walks every entry

    @property
    def has_holders(self) -> bool:
        """True when some entry names a holder PID, or waits to be re-judged at the next
        liveness pass (:meth:`holders_changed`)."""
        return bool(self._pid_of) or bool(self._unsettled)

    @property
    def holder_pids(self) -> Set[int]:
        """The PIDs the entries name as holders (a live view: copy it to keep it)."""
        return self._pid_index.keys()

    def pid_of(self, path: str) -> int | None:
        """The holder PID ``path``'s entry is indexed under (its record's PID, the kernel's
        holder, the process that keeps its pin), or ``None``."""
        return self._pid_of.get(path)

    def paths_of_pid(self, pid: int) -> list[str]:
        """The paths whose entries name ``pid`` as their holder (a new list)."""
        return list(self._pid_index.get(pid, ()))

    @property
    def touched(self) -> Set[str]:
        """The paths this round put or dropped so far (a live view: copy it to keep it)."""
        return self._before.keys()

    @property
    def has_changes(self) -> bool:
        """True when this round touched a path (:meth:`flush` may have something to say)."""
        return bool(self._before)

    @property
    def next_deadline(self) -> float:
        """The earliest queued deadline (Unix s, UTC; possibly one already superseded, which
        :meth:`pop_due` skips), or ``math.inf``."""
        return self._deadlines[0][0] if self._deadlines else math.inf

    # -- changing ---------------------------------------------------------------------------

    def put(self, path: str, entry: Entry, *, now_ts: float,
            procs: ProcessSnapshot | None) -> None:
        """Store ``entry`` at ``path`` (replacing any entry, of any owner).

        Args:
            now_ts: Unix seconds (UTC) to compute ``entry.deadline`` from.
            procs: the last liveness snapshot; a holder judged alive whose PID is not in it
                (judged by a direct look-up) is re-judged at the next liveness pass
                (:meth:`holders_changed`).
        """
        old = self._entries.get(path)
        if path not in self._before:
            self._before[path] = old.status if old is not None else None
        if old is not None and old.owner is not entry.owner:
            self._discard_owned(old.owner, path)
        self._entries[path] = entry
        self._by_owner.setdefault(entry.owner, set()).add(path)
        st = entry.status
        if st.file is not None and st.file.size == 0 and not st.kernel_held:
            self._empty[path] = None
        else:
            self._empty.pop(path, None)
        if entry.sig is None or st.state in _REREAD_STATES or st.anchor_tool:
            self._reread[path] = entry.owner
        else:
            self._reread.pop(path, None)
        old_deadline = old.deadline if old is not None else None
        rec = entry.status.record
        self._unindex(path)
        # a file no format reads but the kernel holds a lock on (core.verdicts.inspect: held,
        # kernel_lock_held) is re-judged when the holder named in its evidence exits; so is an
        # empty file that is being written (empty_open), when the process that has it open exits
        pid = rec.pid if rec is not None else (
            entry.status.evidence.pid if entry.status.state in (State.HELD, State.WRITING)
            else None)
        # a holder alive by its pin (core.kernel.pin; its recorded PID means another process
        # here) is re-judged when the process the kernel names for the pin exits, or at every
        # liveness pass when the kernel names none
        pin = next((r for r in entry.status.reasons if r.code is Code.HOLDER_PINNED), None)
        if pin is not None:
            pin_pid = pin.get("pid")
            pid = pin_pid if isinstance(pin_pid, int) and pin_pid > 0 else None
            if pid is None:
                self._unsettled.add(path)
        if pid is not None:
            self._pid_of[path] = pid
            self._pid_index.setdefault(pid, set()).add(path)
            if entry.status.liveness in (Liveness.ALIVE, Liveness.REUSED) and (
                procs is None or pid not in procs
            ):
                self._unsettled.add(path)
        entry.deadline = deadline_of(entry, now_ts)
        if entry.deadline < math.inf and entry.deadline != old_deadline:
            heapq.heappush(self._deadlines, (entry.deadline, next(self._seq), path))
            if len(self._deadlines) > 4 * len(self._entries) + 1024:  # drop superseded ones
                self._deadlines = [(e.deadline, next(self._seq), p)
                                   for p, e in self._entries.items() if e.deadline < math.inf]
                heapq.heapify(self._deadlines)

    def drop(self, owner: Hashable, path: str) -> None:
        """Remove ``path`` if ``owner`` holds it (it is then ``removed`` at :meth:`flush`)."""
        self._discard_owned(owner, path)
        e = self._entries.get(path)
        if e is None or e.owner is not owner:
            return
        if path not in self._before:
            self._before[path] = e.status
        del self._entries[path]
        self._empty.pop(path, None)
        self._reread.pop(path, None)
        self._unindex(path)

    def drop_all(self, owner: Hashable) -> None:
        """Remove every entry ``owner`` holds."""
        for path in list(self.paths_of(owner)):
            self.drop(owner, path)

    def drop_unlisted(self, owner: Hashable, listed: Set[str], claims: Set[str]) -> None:
        """Remove ``owner``'s entries that are neither in ``listed`` (a rescan's listing) nor
        in ``claims`` (af claims replayed from ledgers, which no listing shows)."""
        for path in list(self.paths_of(owner)):
            if path not in listed and path not in claims:
                self.drop(owner, path)

    def put_claims(self, owner: Hashable, policy: StalePolicy, old_paths: Set[str],
                   claims: list[LockStatus], *, now_ts: float,
                   procs: ProcessSnapshot | None) -> set[str]:
        """Replace one af proof's replayed claims: drop the paths of ``old_paths`` not in
        ``claims``, store each claim whose record or verdict changed (:func:`same_verdict`).
        Returns the claims' paths (the proof's new ``old_paths``). ``now_ts``, ``procs``: as
        for :meth:`put`."""
        new_paths = {s.path for s in claims}
        for p in old_paths - new_paths:
            self.drop(owner, p)
        for s in claims:
            old = self._entries.get(s.path)
            if old is not None and old.owner is owner and old.status.record == s.record \
                    and same_verdict(old.status, s):
                continue
            self.put(s.path, Entry(s, owner, policy), now_ts=now_ts, procs=procs)
        return new_paths

    def _discard_owned(self, owner: Hashable, path: str) -> None:
        paths = self._by_owner.get(owner)
        if paths is not None:
            paths.discard(path)
            if not paths:
                del self._by_owner[owner]

    def _unindex(self, path: str) -> None:
        pid = self._pid_of.pop(path, None)
        if pid is not None:
            paths = self._pid_index.get(pid)
            if paths is not None:
                paths.discard(path)
                if not paths:
                    del self._pid_index[pid]
        self._unsettled.discard(path)

    # -- time and liveness ------------------------------------------------------------------

    def holders_changed(self, prev: ProcessSnapshot | None,
                        new: ProcessSnapshot | None,
                        skip: Container[int] = frozenset()) -> set[str]:
        """Paths to re-judge after a liveness pass moved from snapshot ``prev`` to ``new``:
        those whose holder's process info changed (it exited, became a zombie, or its PID now
        names another process: :func:`proc_key`) and those judged alive by a direct look-up
        because their PID was missing from the older snapshot. Every holder's path when
        either snapshot is ``None``. Holders whose PID is in ``skip`` are left out: the kernel
        tells their exit (docs/watching.md, "Liveness and time", "Holders' exits")."""
        pid_of = self._pid_of
        if new is None or prev is None:
            return {p for p, pid in pid_of.items() if pid not in skip}
        todo = {p for p in self._unsettled if pid_of.get(p) not in skip}
        index = self._pid_index
        for pid, info in new.items():
            if pid in index and pid not in skip and proc_key(prev.get(pid)) != proc_key(info):
                todo |= index[pid]
        for pid in prev:
            if pid in index and pid not in new and pid not in skip:
                todo |= index[pid]
        return todo

    def has_unsettled(self, skip: Container[int] = frozenset()) -> bool:
        """True when an entry waits to be re-judged at the next liveness pass
        (:meth:`holders_changed`) whose PID is not in ``skip``."""
        pid_of = self._pid_of
        return any(pid_of.get(p) not in skip for p in self._unsettled)

    def pop_due(self, now_ts: float) -> tuple[str, Entry] | None:
        """The next entry whose deadline is at or before ``now_ts`` (Unix s, UTC), removed from
        the deadline queue, or ``None``. Superseded deadlines are skipped. Call it again after
        re-judging (and :meth:`put`) the entry it returned."""
        while self._deadlines and self._deadlines[0][0] <= now_ts:
            dl, _seq, path = heapq.heappop(self._deadlines)
            e = self._entries.get(path)
            if e is not None and e.deadline == dl:
                return path, e
        return None

    # -- change sets ------------------------------------------------------------------------

    def forget_changes(self) -> None:
        """Start a new round without reporting the current one (the initial inventory is not
        a change)."""
        self._before = {}

    def flush(self) -> ChangeSet:
        """The changes since the last :meth:`flush` / :meth:`forget_changes`, comparing each
        touched path's status before its first touch with its status now; starts a new
        round. A path added and removed within one round is in no list."""
        before = self._before
        self._before = {}
        added: list[LockStatus] = []
        changed: list[LockStatus] = []
        removed: list[LockStatus] = []
        for path, old in before.items():
            e = self._entries.get(path)
            new = e.status if e is not None else None
            if old is None and new is not None:
                added.append(new)
            elif old is not None and new is None:
                removed.append(old)
            elif old is not None and new is not None and not same_verdict(old, new):
                changed.append(new)
        key = _path_key
        return ChangeSet(sorted(added, key=key), sorted(changed, key=key),
                         sorted(removed, key=key))
