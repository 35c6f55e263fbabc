"""Private kernel primitives of the engine (:mod:`core.engine.lock`): the atomic exchange of two
directory entries and the per-directory guard lock. Not a public API.

Exchange (docs/DESIGN.md, "Lock operations", reclaim): ``renameat2(RENAME_EXCHANGE)`` on Linux
(glibc >= 2.28 exports ``renameat2``; otherwise the raw ``syscall`` number), ``renamex_np``
with ``RENAME_SWAP`` on macOS. Both swap two existing names in one step, so the lock path is
never empty and whatever was at the lock path can be inspected *after* it was moved out (and
swapped back when it is not the file that was judged stale). Elsewhere, and on file systems
that refuse the call (``EINVAL``/``ENOSYS``/``ENOTSUP``), :func:`exchange` raises
:class:`ExchangeUnsupported` and the engine falls back to its guarded rename-out path.

Guard (:class:`DirGuard`): an exclusive ``flock`` on an ``O_RDONLY`` descriptor of the lock's
directory. Every Lockwarden operation that removes or replaces a lock file (release, reclaim,
refresh, force release) holds it around its check-and-act, so those operations are atomic with
respect to each other across processes. Why the directory and not a guard file: it creates no
file (nothing for the scanner to skip, nothing an attacker in a world-writable ``/tmp`` can
pre-create as a symlink, FIFO or unreadable file), it works for every lock name including
ones we did not create, and the kernel drops it when a holder dies. Any local user who can
read the directory can also take it, so waiting for it is bounded (:data:`GUARD_TIMEOUT`,
through :func:`core.fsutil.lock_within`, which the audit log's lock uses too); plain acquires
(``link``) never need it. Where directories cannot be locked (Windows, some network file
systems) a guard file in the directory is locked instead; where neither works the guard is a
no-op and says so in ``.held`` (docs/engine.md, "Why the guard is a flock on the directory").
"""

from __future__ import annotations

import errno
import functools
import os
import platform
import stat
import sys
from types import TracebackType
from typing import Any

from core.errors import LockError
from core.fsutil import GUARD_FILE_NAME, flock_nb, lock_within

GUARD_TIMEOUT = 10.0
"""Longest wait for a directory guard, seconds. The guard is held by Lockwarden processes for
well under a millisecond; a longer wait means a hostile or stuck process holds it."""

_RENAME_EXCHANGE = 1 << 1  # linux/fs.h
_RENAME_SWAP = 0x00000002  # macOS sys/stdio.h
_AT_FDCWD = -100
_SYS_RENAMEAT2 = {"x86_64": 316, "amd64": 316, "aarch64": 276, "arm64": 276}
_UNSUPPORTED_ERRNOS = {errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP}

class ExchangeUnsupported(OSError):
    """This platform or file system has no atomic exchange of two names."""

class GuardTimeout(LockError, OSError):
    """The directory guard was held by another process for longer than the bounded wait.
    A :class:`~core.errors.LockError` (and an ``OSError`` with ``errno.ETIMEDOUT``) whose
    message names the holder: PID and user (:func:`core.kernel.proof.describe_lockers`)."""

    def __str__(self) -> str:
        """``DIR: PID 4242 (user ann) has held the lock guard ...``, without ``[Errno 110]``."""
        return f"{self.filename}: {self.strerror}" if self.filename else str(self.strerror)

@functools.cache
def _load_exchange() -> tuple[str, Any] | None:
    """The platform's exchange call, loaded on first use (ctypes is not imported before, so
    the CLI's fast paths stay cheap)."""
    import ctypes

    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
        except OSError:
            return None
        fn = getattr(libc, "renameat2", None)
        if fn is not None:
            fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                           ctypes.c_uint]
            fn.restype = ctypes.c_int
            return ("renameat2", fn)
        nr = _SYS_RENAMEAT2.get(platform.machine().lower())
        if nr is None:
            return None
        sc = libc.syscall
        sc.restype = ctypes.c_long
        return ("syscall", (sc, nr))
    if sys.platform == "darwin":
        import ctypes.util

        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        except OSError:
            return None
        fn = getattr(libc, "renamex_np", None)
        if fn is None:
            return None
        fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint]
        fn.restype = ctypes.c_int
        return ("renamex_np", fn)
    return None

def exchange_available() -> bool:
    """True when this platform has an atomic exchange primitive (it may still be refused by a
    particular file system; :func:`exchange` then raises :class:`ExchangeUnsupported`)."""
    return _load_exchange() is not None

