"""Waiting for a lock (docs/engine.md, "Wait"): the one-shot :func:`wait` for a path to be
free, the event-driven loop :func:`wait_until` the engine's blocking acquire uses, and the
:class:`Waiter` that wakes it, with a slow fallback poll.

A :class:`Waiter` wakes its caller when something may have changed for one lock path:

- a directory event naming the lock (deleted, moved away or in, created, written), and
- the exit of the holder process when it runs on this host (a SIGKILLed holder makes no file
  event; a Lockwarden lock is stale as soon as its holder is dead).

The caller also passes a timeout: the engine's slow poll (network file systems give no events,
other tools' locks turn stale by age without an event) and the exact moment a TTL expires or
``stale_after`` passes.

Mechanisms, chosen so that one ``poll()`` call in the waiting thread sees everything:

- Linux: an inotify descriptor on the lock's directory (the maintained ``inotify_simple``
  wrapper: one descriptor, no thread) and a pidfd (``os.pidfd_open``), which becomes readable
  when the process exits.
  Why inotify and not watchdog's ``Observer`` here: watchdog's inotify emitter holds every
  ``IN_MOVED_FROM`` for up to 0.5 s to pair it with its ``IN_MOVED_TO`` and delivers nothing
  else meanwhile, so any rename in the directory (our own reclaim exchange, a ``semats``
  acquire) would delay the wake-up of a waiter by up to half a second; it also needs two
  threads per watch. The waiter only needs "something happened to this name".
- Elsewhere: watchdog's ``Observer`` (kqueue, FSEvents, ReadDirectoryChangesW; imported
  lazily) and a helper thread around ``psutil.wait_procs``; both write a byte to a pipe that
  the waiting thread polls.
If neither event source can be set up (inotify watches exhausted, ...), the waiter still
works: it simply sleeps until the caller's timeout.
"""

from __future__ import annotations

import contextlib
import os
import queue
import select
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from core.codes import Code
from core.engine.operations import on_this_host, resolve_policy, state_phrase
from core.errors import LockTimeout
from core.fsutil import refuse_unreadable, validate_lock_path
from core.record import Liveness, LockStatus, State
from core.stale_policy import StalePolicy
from core.verdicts.inspect import inspect

try:
    import inotify_simple  # type: ignore[import-untyped]
except ImportError:  # not Linux (a Linux-only dependency): watchdog's Observer instead
    inotify_simple = None


class _InotifyEvent(Protocol):
    """One event as ``inotify_simple`` returns it (``wd``, ``mask``, ``cookie``, ``name``)."""

    @property
    def mask(self) -> int: ...

    @property
    def name(self) -> str: ...


class _Inotify(Protocol):
    """The part of ``inotify_simple.INotify`` the waiter uses."""

    def fileno(self) -> int: ...

    def add_watch(self, path: str, mask: int) -> int: ...

    def read(self, timeout: int | None = None) -> Sequence[_InotifyEvent]: ...

    def close(self) -> None: ...


if inotify_simple is not None:
    _F = inotify_simple.flags
    _DIR_MASK: int = (_F.MODIFY | _F.ATTRIB | _F.CLOSE_WRITE | _F.MOVED_FROM | _F.MOVED_TO
                      | _F.CREATE | _F.DELETE | _F.DELETE_SELF | _F.MOVE_SELF | _F.ONLYDIR)
    _ALWAYS: int = _F.Q_OVERFLOW | _F.IGNORED | _F.DELETE_SELF | _F.MOVE_SELF
    """Events that may concern the lock whatever name they carry (the directory itself went
    away, or the kernel dropped events)."""


def _inotify_watch(dirpath: str) -> _Inotify | None:
    """A non-blocking inotify instance watching ``dirpath``, or None when inotify is
    unavailable (not Linux, watches exhausted, a missing directory...)."""
    if inotify_simple is None:
        return None
    try:
        ino: _Inotify = inotify_simple.INotify(nonblocking=True)  # close-on-exec
    except (OSError, AttributeError):  # no inotify_init1 in this libc
        return None
    try:
        ino.add_watch(dirpath, _DIR_MASK)
    except OSError:
        ino.close()
        return None
    return ino


_closer_queue: queue.SimpleQueue[_Inotify] | None = None
_closer_lock = threading.Lock()


def _reset_closer_after_fork() -> None:
    global _closer_queue, _closer_lock
    _closer_queue = None  # the helper thread does not exist in a forked child
    _closer_lock = threading.Lock()  # and may have held the lock at the fork


if sys.platform != "win32":  # no fork on Windows
    os.register_at_fork(after_in_child=_reset_closer_after_fork)


