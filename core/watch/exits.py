"""Holders' exits delivered by the kernel (docs/DESIGN.md, "Watching"; docs/watching.md,
"Holders' exits").

The watcher keeps one exit notification per live holder it shows, so a holder that dies --
SIGKILL included -- re-judges its locks at once instead of at the next liveness pass (2 s):

- **Linux** (>= 5.3): a pidfd (``os.pidfd_open``) per holder process, waited for by the
  watcher's one inotify reader thread in the same ``epoll`` as the inotify descriptor
  (:class:`core.watch.exit_backends.PidfdExits`; no thread of its own). A pidfd becomes
  readable when its process exits.
- **macOS**: ``EVFILT_PROC``/``NOTE_EXIT`` on one kqueue, read by one thread
  (:class:`core.watch.exit_backends.KqueueExits`).
- **Windows**: a process handle per holder, waited for in groups of 63 (with one wake-up
  event: ``WaitForMultipleObjects`` takes 64 at most), one thread a group
  (:class:`core.watch.exit_backends.HandleExits`).

A notification names the *process*, not the number. It is opened first, then the process's
start time is compared with the one the verdict was judged on (``Evidence.process_start``):
a PID reused by another process since the verdict reads as the holder's exit, never as the
holder.

Where a notification cannot be had the liveness pass stays, for those holders only
(:attr:`ExitFollower.followed_pids` are left out of it): a process this user may not inspect,
a start time that cannot be read, no reader (no inotify instance left), a system without
notifications, or the descriptor budget -- the soft ``RLIMIT_NOFILE`` is raised to the hard
one once (:func:`core.watch.exit_backends.raise_fd_limit`) and no pidfd is kept once fewer
than :data:`FD_MARGIN` descriptors would remain (or beyond the ``budget`` given). Each live
holder's statuses say which way their liveness is followed (``Evidence.followed``: a
``liveness_followed``/``liveness_polled`` reason, rendered in :mod:`core.reasons`), and
:meth:`ExitFollower.stats` counts both.

Used from the watcher's worker thread only (under its lock), except the backends' ``post``
callback, which runs on the reader thread and only queues a message.
"""

from __future__ import annotations

import errno
from collections import Counter
from collections.abc import Callable, Iterable, Set
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from core.codes import Code
from core.reasons import Reason
from core.record import Evidence, Liveness, LockStatus, State
from core.watch.exit_backends import FD_MARGIN, Backend, Post, make_backend

if TYPE_CHECKING:
    from core.watch.inventory import Entry, Inventory
    from core.watch.tree import TreeWatcher

__all__ = ["FD_MARGIN", "ExitFollower", "ExitStats"]


@dataclass(frozen=True, slots=True)
class ExitStats:
    """How the watcher follows its live holders' processes now: ``kind`` of notification
    (``pidfd``, ``kqueue``, ``handle``, or ``None``: none here), ``followed`` how many processes
    the kernel follows, ``polled`` how many the liveness pass checks, by ``why``."""

    kind: str | None
    followed: int
    polled: dict[str, int]

    @property
    def fallback(self) -> int:
        """How many live holders' processes the liveness pass checks."""
        return sum(self.polled.values())


class _Follow:
    """One live holder process: its start time (Unix s), the handle that follows it (or
    ``None``: the pass checks it), the reason the statuses carry, the paths it holds."""

    __slots__ = ("handle", "how", "paths", "start")

    def __init__(self, start: float | None, handle: int | None, how: Reason) -> None:
        self.start = start
        self.handle = handle
        self.how = how
        self.paths: set[str] = set()


_GONE = object()
""":meth:`ExitFollower._open`: the process is gone, or its PID names another one now."""

_UNVERIFIED_WHYS = frozenset({"access_denied", "hidepid"})


def _same_start(a: float, b: float) -> bool:
    """The rule of :func:`core.verdicts.liveness.check` for ``start=``: equal within 0.1 s, or
    one second apart (the boot time moved by a second)."""
    from core.verdicts.liveness import START_TOLERANCE

    diff = abs(a - b)
    return diff <= START_TOLERANCE or abs(diff - 1.0) <= 0.02


def _same(a: float | None, b: float | None) -> bool:
    """Two start times of one process (both unknown counts as the same)."""
    if a is None or b is None:
        return a is b
    return _same_start(a, b)


def _wanted(st: LockStatus, pid: int) -> tuple[float | None, str | None] | None:
    """``(start, why)`` when ``st`` names a live holder ``pid`` on this host: the start time
    its verdict saw (``None``: unknown, ``why`` then says so), or ``None`` when there is no
    live holder to follow (dead, reused, another host, no PID)."""
    if st.liveness is not Liveness.ALIVE and not (
            st.record is None and st.state in (State.HELD, State.WRITING)):
        return None
    ev = st.evidence
    start = ev.process_start if ev.pid == pid else None
    if start is not None:
        return start, None
    denied = any(r.code is Code.HOLDER_ALIVE_UNVERIFIED and r.get("why") in _UNVERIFIED_WHYS
                 for r in st.reasons)
    return None, "denied" if denied else "unverified"


