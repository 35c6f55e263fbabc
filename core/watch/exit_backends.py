"""The platforms' exit notifications behind :class:`core.watch.exits.ExitFollower`
(docs/watching.md, "Holders' exits"): the :class:`Backend` protocol and one backend per
platform, chosen by :func:`make_backend`.

- :class:`PidfdExits` (``sys.platform == "linux"``, kernel >= 5.3): one pidfd per followed
  process, waited for by the watcher's inotify reader thread in the same ``epoll`` as the
  inotify descriptor (:meth:`core.watch.tree.TreeWatcher.follow`): no thread of its own. The
  soft ``RLIMIT_NOFILE`` is raised to the hard one once (:func:`raise_fd_limit`), and no pidfd
  is kept within :data:`FD_MARGIN` of it.
- :class:`KqueueExits` (``sys.platform == "darwin"``; the BSDs have the same calls): one
  kqueue, an ``EVFILT_PROC`` filter with ``NOTE_EXIT`` per followed PID (no descriptor per
  process), one daemon thread waiting in ``kevent``; a pipe wakes it to stop. The handle of a
  process is its PID: the filter is attached to the process that has the PID when it is
  added (the caller then checks its start time).
- :class:`HandleExits` (``sys.platform == "win32"``): a process handle per followed process
  (``OpenProcess(SYNCHRONIZE | PROCESS_QUERY_LIMITED_INFORMATION)``), signalled when the
  process ends. ``WaitForMultipleObjects`` takes 64 handles at most, so handles are waited
  for in groups of 63, one daemon thread a group, the 64th slot an event that wakes the
  group's thread when its handles change or it must stop.

The tests run on Linux; the macOS and Windows backends are written so that
``mypy --platform darwin`` / ``--platform win32`` checks them, each guarded by
``sys.platform``.
"""

from __future__ import annotations

import errno
import logging
import os
import select
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from core.watch.tree import TreeWatcher

__all__ = ["FD_MARGIN", "GROUP", "Backend", "Post", "make_backend", "raise_fd_limit"]

log = logging.getLogger("core.watch.watcher")  # one logger for everything the watcher does

GROUP = 63
"""Process handles one Windows thread waits for (``MAXIMUM_WAIT_OBJECTS`` is 64; one slot is
the group's wake-up event)."""

FD_MARGIN = 256
"""Descriptors left to the rest of the process: no pidfd is kept whose number is within this
many of the soft ``RLIMIT_NOFILE`` (the kernel gives the lowest free number, so a pidfd numbered
``n`` means ``n`` descriptors below it are taken)."""

Post = Callable[[int, int], None]
"""Called with ``(pid, handle)`` when a followed process may have exited (on the thread that
waits: it only queues; :meth:`ExitFollower.fired` confirms)."""


class Backend(Protocol):
    """One platform's exit notifications (see the module docstring). ``handle`` values are
    ints: a pidfd, a PID (kqueue), a process handle (Windows)."""

    kind: str
    """``"pidfd"``, ``"kqueue"`` or ``"handle"``: the ``how`` of ``liveness_followed``."""

    def open(self, pid: int) -> int:
        """A notification for the process that has ``pid`` now (not yet waited for).

        Raises:
            ProcessLookupError: no such process.
            PermissionError: this user may not open it.
            OSError: anything else (``EMFILE``: no descriptor left).
        """

    def spare(self, handle: int) -> bool:
        """False when keeping ``handle`` eats into :data:`FD_MARGIN`."""

    def start_time(self, pid: int) -> float | None:
        """The start time (Unix s, as psutil's ``create_time``) of the process that has
        ``pid`` now; ``None`` when there is none, or it is a zombie."""

    def exited(self, handle: int) -> bool:
        """True when the process has exited (never blocks)."""

    def watch(self, handle: int, pid: int) -> None:
        """Start waiting: ``post(pid, handle)`` once when it may have exited.

        Raises:
            OSError: it cannot be waited for.
        """

    def rearm(self, handle: int) -> None:
        """Wait again after a ``post`` that :meth:`exited` did not confirm."""

    def release(self, handle: int) -> None:
        """Stop waiting and close ``handle``. Never raises."""

    def close(self) -> None:
        """Release everything (and stop a thread of its own). Never raises."""


_fd_limit_raised = False


