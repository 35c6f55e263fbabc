"""Kernel locks where ``/proc/locks`` is absent: :func:`getlk` asks the kernel about one file
with ``fcntl(F_GETLK)`` (then ``F_OFD_GETLK``) -- whether a whole-file write lock *could* be
placed -- and :func:`open_by` names the processes that have a file open (psutil).

``F_GETLK`` never acquires anything (no ``flock(LOCK_NB)`` probe is ever made). What it sees by
platform (Linux: POSIX and OFD locks, not ``flock``; macOS/BSD: every kind, an ``flock`` without
its PID; not run on a Mac or a BSD; Windows: ``OSError``, see :mod:`core.kernel.windows`), the
descriptor kept open for a caller that holds POSIX locks, and the side effects of opening the
file: docs/formats.md, "Where there is no /proc/locks"; docs/specs/devtool-locks.md, "fcntl
``F_GETLK`` (POSIX, Linux/macOS/BSD)" and "macOS". PIDs are ints, ``None`` for 0 or -1.

No Qt, stdlib only (``fcntl``, ``struct``), plus psutil for :func:`open_by`.
"""

from __future__ import annotations

import errno
import os
import stat
import struct
import sys
import threading
from collections.abc import Iterable
from typing import NamedTuple

if sys.platform != "win32":
    import fcntl as _fcntl
else:  # Windows has no fcntl: every use is behind a sys.platform check
    _fcntl = None


def _layout(platform: str) -> tuple[str, tuple[str, ...]]:
    """``struct`` format of ``struct flock`` and the order of its fields for ``platform``
    (a ``sys.platform`` value). Linux (x86_64, aarch64 and other 64-bit ``off_t`` ABIs):
    ``short l_type, l_whence; off_t l_start, l_len; pid_t l_pid`` padded to the alignment of
    ``off_t`` (``'@hhqqi4x'`` on 64-bit, 32 bytes); macOS/OpenBSD/NetBSD: ``off_t l_start,
    l_len; pid_t l_pid; short l_type, l_whence`` (``'@qqihh'``, 24 bytes); FreeBSD adds
    ``int l_sysid`` (``'@qqihhi'``). Spec §2.6 "Struct layout differs by platform"."""
    if platform.startswith("linux"):
        base = "@hhqqi"
        align = struct.calcsize("@cq") - struct.calcsize("@q")  # alignof(off_t)
        pad = -struct.calcsize(base) % align
        return base + (f"{pad}x" if pad else ""), ("type", "whence", "start", "len", "pid")
    if platform.startswith(("freebsd", "dragonfly")):
        return "@qqihhi", ("start", "len", "pid", "type", "whence", "sysid")
    return "@qqihh", ("start", "len", "pid", "type", "whence")


FLOCK_FORMAT, FLOCK_FIELDS = _layout(sys.platform)
"""This platform's ``struct flock``: the :mod:`struct` format and its field names in order."""


def pack_flock(l_type: int, start: int = 0, length: int = 0, pid: int = 0, *,
               layout: tuple[str, tuple[str, ...]] | None = None) -> bytes:
    """A ``struct flock`` (``l_whence`` ``SEEK_SET``) in this platform's layout (or
    ``layout``, a ``(format, fields)`` pair of ``_layout``). ``length`` 0 means "to the end of
    the file". Pure."""
    fmt, fields = layout or (FLOCK_FORMAT, FLOCK_FIELDS)
    values = {"type": l_type, "whence": os.SEEK_SET, "start": start, "len": length,
              "pid": pid, "sysid": 0}
    return struct.pack(fmt, *(values[f] for f in fields))


def unpack_flock(data: bytes, *, layout: tuple[str, tuple[str, ...]] | None = None
                 ) -> dict[str, int]:
    """The fields of a ``struct flock`` as a dict (``type``, ``whence``, ``start``, ``len``,
    ``pid``). Raises ``struct.error`` when ``data`` has the wrong size. Pure."""
    fmt, fields = layout or (FLOCK_FORMAT, FLOCK_FIELDS)
    return dict(zip(fields, struct.unpack(fmt, data), strict=True))