def _close_later(ino: _Inotify) -> None:
    """Close an inotify instance in a helper thread: the kernel waits for an RCU grace
    period when an inotify instance is destroyed (10-20 ms measured here), which would
    otherwise be paid by every acquire that had to wait, after it already holds the lock."""
    global _closer_queue
    with _closer_lock:
        if _closer_queue is None:
            q: queue.SimpleQueue[_Inotify] = queue.SimpleQueue()

            def run() -> None:
                while True:
                    with contextlib.suppress(OSError):
                        q.get().close()

            threading.Thread(target=run, name="lockwarden-fd-closer", daemon=True).start()
            _closer_queue = q
    _closer_queue.put(ino)


class Waiter:
    """Wakes the waiting thread on events about one lock path (see module docstring).

    Use as a context manager; call :meth:`watch_holder` with the holder's PID (on this host)
    before each :meth:`wait`. Not thread-safe: one waiting thread per Waiter.
    """

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        self.dirpath, self.name = os.path.split(self.path)
        self._inotify: _Inotify | None = None
        self._pipe: tuple[int, int] | None = None
        self._observer: Any = None
        self._pid: int | None = None
        self._pidfd: int | None = None
        self._pid_thread_stop: threading.Event | None = None
        self._flag = threading.Event()
        self.holder_exited = False
        """True once the watched holder PID was seen to exit (cleared by a new PID)."""
        self.events = False
        """True when a directory event source is active (else the caller should poll)."""

    # -- set-up ---------------------------------------------------------------------------
    def __enter__(self) -> Waiter:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        """Start watching the directory. Never raises: without an event source the waiter
        only sleeps until the timeout (``events`` is then False)."""
        self._inotify = _inotify_watch(self.dirpath)
        if self._inotify is not None:
            self.events = True
            return
        self._make_pipe()
        try:
            self._start_observer()
            self.events = True
        except Exception:  # inotify/kqueue limits, missing directory: degrade to polling
            self._observer = None

    def _start_observer(self) -> None:
        from watchdog.events import (
            FileClosedEvent,
            FileCreatedEvent,
            FileDeletedEvent,
            FileModifiedEvent,
            FileMovedEvent,
            FileSystemEvent,
            FileSystemEventHandler,
        )
        from watchdog.observers import Observer

        name = self.name
        poke = self._poke

        class _Handler(FileSystemEventHandler):
            # the watch is not recursive: the base name identifies the lock (FSEvents may
            # report the directory by another spelling, e.g. /private/var for /var)
            def on_any_event(self, event: FileSystemEvent) -> None:
                src = os.path.basename(os.fsdecode(event.src_path))
                dest = os.path.basename(os.fsdecode(event.dest_path)) if event.dest_path else ""
                if name in (src, dest):
                    poke()

        observer = Observer()
        observer.schedule(
            _Handler(),
            self.dirpath,
            recursive=False,
            event_filter=[FileDeletedEvent, FileMovedEvent, FileCreatedEvent,
                          FileModifiedEvent, FileClosedEvent],
        )
        observer.daemon = True
        observer.start()
        self._observer = observer

    def _make_pipe(self) -> None:
        if self._pipe is not None or sys.platform == "win32":
            return  # without poll() (Windows), _poke sets a threading.Event instead
        self._pipe = os.pipe()
        os.set_blocking(self._pipe[0], False)
        os.set_blocking(self._pipe[1], False)

    def _poke(self) -> None:
        self._flag.set()
        if self._pipe is not None:
            with contextlib.suppress(OSError):
                os.write(self._pipe[1], b"x")

    def close(self) -> None:
        """Stop watching and release every descriptor and thread."""
        self._forget_pid()
        if self._observer is not None:
            with contextlib.suppress(Exception):
                self._observer.stop()
            self._observer = None
        if self._inotify is not None:
            _close_later(self._inotify)
            self._inotify = None
        if self._pipe is not None:
            for fd in self._pipe:
                os.close(fd)
            self._pipe = None

    # -- holder process ---------------------------------------------------------------------
    def _forget_pid(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        if self._pid_thread_stop is not None:
            self._pid_thread_stop.set()
            self._pid_thread_stop = None
        self._pid = None
        self.holder_exited = False

    def watch_holder(self, pid: int | None) -> None:
        """Watch process ``pid`` (on this host) for exit; ``None`` stops watching.

        Call it *before* re-checking that the lock still names a live ``pid``: a descriptor
        opened first refers to that very process even if the PID is reused later."""
        if pid == self._pid:
            return
        self._forget_pid()
        if pid is None or pid <= 0:
            return
        self._pid = pid
        if sys.platform.startswith("linux") and hasattr(os, "pidfd_open"):  # Linux >= 5.3
            try:
                self._pidfd = os.pidfd_open(pid)
                return
            except ProcessLookupError:
                self.holder_exited = True
                return
            except OSError:
                pass  # ENOSYS (old kernel, seccomp), EPERM: fall back to psutil
        self._start_pid_thread(pid)

    def _start_pid_thread(self, pid: int) -> None:
        import psutil

        try:
            proc = psutil.Process(pid)
        except psutil.Error:
            self.holder_exited = True
            return
        self._make_pipe()
        stop = threading.Event()
        self._pid_thread_stop = stop
        poke = self._poke

        def run() -> None:
            while not stop.is_set():
                try:
                    gone, _alive = psutil.wait_procs([proc], timeout=0.25)
                except Exception:  # psutil's own wait failed (no pidfd here...): ask plainly
                    gone = [] if proc.is_running() else [proc]
                    stop.wait(0.25)
                if gone:
                    if not stop.is_set():
                        poke()
                    return

        threading.Thread(target=run, name="lockwarden-holder-watch", daemon=True).start()

    # -- waiting ----------------------------------------------------------------------------
    def wait(self, timeout: float | None) -> str:
        """Block until an event about the lock, the holder's exit, or ``timeout`` seconds
        (``None``: no limit). Returns ``"event"``, ``"exit"`` or ``"timeout"``."""
        if sys.platform == "win32":  # no poll()
            fired = self._flag.wait(timeout)
            self._flag.clear()
            if fired and self._pid_thread_stop is not None:
                self._check_pid_gone()
            return "event" if fired else "timeout"
        poller = select.poll()
        if self._inotify is not None:
            poller.register(self._inotify.fileno(), select.POLLIN)
        if self._pipe is not None:
            poller.register(self._pipe[0], select.POLLIN)
        if self._pidfd is not None and not self.holder_exited:
            poller.register(self._pidfd, select.POLLIN)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ms = None if left is None else int(left * 1000 + 0.999)
            try:
                ready = poller.poll(ms)
            except InterruptedError:  # pragma: no cover - PEP 475 retries
                return "timeout"
            result = self._handle(ready)
            # events about other files in the directory (busy /tmp) are not a reason to
            # re-check the lock: keep waiting until something relevant or the deadline
            if result != "timeout" or not ready or (left is not None and left <= 0):
                return result

    def _handle(self, ready: list[tuple[int, int]]) -> str:
        result = "timeout"
        for fd, _mask in ready:
            if fd == self._pidfd:
                self.holder_exited = True
                result = "exit"
            elif self._inotify is not None and fd == self._inotify.fileno():
                if self._drain_inotify() and result == "timeout":
                    result = "event"
            elif self._pipe is not None and fd == self._pipe[0]:
                self._drain_pipe()
                if self._pid_thread_stop is not None and self._pid is not None:
                    self._check_pid_gone()
                if result == "timeout":
                    result = "event"
        return result

    def _check_pid_gone(self) -> None:
        import psutil

        if self._pid is not None and not psutil.pid_exists(self._pid):
            self.holder_exited = True

    def _drain_pipe(self) -> None:
        assert self._pipe is not None
        with contextlib.suppress(BlockingIOError):
            while os.read(self._pipe[0], 4096):
                pass

    def _drain_inotify(self) -> bool:
        """Read all pending inotify events; True when one names the lock (or may have)."""
        assert self._inotify is not None
        relevant = False
        while True:
            try:
                events = self._inotify.read(timeout=0)
            except OSError:  # pragma: no cover - cannot tell what happened: look again
                return True
            if not events:
                return relevant
            for event in events:
                if event.mask & _ALWAYS or event.name == self.name:
                    relevant = True


POLL_INTERVAL = 1.0
"""Seconds between re-checks while waiting with directory events (the slow fallback poll)."""

POLL_NO_EVENTS = 0.25
"""Seconds between re-checks while waiting when no directory event source could be set up."""




def wait(
    path: str | os.PathLike[str],
    *,
    timeout: float | None = None,
    stale_after: float | None = None,
    policy: StalePolicy | None = None,
) -> LockStatus:
    """Block until the lock at ``path`` can be taken: it is ``free``, or ``stale`` (a stale
    lock is reclaimed by the next acquire). Returns that verdict. Event-driven like a
    blocking :meth:`core.engine.lock.Lock.acquire` (directory events, the local holder's exit, 1 s
    poll; docs/engine.md, "Waiting is event-driven").

    Args:
        timeout: seconds (None: no limit).
        stale_after: the stale policy's limit for other tools' locks, seconds; replaces
            ``policy.stale_after`` when given.
        policy: the stale policy to judge with (default
            :data:`core.stale_policy.DEFAULT_POLICY`: 3600 s, as in the specs).

    Raises:
        LockTimeout: ``timeout`` passed first (``.status``: the last verdict).
        UnreadableError: the path's directory is missing, or the path is a symlink, FIFO,
            directory or device.
        ValueError: ``stale_after`` is not a finite number of seconds > 0.
    """
    p = validate_lock_path(path)
    judge = resolve_policy(policy, stale_after)
    deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
    status = inspect(p, policy=judge)
    if status.state in (State.FREE, State.STALE):
        return status
    settled: list[LockStatus] = []

    def look() -> LockStatus | None:
        st = inspect(p, policy=judge)
        if st.state in (State.FREE, State.STALE):
            settled.append(st)
            return None
        refuse_unreadable(p, st)
        return st

    wait_until(p, judge, status, deadline, timeout, look)
    return settled[-1]


def local_holder_pid(status: LockStatus) -> int | None:
    """The PID to watch for exit while ``status`` stops us: a live holder on this host -- for a
    lock alive by its holder's pin (reason ``holder_pinned``), the process keeping the pin;
    else the one the lock records, else the process its evidence names (the kernel lock's
    holder, the process that has an empty file open) -- else None (a dead one's exit is past;
    a remote or unknown one cannot be watched)."""
    rec = status.record
    if status.state is State.FREE or status.liveness is not Liveness.ALIVE:
        return None
    if rec is None:
        return status.evidence.pid
    if rec.pid is None:
        return None
    pin = next((r for r in status.reasons if r.code is Code.HOLDER_PINNED), None)
    if pin is not None:
        # alive by its pin (docs/engine.md, "The holder's pin"): the recorded PID is dead or
        # another process; watch the process that keeps the pin (a re-check follows its exit)
        keeper = pin.get("pid")
        return keeper if isinstance(keeper, int) and keeper > 0 else None
    return rec.pid if on_this_host(rec.host) else None


def wait_until(
    path: str,
    policy: StalePolicy,
    status: LockStatus,
    deadline: float | None,
    timeout: float | None,
    attempt: Callable[[], LockStatus | None],
) -> None:
    """Sleep on the lock's directory events and its local holder's exit (no polling loop;
    docs/DESIGN.md "Lock operations", wait), calling ``attempt()`` after each wake-up until it
    returns ``None`` (done); otherwise it returns the verdict that still stops us.

    ``deadline`` is a ``time.monotonic()`` value (``timeout``, seconds, only names it in the
    message).

    Raises:
        LockTimeout: the deadline passed (``.status``: the last verdict).
    """
    # imported on the first wait only: inotify_simple loads ctypes.util (~7 ms), which the
    # CLI's non-waiting verbs must not pay (docs/cli.md, "Start-up time")

    with Waiter(path) as waiter:
        backoff = 0.005
        watched: int | None = -1
        while True:
            pid = local_holder_pid(status)
            if pid != watched:
                # open the pidfd *before* the next check, so the check that says "alive"
                # and the descriptor refer to the same process
                waiter.watch_holder(pid)
                watched = pid
            else:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise LockTimeout(
                        f"timed out after {timeout:g} s waiting for {status.path}: "
                        f"{state_phrase(status)}", status
                    )
                wake = next_wake(status, policy, waiter.events, remaining)
                if waiter.holder_exited and status.liveness is Liveness.ALIVE:
                    # the holder exited but is still judged alive (not yet reaped):
                    # re-check soon, backing off
                    wake = min(wake, backoff) if wake is not None else backoff
                    backoff = min(backoff * 2, 0.5)
                waiter.wait(wake)
            after = attempt()
            if after is None:
                return
            status = after


def next_wake(
    status: LockStatus, policy: StalePolicy, events: bool, remaining: float | None
) -> float | None:
    """Seconds until the next re-check: the slow poll (:data:`POLL_INTERVAL`, or
    :data:`POLL_NO_EVENTS` without directory events), the moment a TTL expires or
    ``stale_after`` passes, the end of the writing grace, or the caller's timeout."""
    wake = POLL_INTERVAL if events else POLL_NO_EVENTS
    now = time.time()
    rec = status.record
    bounds: list[float] = []
    if rec is not None:
        expiry = rec.effective_expiry()
        if expiry is not None:
            bounds.append(expiry.timestamp() - now)
        if rec.acquired_at is not None:
            bounds.append(rec.acquired_at.timestamp() + policy.stale_after - now)
    if status.state is State.WRITING and status.file is not None:
        bounds.append(status.file.mtime_ns / 1e9 + policy.writing_grace - now)
    for b in bounds:
        if b > 0:
            wake = min(wake, b + 0.002)
    if remaining is not None:
        wake = min(wake, max(remaining, 0.0))
    return wake