def raise_fd_limit() -> tuple[int, int] | None:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard one, once per process (Unix); returns
    ``(soft, hard)`` after it, or ``None`` where there are no resource limits. A hard limit
    of ``RLIM_INFINITY`` is capped at ``/proc/sys/fs/nr_open`` (Linux) or 1,048,576. Never
    raises."""
    global _fd_limit_raised
    if sys.platform == "win32":
        return None
    import resource

    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if _fd_limit_raised or soft == hard:
            _fd_limit_raised = True
            return soft, hard
        _fd_limit_raised = True
        want = hard
        if want == resource.RLIM_INFINITY:
            want = 1 << 20
            try:
                with open("/proc/sys/fs/nr_open", encoding="ascii") as f:
                    want = int(f.read().strip())
            except (OSError, ValueError):
                pass
        if soft == resource.RLIM_INFINITY or (0 <= want <= soft):
            return soft, hard
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        return resource.getrlimit(resource.RLIMIT_NOFILE)
    except (OSError, ValueError):
        log.debug("cannot raise RLIMIT_NOFILE", exc_info=True)
        return None


def _soft_fd_limit() -> int | None:
    if sys.platform == "win32":
        return None
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return None if soft == resource.RLIM_INFINITY else int(soft)


def _psutil_start(pid: int) -> float | None:
    from core.verdicts.liveness import process_start_time

    return process_start_time(pid)


if sys.platform == "linux":
    _CLK_TCK = os.sysconf("SC_CLK_TCK")

    def _boot_time() -> float | None:
        from core.verdicts.liveness import boot_time

        return boot_time()

    class PidfdExits:
        """Linux: one pidfd per followed process, waited for by ``reader``'s thread (the
        watcher's inotify reader, :meth:`core.watch.tree.TreeWatcher.follow`)."""

        kind = "pidfd"

        def __init__(self, reader: TreeWatcher, post: Post) -> None:
            self._reader = reader
            self._post = post
            raise_fd_limit()
            self._limit = _soft_fd_limit()

        def open(self, pid: int) -> int:
            return os.pidfd_open(pid)

        def spare(self, handle: int) -> bool:
            return self._limit is None or handle < self._limit - FD_MARGIN

        def start_time(self, pid: int) -> float | None:
            """psutil's ``create_time`` without psutil: field 22 of ``/proc/<pid>/stat``
            (clock ticks since boot) over the clock rate, plus the boot time (one read, not
            the four of a psutil look-up: 10,000 holders are opened in a start)."""
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    data = f.read()
            except OSError:
                return None
            fields = data[data.rfind(b")") + 2:].split()
            if len(fields) < 20 or fields[0] == b"Z" or not fields[19].isdigit():
                return None
            boot = _boot_time()
            return None if boot is None else int(fields[19]) / _CLK_TCK + boot

        def exited(self, handle: int) -> bool:
            p = select.poll()
            p.register(handle, select.POLLIN)
            try:
                return bool(p.poll(0))
            except OSError:
                return True

        def watch(self, handle: int, pid: int) -> None:
            post = self._post
            self._reader.follow(handle, lambda fd: post(pid, fd))

        def rearm(self, handle: int) -> None:
            self._reader.rearm(handle)

        def release(self, handle: int) -> None:
            self._reader.unfollow(handle)
            try:
                os.close(handle)
            except OSError:
                pass

        def close(self) -> None:
            pass  # the pidfds are released one by one; the reader belongs to the sources


def make_backend(post: Post, reader: Callable[[], TreeWatcher | None]) -> tuple[Backend | None,
                                                                                 str]:
    """This platform's :class:`Backend`, or ``(None, why)``: ``why`` a ``liveness_polled``
    reason (``unsupported``, ``no_reader``). ``reader`` gives the watcher's inotify reader
    (:meth:`core.watch.sources.Sources.tree`; may raise ``OSError``)."""
    if sys.platform == "linux":
        return _pidfd_backend(post, reader)
    if sys.platform == "darwin":
        try:
            return KqueueExits(post), ""
        except OSError:
            return None, "unsupported"
    if sys.platform == "win32":
        try:
            return HandleExits(post), ""
        except OSError:
            return None, "unsupported"
    return None, "unsupported"


if sys.platform == "linux":

    def _pidfd_backend(post: Post, reader: Callable[[], TreeWatcher | None]
                       ) -> tuple[Backend | None, str]:
        """:class:`PidfdExits` on the watcher's inotify reader, when the kernel has pidfds
        (>= 5.3) and the reader can be had."""
        try:
            os.close(os.pidfd_open(os.getpid()))
        except OSError as exc:
            if exc.errno in (errno.ENOSYS, errno.EPERM):  # a kernel before 5.3; seccomp
                return None, "unsupported"
        try:
            tree = reader()
        except OSError:
            return None, "no_reader"
        if tree is None:
            return None, "no_reader"
        return PidfdExits(tree, post), ""



