"""Careful file-system primitives shared by the engine and the scanner.

Rules (docs/DESIGN.md, "Formats" and "Lock operations"): read at most 64 KiB of a lock file; never
open a FIFO, device or socket (``lstat`` first, then open with ``O_NONBLOCK``/``O_NOFOLLOW``
where the OS has them); never follow a symlink when reading or writing in a lock directory.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
import time
from collections.abc import Callable

from core import seam
from core.codes import Code, UnreadableKind
from core.errors import UnreadableError
from core.record import FileInfo, LockStatus, State
from core.tempfiles import parse_temp

MAX_LOCK_BYTES = 64 * 1024
"""Largest lock file we read, in bytes (docs/DESIGN.md: "Read at most 64 KiB of a file")."""

AUDIT_LOG_NAME = ".lock_audit.log"
"""Audit log file name, beside the locks (Task MCP's name, docs/specs/task-mcp.txt
"Audit logging")."""

GUARD_FILE_NAME = ".lockwarden.guard"
"""Guard file the engine locks where a directory itself cannot be locked (NFS, Windows);
never a lock (docs/DESIGN.md "Lock operations": serialise breakers with a kernel lock on a
guard)."""

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOCTTY = getattr(os, "O_NOCTTY", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)

READ_FLAGS = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC | _O_NOCTTY | _O_BINARY
"""Flags for opening a file in a lock directory for reading."""

WRITE_EXCL_FLAGS = (
    os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC | _O_NOCTTY | _O_BINARY
)
"""Flags for creating a new file in a lock directory (never follows a symlink)."""

if sys.platform != "win32":
    import fcntl as _fcntl
else:  # Windows has no fcntl: every use is behind a sys.platform check
    _fcntl = None

def file_info(st: os.stat_result) -> FileInfo:
    """Identity of a file from its stat result (inode, device, size, mtime in ns). The device
    number is one shared object per device (100,000 identities of one file system hold one)."""
    dev = st.st_dev
    return FileInfo(ino=st.st_ino, dev=_DEVICES.setdefault(dev, dev), size=st.st_size,
                    mtime_ns=st.st_mtime_ns)


_DEVICES: dict[int, int] = {}
"""Device numbers :func:`file_info` met (one per file system)."""


def describe_mode(mode: int) -> str | None:
    """Plain-words name of a non-regular file type (``"a FIFO (named pipe)"``), or ``None`` for
    a regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def mode_kind(mode: int) -> UnreadableKind | None:
    """The :class:`~core.codes.UnreadableKind` of a non-regular file type, or ``None`` for a
    regular file."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return UnreadableKind.DIRECTORY
    if stat.S_ISLNK(mode):
        return UnreadableKind.SYMLINK
    if stat.S_ISFIFO(mode):
        return UnreadableKind.FIFO
    if stat.S_ISSOCK(mode):
        return UnreadableKind.SOCKET
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return UnreadableKind.DEVICE
    return UnreadableKind.NOT_REGULAR


LEASE_WAIT = 0.05
"""Seconds a reader waits for a file another process holds a lease on this instant (the
engine removing or replacing a file its peers lock: docs/engine.md, "Peers' kernel
locks")."""


def _open_to_read(path: str) -> int:
    """``path`` opened with :data:`READ_FLAGS`; an open that a lease holds off
    (``EWOULDBLOCK``: another process is moving the file this instant) is tried again for up
    to :data:`LEASE_WAIT` seconds.

    Raises:
        FileNotFoundError: nothing is at ``path``.
        UnreadableError: it cannot be opened (``kind`` ``changed`` when the lease stays).
    """
    deadline: float | None = None
    while True:
        try:
            return os.open(path, READ_FLAGS)
        except FileNotFoundError:
            raise
        except BlockingIOError:
            import time

            now = time.monotonic()
            deadline = deadline if deadline is not None else now + LEASE_WAIT
            if now >= deadline:
                raise UnreadableError("is being moved by another process; try again",
                                      path=path, kind=UnreadableKind.CHANGED) from None
            time.sleep(0.001)
        except OSError as exc:
            raise UnreadableError(os_reason(exc), path=path, kind=os_kind(exc)) from exc


def os_kind(exc: OSError) -> UnreadableKind:
    """The :class:`~core.codes.UnreadableKind` of an ``OSError`` met reading a lock file."""
    if exc.errno in (errno.EACCES, errno.EPERM):
        return UnreadableKind.PERMISSION
    if exc.errno == errno.ELOOP:
        return UnreadableKind.SYMLINK
    return UnreadableKind.OS_ERROR


def human_size(n: int) -> str:
    """``1536`` -> ``"1.5 KiB"``; bytes to a short human string."""
    size = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{int(size)} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} bytes"  # pragma: no cover