class Conflict(NamedTuple):
    """The lock ``F_GETLK`` reported as conflicting with a whole-file write lock.

    Attributes:
        access: ``"READ"`` (``F_RDLCK``, shared) or ``"WRITE"`` (``F_WRLCK``, exclusive): the
            same words as ``/proc/locks``' ``RW`` column.
        start: first byte (inclusive).
        length: bytes covered; 0 means to the end of the file.
        pid: the holder's PID; ``None`` for ``-1`` (an OFD lock on Linux, an flock or OFD lock
            on macOS/BSD) and for ``0`` (a holder outside this PID namespace).
        raw_pid: the ``l_pid`` the kernel returned (``-1``, ``0`` or a PID).
        kind: ``"POSIX"``, ``"OFDLCK"`` or ``"UNKNOWN"`` (:func:`lock_kind`): the
            ``/proc/locks`` word for it, as far as ``F_GETLK`` can tell.
        by_ofd_query: True when only ``F_OFD_GETLK`` saw it (Linux): a POSIX lock of this
            very process, which plain ``F_GETLK`` never reports.
    """

    access: str
    start: int
    length: int
    pid: int | None
    raw_pid: int
    kind: str
    by_ofd_query: bool = False

    @property
    def end(self) -> int | None:
        """Last byte (inclusive) as ``/proc/locks`` prints it; ``None`` for "to EOF"."""
        return None if self.length == 0 else self.start + self.length - 1


def available() -> bool:
    """True where ``fcntl`` exists (every POSIX system; not Windows)."""
    return sys.platform != "win32"


_KEPT: dict[tuple[int, int], int] = {}
"""Descriptors kept open because this process holds POSIX locks on their file (see the module
docstring): ``(st_dev, st_ino) -> fd``."""
_KEPT_LOCK = threading.Lock()

_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
               | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0))


def _ask(fd: int, cmd: int) -> Conflict | None:
    if sys.platform == "win32":  # pragma: no cover - getlk() refused already
        raise OSError(errno.ENOTSUP, "fcntl F_GETLK is not available on this platform")
    reply = unpack_flock(_fcntl.fcntl(fd, cmd, pack_flock(_fcntl.F_WRLCK)))
    if reply["type"] == _fcntl.F_UNLCK:
        return None
    raw = reply["pid"]
    return Conflict("READ" if reply["type"] == _fcntl.F_RDLCK else "WRITE", reply["start"],
                    reply["len"], raw if raw > 0 else None, raw, lock_kind(raw, sys.platform))


def lock_kind(raw_pid: int, platform: str) -> str:
    """The kind of a lock ``F_GETLK`` reported with ``l_pid`` ``raw_pid`` on ``platform`` (a
    ``sys.platform`` value), in ``/proc/locks`` words: PID ``-1`` is an OFD lock on Linux
    (``"OFDLCK"``) and an flock or OFD lock elsewhere (``"UNKNOWN"``, docs/specs/devtool-locks.md
    §2.6 "macOS"); any other PID, ``0`` (outside this PID namespace) included, a POSIX record lock.
    Pure."""
    if raw_pid != -1:
        return "POSIX"
    return "OFDLCK" if platform.startswith("linux") else "UNKNOWN"