if sys.platform == "darwin":

    class KqueueExits:
        """macOS: ``EVFILT_PROC``/``NOTE_EXIT`` on one kqueue, one thread (see the module
        docstring). Handles are PIDs.

        Raises:
            OSError: from the constructor when no kqueue can be had.
        """

        kind = "kqueue"

        def __init__(self, post: Post) -> None:
            self._post = post
            self._kq = select.kqueue()
            self._stop_r, self._stop_w = os.pipe()
            self._kq.control([select.kevent(self._stop_r, select.KQ_FILTER_READ,
                                            select.KQ_EV_ADD)], 0)
            self._lock = threading.Lock()
            self._fired: set[int] = set()
            self._thread = threading.Thread(target=self._run, name="lockwarden-exits",
                                            daemon=True)
            self._thread.start()

        def open(self, pid: int) -> int:
            """Attach the exit filter to the process that has ``pid`` now (``ESRCH`` when
            there is none is ``ProcessLookupError``)."""
            with self._lock:
                self._fired.discard(pid)
            self._kq.control([select.kevent(pid, select.KQ_FILTER_PROC,
                                            select.KQ_EV_ADD | select.KQ_EV_ONESHOT,
                                            select.KQ_NOTE_EXIT)], 0)
            return pid

        def spare(self, handle: int) -> bool:
            """Always: a filter takes no descriptor."""
            return True

        def start_time(self, pid: int) -> float | None:
            """psutil's ``create_time`` (``None``: gone, a zombie, not readable)."""
            return _psutil_start(pid)

        def exited(self, handle: int) -> bool:
            """True when the filter fired, or the process is gone already."""
            with self._lock:
                if handle in self._fired:
                    return True
            try:
                os.kill(handle, 0)
            except ProcessLookupError:
                return True
            except PermissionError:
                return False
            return False

        def watch(self, handle: int, pid: int) -> None:
            """Nothing more: the filter added by :meth:`open` already waits."""

        def rearm(self, handle: int) -> None:
            """Nothing: a filter that did not fire still waits."""

        def release(self, handle: int) -> None:
            """Remove the filter (gone with its process already: not an error)."""
            with self._lock:
                self._fired.discard(handle)
            try:
                self._kq.control([select.kevent(handle, select.KQ_FILTER_PROC,
                                                select.KQ_EV_DELETE)], 0)
            except OSError:
                pass

        def close(self) -> None:
            """Stop the thread and close the kqueue."""
            try:
                os.write(self._stop_w, b"x")
            except OSError:
                return
            self._thread.join(2.0)
            os.close(self._stop_w)

        def _run(self) -> None:
            try:
                while True:
                    for ev in self._kq.control(None, 64, None):
                        if ev.filter == select.KQ_FILTER_READ and ev.ident == self._stop_r:
                            return
                        if ev.filter == select.KQ_FILTER_PROC:
                            pid = int(ev.ident)
                            with self._lock:
                                self._fired.add(pid)
                            self._post(pid, pid)
            except Exception:  # pragma: no cover - a bug here must not kill the app silently
                log.exception("lockwarden watcher: the exit notifications stopped")
            finally:
                os.close(self._stop_r)
                self._kq.close()