class ExitFollower:
    """One exit notification per live holder process the inventory shows (see the module
    docstring).

    Args:
        post: called as ``post(pid, handle)`` on the waiting thread when a followed process
            may have exited (:meth:`fired` confirms it on the worker thread).
        reader: gives the watcher's inotify reader (Linux); created on first need.
        every_s: the liveness pass's interval (seconds), said in ``liveness_polled``.
        budget: the most processes followed at once (``None``: as many as descriptors allow,
            keeping :data:`FD_MARGIN`); beyond it the pass checks them (``descriptor_budget``).
        backend: a :class:`Backend` to use instead of this platform's (tests).
    """

    def __init__(self, post: Post, reader: Callable[[], TreeWatcher | None], *,
                 every_s: float, budget: int | None = None,
                 backend: Backend | None = None) -> None:
        self._post = post
        self._reader = reader
        self.every_s = every_s
        self.budget = budget
        self._backend = backend
        self._no_backend: str | None = None  # why there is none (after the first try)
        self._procs: dict[int, _Follow] = {}  # pid -> what follows it
        self._path_pid: dict[str, int] = {}  # path -> the pid it is counted under
        self._handles: dict[int, int] = {}  # handle -> pid
        self._followed: set[int] = set()  # the pids a handle follows
        self._starved: set[int] = set()  # pids polled for the budget: followed when it frees
        self._freed = False  # a handle was released since the last sync
        self._gone: dict[int, float | None] = {}  # (pid, start) found exited: never again
        self._evidence: dict[tuple[Evidence, Reason], Evidence] = {}
        self._reasons: dict[tuple[int, str, str], Reason] = {}

    # -- reading ----------------------------------------------------------------------------

    @property
    def followed_pids(self) -> Set[int]:
        """The PIDs the kernel follows now (left out of the liveness pass; a live view: do
        not change it)."""
        return self._followed

    def stats(self) -> ExitStats:
        """:class:`ExitStats` of now."""
        polled: Counter[str] = Counter()
        followed = 0
        for f in self._procs.values():
            if f.handle is not None:
                followed += 1
            else:
                polled[str(f.how.get("why"))] += 1
        kind = self._backend.kind if self._backend is not None else None
        return ExitStats(kind, followed, dict(polled))

    # -- following --------------------------------------------------------------------------

    def sync(self, inventory: Inventory, paths: Iterable[str]) -> list[int]:
        """Follow the live holders of ``paths`` (the paths a round touched), stop following
        those no path holds any more, and put into each live holder's status how it is
        followed (``Evidence.followed``). Returns the PIDs found gone while opening (exited,
        or the PID names another process now): the caller re-judges their paths at once."""
        gone: dict[int, None] = {}  # in order, once each
        freed = False
        for path in paths:
            e = inventory.get(path)
            pid = inventory.pid_of(path) if e is not None else None
            want = _wanted(e.status, pid) if e is not None and pid is not None else None
            old = self._path_pid.get(path)
            if old is not None and (want is None or old != pid
                                    or not _same(self._procs[old].start, want[0])):
                freed = self._detach(path, old) or freed
            if want is None or e is None or pid is None or pid in gone:
                continue
            f = self._procs.get(pid)
            if f is not None and not _same(f.start, want[0]):  # another process, same PID
                for p in list(f.paths):
                    freed = self._detach(p, pid) or freed
                gone[pid] = None
                continue
            if f is None:
                made = self._open(pid, *want)
                if not isinstance(made, _Follow):  # _GONE
                    gone[pid] = None
                    continue
                f = self._procs[pid] = made
            f.paths.add(path)
            self._path_pid[path] = pid
            self._annotate(e, f.how)
        if (freed or self._freed) and self._starved:
            self._revive(inventory)
        self._freed = False
        return list(gone)

    def fired(self, pid: int, handle: int) -> bool:
        """Called on the worker thread for a ``post(pid, handle)``: True when process ``pid``
        followed by ``handle`` has exited (its handle is then released and the caller
        re-judges its paths); False for an event that is not (the handle is waited for
        again)."""
        backend = self._backend
        if backend is None:
            return False
        owner = self._handles.get(handle)
        if owner != pid:
            if owner is not None:
                backend.rearm(handle)  # a stale event disarmed another process's wait
            return False
        if not backend.exited(handle):
            backend.rearm(handle)
            return False
        f = self._procs[pid]
        self._release(f)
        self._remember_gone(pid, f.start)
        return True

    def close(self) -> None:
        """Release every handle and the backend. Never raises."""
        for f in self._procs.values():
            self._release(f)
        self._procs.clear()
        self._path_pid.clear()
        if self._backend is not None:
            self._backend.close()

    # -- inside -----------------------------------------------------------------------------

    def _reason(self, pid: int, code: Code, value: str) -> Reason:
        key = (pid, code.value, value)
        r = self._reasons.get(key)
        if r is None:
            if len(self._reasons) > 65536:
                self._reasons.clear()
            r = self._reasons[key] = (Reason.of(code, pid=pid, how=value)
                                      if code is Code.LIVENESS_FOLLOWED
                                      else Reason.of(code, pid=pid, every_s=self.every_s,
                                                     why=value))
        return r

    def _polled(self, pid: int, start: float | None, why: str) -> _Follow:
        return _Follow(start, None, self._reason(pid, Code.LIVENESS_POLLED, why))

    def backend(self) -> Backend | None:
        """This platform's backend, made on first need (``None``: none here)."""
        if self._backend is None and self._no_backend is None:
            self._backend, why = make_backend(self._post, self._reader)
            if self._backend is None:
                self._no_backend = why
            else:  # what judging a dead holder imports, now rather than at its first exit
                import core.kernel.pin  # noqa: F401
        return self._backend

    def _open(self, pid: int, start: float | None, why: str | None) -> _Follow | object:
        if why is not None or start is None:
            return self._polled(pid, start, why or "unverified")
        if pid in self._gone and self._gone[pid] == start:  # judged alive after its exit
            return self._polled(pid, start, "error")
        if self.budget is not None and self._count() >= self.budget:
            self._starved.add(pid)
            return self._polled(pid, start, "descriptor_budget")
        backend = self.backend()
        if backend is None:
            return self._polled(pid, start, self._no_backend or "unsupported")
        try:
            h = backend.open(pid)
        except ProcessLookupError:
            self._remember_gone(pid, start)
            return _GONE
        except PermissionError:
            return self._polled(pid, start, "denied")
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):
                self._starved.add(pid)
                return self._polled(pid, start, "descriptor_budget")
            return self._polled(pid, start, "error")
        if not backend.spare(h):
            backend.release(h)
            self._starved.add(pid)
            return self._polled(pid, start, "descriptor_budget")
        # the handle names the process that had the PID when it was opened: the holder only
        # when that process started when the verdict's did (else the holder is gone)
        now = backend.start_time(pid)
        if now is None or not _same_start(now, start) or backend.exited(h):
            backend.release(h)
            self._remember_gone(pid, start)
            return _GONE
        try:
            backend.watch(h, pid)
        except OSError:
            backend.release(h)
            return self._polled(pid, start, "error")
        self._handles[h] = pid
        self._followed.add(pid)
        self._starved.discard(pid)
        return _Follow(start, h, self._reason(pid, Code.LIVENESS_FOLLOWED, backend.kind))

    def _count(self) -> int:
        return len(self._handles)

    def _remember_gone(self, pid: int, start: float | None) -> None:
        if len(self._gone) > 4096:
            self._gone.clear()
        self._gone[pid] = start

    def _release(self, f: _Follow) -> None:
        if f.handle is not None:
            pid = self._handles.pop(f.handle, None)
            self._followed.discard(pid)
            self._freed = True
            if self._backend is not None:
                self._backend.release(f.handle)
            f.handle = None

    def _detach(self, path: str, pid: int) -> bool:
        """Stop counting ``path`` under ``pid``; True when a handle was released."""
        self._path_pid.pop(path, None)
        f = self._procs.get(pid)
        if f is None:
            return False
        f.paths.discard(path)
        if f.paths:
            return False
        del self._procs[pid]
        self._starved.discard(pid)
        had = f.handle is not None
        self._release(f)
        return had

    def _revive(self, inventory: Inventory) -> None:
        """Follow processes the budget left to the pass, while it allows."""
        for pid in list(self._starved):
            if self.budget is not None and self._count() >= self.budget:
                return
            f = self._procs.get(pid)
            self._starved.discard(pid)
            if f is None or f.handle is not None:
                continue
            made = self._open(pid, f.start, None)
            if not isinstance(made, _Follow) or made.handle is None:
                if isinstance(made, _Follow):
                    f.how = made.how
                return  # still no descriptor (or gone: the pass sees it)
            f.handle, f.how = made.handle, made.how
            for path in f.paths:
                e = inventory.get(path)
                if e is not None:
                    self._annotate(e, f.how)

    def _annotate(self, e: Entry, how: Reason) -> None:
        """Put ``how`` into ``e``'s status's evidence (same verdict: no change is reported)."""
        st = e.status
        ev = st.evidence
        if ev.followed is how:
            return
        key = (ev, how)
        made = self._evidence.get(key)
        if made is None:
            if len(self._evidence) > 65536:
                self._evidence.clear()
            made = self._evidence[key] = replace(ev, followed=how)
        e.status = replace(st, evidence=made)