def read_lock_file(path: str, limit: int = MAX_LOCK_BYTES, *,
                   regular: bool = False) -> tuple[bytes, FileInfo]:
    """Read a lock file safely and return its bytes and identity.

    Checks the path with ``lstat`` before opening, so symlinks, FIFOs, sockets, devices and
    directories are refused without being opened; opens with ``O_NOFOLLOW|O_NONBLOCK``; checks
    that the opened file is the one ``lstat`` saw; reads at most ``limit`` bytes (64 KiB).
    ``regular``: the caller's directory listing already says the name is a regular file
    (``os.DirEntry.is_file(follow_symlinks=False)``: the type ``getdents`` returns, as old as an
    ``lstat`` made then), so the ``lstat`` is skipped; the opened file's own ``fstat`` must still
    be a regular file (see :func:`read_lock_stat`).

    Raises:
        FileNotFoundError: there is no file at ``path`` (the lock is free, or it vanished).
        UnreadableError: anything else; ``reason`` says what in plain words.
    """
    data, fst = read_lock_stat(path, limit, regular=regular)
    return data, file_info(fst)


def read_lock_stat(path: str, limit: int = MAX_LOCK_BYTES, *,
                   regular: bool = False) -> tuple[bytes, os.stat_result]:
    """:func:`read_lock_file`, with the opened file's ``fstat`` result (the watcher's file
    signature: no second ``lstat`` of a file just read).

    System calls for a regular file under ``limit``: ``lstat`` (none when ``regular``),
    ``open``, ``fstat``, one ``read`` of ``fstat``'s size + 1 bytes (a short read with all of
    that size is the end; a buffer of the file's size, not 64 KiB: a 64 KiB buffer shrunk to
    47 bytes cost ~20 us per file in allocations once 100,000 reads were kept), ``close``.

    Raises:
        FileNotFoundError: there is no file at ``path``.
        UnreadableError: as :func:`read_lock_file`.
    """
    seam.step("read", path)
    st: os.stat_result | None = None
    if not regular:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise UnreadableError(os_reason(exc), path=path, kind=os_kind(exc)) from exc
        kind = describe_mode(st.st_mode)
        mkind = mode_kind(st.st_mode)
        if kind is not None and mkind is not None:
            if stat.S_ISLNK(st.st_mode):
                target = _readlink(path)
                raise UnreadableError(
                    f"is a symbolic link{target}; links are never followed", path=path,
                    kind=mkind
                )
            raise UnreadableError(f"is {kind}, not a lock file", path=path, kind=mkind)
        _check_size(path, st.st_size, limit)
    fd = _open_to_read(path)
    try:
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode) or (
                st is not None and (fst.st_ino, fst.st_dev) != (st.st_ino, st.st_dev)):
            raise UnreadableError(
                "changed while being read; try again", path=path, kind=UnreadableKind.CHANGED
            )
        if st is None:
            _check_size(path, fst.st_size, limit)
        chunks: list[bytes] = []
        remaining = limit + 1
        got = 0
        expect = fst.st_size + 1  # a buffer of the size fstat gave (+1 to see the end)
        while remaining > 0:
            want = min(remaining, 65536, expect - got) if got < expect else min(remaining,
                                                                                  65536)
            try:
                chunk = os.read(fd, want)
            except OSError as exc:
                raise UnreadableError(os_reason(exc), path=path, kind=os_kind(exc)) from exc
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
            got += len(chunk)
            if got >= fst.st_size and len(chunk) < want:
                break  # a short read with all fstat's size: the end of a regular file
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if len(data) > limit:
            raise UnreadableError(
                f"grew past the {human_size(limit)} a lock file can be",
                path=path,
                kind=UnreadableKind.TOO_LARGE,
            )
        return data, fst
    finally:
        os.close(fd)


def _check_size(path: str, size: int, limit: int) -> None:
    """Raise :class:`UnreadableError` (``too_large``) for a file over ``limit`` bytes."""
    if size > limit:
        raise UnreadableError(
            f"is {human_size(size)}, larger than the {human_size(limit)} a lock file can be",
            path=path,
            kind=UnreadableKind.TOO_LARGE,
        )