def _open_regular(path: str) -> tuple[int, tuple[int, int], bool]:
    """``(fd, (dev, ino), kept)``: a kept descriptor of the file, or a new read-only one."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise OSError(errno.ELOOP, "is a symbolic link: never followed", path)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a regular file", path)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(errno.EINVAL, "is not a regular file (FIFO, socket or device)", path)
    ident = (st.st_dev, st.st_ino)
    with _KEPT_LOCK:
        kept = _KEPT.get(ident)
    if kept is not None:
        return kept, ident, True
    fd = os.open(path, _OPEN_FLAGS)
    try:
        fst = os.fstat(fd)
        if not stat.S_ISREG(fst.st_mode) or (fst.st_dev, fst.st_ino) != ident:
            raise OSError(errno.EINVAL, "was replaced while being opened", path)
    except BaseException:
        os.close(fd)
        raise
    return fd, ident, False


def getlk(path: str) -> Conflict | None:
    """The lock that would stop a whole-file write lock on ``path``, or ``None`` when the
    kernel's lock list (as ``F_GETLK`` sees it, see the module docstring) has none.

    The file is opened ``O_RDONLY|O_NONBLOCK|O_NOFOLLOW|O_CLOEXEC`` (no write permission
    needed, never blocks on a FIFO, never follows a symlink) after an ``lstat`` that refuses
    anything but a regular file. Asks ``F_GETLK``, then on Linux ``F_OFD_GETLK`` when the
    first saw nothing. Never acquires a lock.

    Raises:
        OSError: ``fcntl`` is unavailable (``ENOTSUP``, Windows); ``path`` is missing or
            unreadable; a symlink (``ELOOP``); a directory (``IsADirectoryError``); a FIFO,
            socket or device (``EINVAL``); the file system refuses the query (e.g.
            ``ENOLCK``, ``EINVAL`` on some FUSE/SMB mounts).
    """
    if sys.platform == "win32":  # pragma: no cover - Windows
        raise OSError(errno.ENOTSUP, "fcntl F_GETLK is not available on this platform")
    fd, ident, kept = _open_regular(path)
    keep = kept
    try:
        found = _ask(fd, _fcntl.F_GETLK)
        ofd = getattr(_fcntl, "F_OFD_GETLK", None)
        if found is None and ofd is not None:
            own = _ask(fd, ofd)
            if own is not None:
                found = own._replace(by_ofd_query=True)
                if own.pid == os.getpid() and not kept:
                    # our own POSIX lock: closing this descriptor would drop it, so it stays
                    # open (a second one, from a query racing in another thread, too)
                    keep = True
                    with _KEPT_LOCK:
                        _KEPT.setdefault(ident, fd)
        return found
    finally:
        if not keep:
            os.close(fd)


def open_by(paths: Iterable[str]) -> dict[str, tuple[int, ...]]:
    """The processes that have each of ``paths`` **open** (psutil ``Process.open_files()``
    over the processes this user may inspect): on macOS the only way to name candidates for an
    flock or OFD lock whose ``F_GETLK`` PID is ``-1`` (docs/specs/devtool-locks.md §2.6 "macOS").
    Having a file open is not holding its lock, so callers label these "has it open".

    Files are matched by ``(st_dev, st_ino)`` (a reported path is ``stat``-ed only when its
    real path or base name matches). Paths that cannot be ``stat``-ed are left out. Cost: one
    ``open_files()`` per process (all descriptors of every visible process), so call it for
    a few paths on demand, not in a tight loop. Never raises.
    """
    import psutil

    wanted: dict[tuple[int, int], list[str]] = {}
    names: dict[str, set[tuple[int, int]]] = {}
    reals: dict[str, tuple[int, int]] = {}
    for path in paths:
        try:
            st = os.stat(path)
            real = os.path.realpath(path)
        except (OSError, ValueError):
            continue
        want = (st.st_dev, st.st_ino)
        wanted.setdefault(want, []).append(path)
        reals[real] = want
        names.setdefault(os.path.basename(real), set()).add(want)
    found: dict[tuple[int, int], set[int]] = {}
    if not wanted:
        return {}
    for proc in psutil.process_iter():
        try:
            files = proc.open_files()
        except (psutil.Error, OSError):
            continue
        for f in files:
            ident: tuple[int, int] | None = reals.get(f.path)
            if ident is None and os.path.basename(f.path) in names:
                try:
                    fst = os.stat(f.path)
                except OSError:
                    continue
                ident = (fst.st_dev, fst.st_ino)
            if ident is not None and ident in wanted:
                found.setdefault(ident, set()).add(proc.pid)
    return {path: tuple(sorted(pids)) for ident, pids in found.items()
            for path in wanted[ident]}