def exchange(a: str, b: str) -> None:
    """Atomically swap the directory entries ``a`` and ``b`` (both must exist, same file
    system). Neither name is ever missing. Symlinks are not followed (the entries are
    swapped, whatever they are).

    Raises:
        ExchangeUnsupported: no exchange primitive here, or the file system refused it.
        OSError: any other failure (``ENOENT`` when either name is missing, ...).
    """
    loaded = _load_exchange()
    if loaded is None:
        raise ExchangeUnsupported(errno.ENOTSUP, "no atomic exchange on this platform")
    import ctypes

    kind, impl = loaded
    ba, bb = os.fsencode(a), os.fsencode(b)
    if kind == "renameat2":
        rc = impl(_AT_FDCWD, ba, _AT_FDCWD, bb, _RENAME_EXCHANGE)
    elif kind == "syscall":
        sc, nr = impl
        rc = sc(ctypes.c_long(nr), ctypes.c_int(_AT_FDCWD), ctypes.c_char_p(ba),
                ctypes.c_int(_AT_FDCWD), ctypes.c_char_p(bb), ctypes.c_uint(_RENAME_EXCHANGE))
    else:
        rc = impl(ba, bb, _RENAME_SWAP)
    if rc != 0:
        err = ctypes.get_errno()
        if err in _UNSUPPORTED_ERRNOS:
            raise ExchangeUnsupported(err, f"atomic exchange refused: {os.strerror(err)}", a)
        raise OSError(err, os.strerror(err), a, None, b)


_NO_LOCK_ERRNOS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL, errno.EBADF}
"""Errors that mean "this file system cannot lock this kind of file" (NFS answers ``EBADF``
for a read-only descriptor of a directory): fall back to the guard file, or to no guard."""


def _msvcrt_nb(fd: int) -> None:  # pragma: no cover - Windows
    """One non-blocking attempt at ``msvcrt.locking`` of the guard file's first byte; a busy
    lock (``EACCES``/``EDEADLK``) is reported as ``BlockingIOError``."""
    if sys.platform == "win32":
        import msvcrt

        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EDEADLK):
                raise BlockingIOError(exc.errno, exc.strerror) from exc
            raise
    else:
        raise OSError(errno.ENOTSUP, "msvcrt.locking exists only on Windows")

class DirGuard:
    """Exclusive kernel lock (``flock``) on a directory, held as a context manager.

    ``DirGuard(dirpath, timeout=GUARD_TIMEOUT)``; ``timeout`` in seconds. Waiting is a
    non-blocking attempt followed by short sleeps growing from 0.2 ms to 5 ms (the guard is
    only ever held for a few system calls), bounded by ``timeout``
    (:func:`core.fsutil.lock_within`).

    Raises (on enter):
        GuardTimeout: another process held the guard for longer than ``timeout``.
        OSError: the directory cannot be opened for another reason than "not supported".
    Where a directory cannot be locked (NFS, Windows) a guard file
    :data:`GUARD_FILE_NAME` in it is locked instead. ``held`` is False when neither works (the
    guard is then a no-op: reclaim refuses to break a lock without an exchange primitive).
    """

    def __init__(self, dirpath: str, timeout: float = GUARD_TIMEOUT) -> None:
        self.dirpath = dirpath or "."
        self.timeout = timeout
        self.fd: int | None = None
        self.held = False

    def __enter__(self) -> DirGuard:
        fd: int | None = None
        if sys.platform != "win32":  # flock (Windows: only the guard file, msvcrt)
            try:
                fd = os.open(self.dirpath, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
                             | getattr(os, "O_CLOEXEC", 0))
            except PermissionError:
                fd = None
        if fd is not None and not self._try_lock(fd, file_lock=False):
            os.close(fd)
            fd = None
        if fd is None:
            # the directory cannot be locked (NFS gives EBADF for a read-only descriptor,
            # Windows has no flock): lock a guard file in it instead
            fd = self._open_guard_file()
            if fd is None or not self._try_lock(fd, file_lock=True):
                if fd is not None:
                    os.close(fd)
                return self  # no guard possible: callers must not rely on it (see ``held``)
        self.fd = fd
        self.held = True
        return self

    def _open_guard_file(self) -> int | None:
        flags = (os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
        try:
            fd = os.open(os.path.join(self.dirpath, GUARD_FILE_NAME), flags, 0o666)
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                return None
        except OSError:
            os.close(fd)
            return None
        return fd

    def _try_lock(self, fd: int, *, file_lock: bool) -> bool:
        """Lock ``fd`` within the timeout (:func:`core.fsutil.lock_within`): True when held,
        False when this kind of lock is not supported here (``fd`` stays open); GuardTimeout
        when someone else keeps holding it (``fd`` is closed, as on any other error)."""
        if sys.platform != "win32":
            attempt = flock_nb
        elif file_lock:  # pragma: no cover - Windows
            attempt = _msvcrt_nb
        else:  # pragma: no cover - no way to lock a directory here
            return False
        try:
            held = lock_within(fd, self.timeout, pause=0.0002, max_pause=0.005,
                               attempt=attempt, what=self.dirpath)
        except OSError as exc:
            if exc.errno in _NO_LOCK_ERRNOS:
                return False
            os.close(fd)
            raise
        if not held:
            os.close(fd)
            from core.kernel.proof import describe_lockers

            target = os.path.join(self.dirpath, GUARD_FILE_NAME) if file_lock else self.dirpath
            raise GuardTimeout(
                errno.ETIMEDOUT,
                f"{describe_lockers(target)} has held the lock guard of this directory (an "
                f"flock on it) for more than {self.timeout:g} s",
                self.dirpath,
            )
        return True

    def _close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the last descriptor drops the flock
            self.fd = None
        self.held = False

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._close()
