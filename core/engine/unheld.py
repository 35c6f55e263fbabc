"""Removing or replacing an empty lock file that nobody holds, holding its ``flock`` while the
name goes (docs/DESIGN.md, "Two kinds of locks"; docs/engine.md, "Empty files").

An empty file that no kernel lock holds and no process has open is *free*: it is what
filelock, portalocker, fasteners and ``flock(1)`` leave when they release. Such a tool locks the
**inode** it opened, not the name. Unlinking the file while a process has just opened it would
let that process lock an inode that no longer has a name while the next locker creates a new
file at the path and locks that one: two holders. So when a person asks to remove or reclaim
one (never on its own), the engine, under the directory guard:

1. opens the file (``O_RDONLY|O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC``) and checks it is the file
   judged: same device and inode, still empty;
2. takes ``flock(LOCK_EX|LOCK_NB)`` on it: if that fails, a process holds it now and nothing is
   changed (:class:`core.errors.ReadOnlyLock`, kind ``kernel_lock``);
3. checks that no other process has it open (one walk of ``/proc``,
   :func:`core.kernel.openfiles.scan_open_files`): one that has would lock it next, so nothing
   is changed (:class:`core.errors.LockHeld`);
4. lets the caller rename it out (or exchange it) and unlink it, and only then closes the
   descriptor, dropping the ``flock``.

A locker that opens the old file during step 4 and tries ``LOCK_NB`` fails and tries again on
the path (filelock and portalocker open the path again), so it locks the new file. What is left:
a process that opens the file in the microseconds between step 3 and the unlink and then
*blocks* in ``flock`` (``flock(1)`` without ``-n``) gets the dead inode once the descriptor is
closed. Where the file system has no ``flock`` at all (``ENOLCK``, ``ENOTSUP``), nobody can hold
one either, and steps 2-3 are skipped; on NFS, whose ``flock`` needs a writable descriptor
(``EBADF``), the file is opened for writing instead (never truncated).
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from core.codes import ReadOnlyKind
from core.errors import LockError, LockHeld, LockLost, ReadOnlyLock
from core.record import FileInfo

if sys.platform != "win32":  # Windows has no flock
    import fcntl as _fcntl

__all__ = ["holding_empty"]

_NO_FLOCK = {errno.ENOLCK, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}
"""``flock`` errors that mean "this file system has no flock": nobody can hold one there."""

_OPEN = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(
    os, "O_CLOEXEC", 0)


def _open_same(path: str, seen: FileInfo, flags: int) -> int:
    """``path`` opened with ``flags``, checked to be the judged file (device, inode) and still
    empty (size 0 or the judged size: whitespace only).

    Raises:
        LockLost: it is gone, or another file (or content) is there now.
    """
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise LockLost(f"{path}: the file is gone") from None
    except OSError as exc:
        raise LockError(f"{path}: cannot be opened to lock it before removing it "
                        f"({exc.strerror or exc}); nothing was changed") from None
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != (seen.dev, seen.ino) or st.st_size != seen.size:
        os.close(fd)
        raise LockLost(f"{path}: the file changed since it was judged; nothing was changed")
    return fd


@contextmanager
def holding_empty(path: str, seen: FileInfo) -> Iterator[None]:
    """Hold the ``flock`` of the empty file at ``path`` (the one ``seen`` describes) while the
    body removes or replaces it; see the module docstring. Call it under the directory guard.

    Raises:
        LockLost: the file is gone or changed since it was judged (nothing done).
        ReadOnlyLock: a process holds a kernel lock on it now (kind ``kernel_lock``; nothing
            done).
        LockHeld: another process has it open, to write it or to lock it (nothing done).
        LockError: it cannot be opened (nothing done).
    """
    fd = _open_same(path, seen, _OPEN)
    try:
        if sys.platform != "win32":
            try:
                _fcntl.flock(fd, _fcntl.LOCK_EX | _fcntl.LOCK_NB)
            except BlockingIOError:
                raise ReadOnlyLock(
                    f"{path}: a process holds a kernel lock on it now; deleting it would let "
                    "a second holder in, so nothing was changed",
                    kind=ReadOnlyKind.KERNEL_LOCK) from None
            except OSError as exc:
                if exc.errno == errno.EBADF:  # NFS: a write lock needs a writable descriptor
                    os.close(fd)
                    fd = _open_same(path, seen, _OPEN | os.O_WRONLY)
                    try:
                        _fcntl.flock(fd, _fcntl.LOCK_EX | _fcntl.LOCK_NB)
                    except BlockingIOError:
                        raise ReadOnlyLock(
                            f"{path}: a process holds a kernel lock on it now; nothing was "
                            "changed", kind=ReadOnlyKind.KERNEL_LOCK) from None
                elif exc.errno not in _NO_FLOCK:
                    raise LockError(f"{path}: cannot be locked before removing it "
                                    f"({exc.strerror or exc}); nothing was changed") from None
            _refuse_if_open(path, seen)
        yield
    finally:
        os.close(fd)


def _refuse_if_open(path: str, seen: FileInfo) -> None:
    """Raise :class:`core.errors.LockHeld` when another process has the file open
    (:func:`core.kernel.openfiles.scan_open_files`; nothing to walk where there is no
    ``/proc``)."""
    from core.kernel.openfiles import scan_open_files

    try:
        index = scan_open_files()
    except OSError:
        return
    pids = index.open_by(seen.dev, seen.ino)
    if pids:
        from core.verdicts.liveness import process_facts

        facts = process_facts(pids[0])
        who = f"PID {pids[0]}" + (f" ({facts.name})" if facts is not None else "")
        more = f" and {len(pids) - 1} more" if len(pids) > 1 else ""
        raise LockHeld(f"{path}: {who}{more} has it open, to write it or to lock it; removing "
                       "it now would let that process lock a file that no longer exists, so "
                       "nothing was changed")