def validate_lock_path(path: str | os.PathLike[str]) -> str:
    """Absolute lock path after validation (docs/engine.md, "Hostile directories").

    Raises:
        UnreadableError: the parent directory is missing or not a directory; the name is one
            of the engine's own files (the audit log, the guard file, a temp name: ``kind``
            ``engine_file``), which is never a lock; or something that is not a regular file
            (symlink, FIFO, directory, socket, device: ``kind`` says which) is at the path.
            Nothing is written in any of these cases.
    """
    p = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(p)
    try:
        pst = os.stat(parent)
    except FileNotFoundError:
        raise UnreadableError(f"directory {parent} does not exist", path=p) from None
    except OSError as exc:
        raise UnreadableError(f"directory {parent}: {exc.strerror}", path=p,
                              kind=os_kind(exc)) from None
    if not stat.S_ISDIR(pst.st_mode):
        raise UnreadableError(f"{parent} is not a directory", path=p)
    refuse_engine_name(p)
    check_regular(p)
    return p


def refuse_engine_name(p: str) -> None:
    """Refuse a lock path named like one of the engine's own files (:func:`is_engine_file`).

    Raises:
        UnreadableError: ``kind`` ``engine_file``.
    """
    name = os.path.basename(p)
    if name == AUDIT_LOG_NAME:
        what = "the audit log"
    elif name == GUARD_FILE_NAME:
        what = "the engine's guard file"
    elif parse_temp(name) is not None:
        what = "named like a temp file of the engine"
    else:
        return
    raise UnreadableError(f"is {what}, never a lock; nothing was changed", path=p,
                          kind=UnreadableKind.ENGINE_FILE)


def check_regular(p: str) -> None:
    """Refuse a path where something other than a regular file (or nothing) is.

    Raises:
        UnreadableError: a symlink (even dangling), FIFO, directory, socket or device is at
            ``p`` (``kind`` says which), or ``lstat`` fails for another reason than "no such
            file".
    """
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UnreadableError(exc.strerror or str(exc), path=p, kind=os_kind(exc)) from None
    kind = describe_mode(st.st_mode)
    mkind = mode_kind(st.st_mode)
    if kind is not None and mkind is not None:
        if stat.S_ISLNK(st.st_mode):
            raise UnreadableError(
                "is a symbolic link; Lockwarden never writes through links", path=p, kind=mkind
            )
        raise UnreadableError(f"is {kind}, not a lock file; nothing was written", path=p,
                              kind=mkind)


def unreadable_kind(status: LockStatus) -> UnreadableKind | None:
    """The :class:`~core.codes.UnreadableKind` of an ``unreadable`` verdict (its
    ``unreadable`` reason's ``kind`` parameter), else ``None``."""
    for reason in status.reasons:
        if reason.code is Code.UNREADABLE:
            value = reason.get("kind")
            if isinstance(value, str):
                try:
                    return UnreadableKind(value)
                except ValueError:
                    return None
    return None


def refuse_unreadable(p: str, status: LockStatus) -> None:
    """Raise a clear :class:`~core.errors.UnreadableError` when ``status`` says that what is at
    ``p`` is not a lock and will not turn into one by waiting: a symlink, FIFO, directory or
    device slipped in (:func:`check_regular`); or an ``unreadable`` verdict -- a file over
    64 KiB, bytes no format reads, an empty file past the writing grace (younger ones are
    ``writing``, docs/DESIGN.md "Liveness and verdicts"). Inconclusive kinds
    (:attr:`~core.codes.UnreadableKind.inconclusive`: changed while read, permission denied)
    do not raise: a lock of another user can still be waited for until it goes.

    Raises:
        UnreadableError: with the verdict's reason and ``kind``.
    """
    if status.state is not State.UNREADABLE or status.record is not None:
        return
    check_regular(p)
    kind = unreadable_kind(status)
    if kind is not None and kind.inconclusive:
        return
    raise UnreadableError(status.error or "cannot be read as a lock", path=p,
                          kind=kind or UnreadableKind.PARSE)


def fsync_dir(dirpath: str) -> None:
    """fsync a directory so a link/unlink/rename in it is durable. No-op where directories
    cannot be opened (Windows). Errors other than unsupported operations propagate."""
    if sys.platform == "win32":
        return
    fd = os.open(dirpath, os.O_RDONLY | _O_CLOEXEC)
    try:
        try:
            os.fsync(fd)
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
                raise
    finally:
        os.close(fd)


def is_engine_file(name: str) -> bool:
    """True for files the engine owns that are never locks: our temp files and the audit
    log (and its guard)."""
    return name in (AUDIT_LOG_NAME, GUARD_FILE_NAME) or parse_temp(name) is not None