if sys.platform == "win32":
    import ctypes
    from ctypes import wintypes

    _k32 = ctypes.WinDLL("kernel32", use_last_error=True)
    _k32.OpenProcess.restype = wintypes.HANDLE
    _k32.OpenProcess.argtypes = [wintypes.DWORD, wintypes.BOOL, wintypes.DWORD]
    _k32.CloseHandle.argtypes = [wintypes.HANDLE]
    _k32.WaitForSingleObject.argtypes = [wintypes.HANDLE, wintypes.DWORD]
    _k32.WaitForSingleObject.restype = wintypes.DWORD
    _k32.WaitForMultipleObjects.argtypes = [wintypes.DWORD, ctypes.POINTER(wintypes.HANDLE),
                                            wintypes.BOOL, wintypes.DWORD]
    _k32.WaitForMultipleObjects.restype = wintypes.DWORD
    _k32.CreateEventW.restype = wintypes.HANDLE
    _k32.CreateEventW.argtypes = [ctypes.c_void_p, wintypes.BOOL, wintypes.BOOL,
                                  wintypes.LPCWSTR]
    _k32.SetEvent.argtypes = [wintypes.HANDLE]

    _SYNCHRONIZE = 0x00100000
    _QUERY_LIMITED = 0x1000
    _WAIT_OBJECT_0 = 0
    _WAIT_FAILED = 0xFFFFFFFF
    _INFINITE = 0xFFFFFFFF
    _ERROR_INVALID_PARAMETER = 87  # no process has that PID
    _ERROR_ACCESS_DENIED = 5

    class _Group:
        """Up to :data:`GROUP` handles and the thread waiting for them. Handles released
        while the thread may wait on them are closed by the thread itself, out of its wait
        (closing a handle being waited for is undefined)."""

        def __init__(self, owner: HandleExits) -> None:
            self.owner = owner
            self.wake = _k32.CreateEventW(None, False, False, None)
            if not self.wake:
                raise ctypes.WinError(ctypes.get_last_error())
            self.handles: dict[int, int] = {}  # handle -> pid
            self.to_close: list[int] = []
            self.stop = False
            self.thread = threading.Thread(target=self._run, name="lockwarden-exits",
                                           daemon=True)
            self.thread.start()

        def _run(self) -> None:
            owner = self.owner
            while True:
                with owner.lock:
                    for h in self.to_close:
                        _k32.CloseHandle(wintypes.HANDLE(h))
                    self.to_close.clear()
                    if self.stop:
                        break
                    items = list(self.handles.items())
                arr = (wintypes.HANDLE * (len(items) + 1))(
                    self.wake, *[wintypes.HANDLE(h) for h, _ in items])
                r = _k32.WaitForMultipleObjects(len(items) + 1, arr, False, _INFINITE)
                if r == _WAIT_FAILED:  # pragma: no cover - look again
                    continue
                i = r - _WAIT_OBJECT_0
                if 1 <= i <= len(items):
                    h, pid = items[i - 1]
                    with owner.lock:  # signalled for good: waited for no more
                        known = self.handles.pop(h, None)
                        if known is not None:
                            owner.where.pop(h, None)
                    if known is not None:
                        owner.post(pid, h)
            _k32.CloseHandle(self.wake)

    class HandleExits:
        """Windows: process handles waited for in groups of :data:`GROUP`, one thread a
        group (see the module docstring). Handles are process handles."""

        kind = "handle"

        def __init__(self, post: Post) -> None:
            self.post = post
            self.lock = threading.Lock()
            self._groups: list[_Group] = []
            self.where: dict[int, _Group] = {}  # handle -> the group waiting for it
            self._pids: dict[int, int] = {}  # handle -> pid, while it is not released

        def open(self, pid: int) -> int:
            """``OpenProcess(SYNCHRONIZE | PROCESS_QUERY_LIMITED_INFORMATION)``."""
            h = _k32.OpenProcess(_SYNCHRONIZE | _QUERY_LIMITED, False, pid)
            if not h:
                err = ctypes.get_last_error()
                if err == _ERROR_INVALID_PARAMETER:
                    raise ProcessLookupError(err, f"no process {pid}")
                if err == _ERROR_ACCESS_DENIED:
                    raise PermissionError(err, f"may not open process {pid}")
                raise ctypes.WinError(err)
            return int(h)

        def spare(self, handle: int) -> bool:
            """Always: process handles are not counted against a descriptor limit."""
            return True

        def start_time(self, pid: int) -> float | None:
            """psutil's ``create_time`` (``None``: gone, not readable)."""
            return _psutil_start(pid)

        def exited(self, handle: int) -> bool:
            """True when the handle is signalled (the process ended)."""
            return bool(_k32.WaitForSingleObject(wintypes.HANDLE(handle), 0) == _WAIT_OBJECT_0)

        def watch(self, handle: int, pid: int) -> None:
            """Add ``handle`` to a group with room (a new group, and thread, when all are
            full) and wake that group's thread."""
            with self.lock:
                self._pids[handle] = pid
                group = next((g for g in self._groups if len(g.handles) < GROUP), None)
                if group is None:
                    group = _Group(self)
                    self._groups.append(group)
                group.handles[handle] = pid
                self.where[handle] = group
            _k32.SetEvent(group.wake)

        def rearm(self, handle: int) -> None:
            """Wait for ``handle`` again (its group dropped it when it was signalled)."""
            with self.lock:
                pid = self._pids.get(handle)
                waiting = handle in self.where
            if pid is not None and not waiting:
                self.watch(handle, pid)

        def release(self, handle: int) -> None:
            """Stop waiting for ``handle`` and close it (by its group's thread, when that
            thread may be waiting for it)."""
            with self.lock:
                self._pids.pop(handle, None)
                group = self.where.pop(handle, None)
                if group is not None:
                    group.handles.pop(handle, None)
                    group.to_close.append(handle)
            if group is not None:
                _k32.SetEvent(group.wake)
            else:
                _k32.CloseHandle(wintypes.HANDLE(handle))

        def close(self) -> None:
            """Stop every group's thread (each closes the handles left to it)."""
            with self.lock:
                groups = list(self._groups)
                self._groups.clear()
                for g in groups:
                    g.stop = True
            for g in groups:
                _k32.SetEvent(g.wake)
                g.thread.join(2.0)