def _readlink(path: str) -> str:
    try:
        return f" to {os.readlink(path)!r}"
    except OSError:
        return ""


def sticky_owner(path: str) -> str | None:
    """The name of the user who owns ``path`` when only they (or root) may remove or replace
    it because its directory is sticky (``/tmp``, ``/var/tmp``: the ``t`` bit, sticky(7))
    and this process is neither that user nor root; else ``None``. A number stands for an
    owner with no name. Never raises (``None`` when either cannot be stat'ed)."""
    if sys.platform == "win32":  # pragma: no cover - no owners, no sticky bit
        return None
    try:
        st = os.lstat(path)
        dst = os.stat(os.path.dirname(path) or ".")
    except OSError:
        return None
    me = os.geteuid()
    if not dst.st_mode & stat.S_ISVTX or me == 0 or st.st_uid == me or dst.st_uid == me:
        return None
    import pwd

    try:
        return pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        return str(st.st_uid)


def os_reason(exc: OSError) -> str:
    """Plain-words reason for an ``OSError`` met on a file in a lock directory (shown to
    people as the reason a file is unreadable or a log could not be written)."""
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if exc.errno == errno.EROFS:
        return "read-only file system"
    if exc.errno == errno.ENOSPC:
        return "no space left on device"
    if exc.errno == errno.ELOOP:
        return "is a symbolic link (or a loop of them); links are never followed"
    if exc.errno == errno.ENOTDIR:
        return "a part of the path is not a directory"
    if exc.errno == errno.ENXIO:
        return "is a FIFO or device with nothing behind it"
    return exc.strerror or str(exc)


def flock_nb(fd: int) -> None:
    """One non-blocking attempt at an exclusive ``flock`` on ``fd``.

    Raises:
        BlockingIOError: another open file description holds it.
        OSError: ``ENOTSUP`` where the OS has no ``flock`` (Windows); any error of ``flock``
            (``ENOLCK``, ``EBADF`` on NFS for a read-only descriptor, ...).
    """
    if sys.platform == "win32":  # pragma: no cover - Windows
        raise OSError(errno.ENOTSUP, "flock is not available on this platform")
    _fcntl.flock(fd, _fcntl.LOCK_EX | _fcntl.LOCK_NB)


def lock_within(
    fd: int,
    timeout: float,
    *,
    pause: float = 0.001,
    max_pause: float = 0.05,
    attempt: Callable[[int], None] = flock_nb,
    what: str = "",
) -> bool:
    """Take an exclusive kernel lock on ``fd``, waiting at most ``timeout`` seconds: True once
    held, False when another process still held it after ``timeout``.

    A kernel lock has no wake-up event that a bounded wait could sleep on, so this makes
    non-blocking attempts (``attempt``, default :func:`flock_nb`; it raises
    ``BlockingIOError`` while the lock is busy) with sleeps growing from ``pause`` to
    ``max_pause`` seconds. The bound exists because any local user who can open the file can
    take its lock (docs/engine.md, "Why the guard is a flock on the directory"; docs/DESIGN.md,
    "Audit log": appends are serialised with a kernel lock). Used by the engine's directory
    guard (:class:`core.engine.exchange.DirGuard`) and the audit log's append lock
    (:mod:`core.audit.write`).

    ``what`` names the file or directory locked for the scheduling points (:mod:`core.seam`).

    Raises:
        OSError: whatever ``attempt`` raises other than ``BlockingIOError`` (the caller decides
            whether, e.g., ``ENOTSUP`` means "not supported here"); ``fd`` is left open.
    """
    deadline = time.monotonic() + timeout
    while True:
        seam.step("lock", what)
        try:
            attempt(fd)
            return True
        except BlockingIOError:
            seam.step("wait", what)
        except InterruptedError:  # pragma: no cover - PEP 475 retries already
            continue
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, max_pause)


def pread(fd: int, n: int, offset: int) -> bytes:
    """Up to ``n`` bytes at byte ``offset`` of the open file ``fd`` (fewer only at its end).

    Portable (``lseek`` + ``read`` where there is no ``pread``; appends use ``O_APPEND`` so the
    file position does not matter to them). Raises OSError from the OS.
    """
    parts: list[bytes] = []
    while n > 0:
        if sys.platform != "win32":
            got = os.pread(fd, n, offset)
        else:  # pragma: no cover - Windows
            os.lseek(fd, offset, os.SEEK_SET)
            got = os.read(fd, n)
        if not got:
            break
        parts.append(got)
        n -= len(got)
        offset += len(got)
    return b"".join(parts)
