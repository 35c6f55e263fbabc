"""Small operations on the directory entries of a lock's directory that the publish protocol
(:mod:`core.engine.publish`) and the verified removal (:mod:`core.engine.remove`) share: a
``link`` that never follows a link, an ``unlink`` of what may be gone, reading a regular file,
putting back a file that was moved out, opening a lock file to change it in place, writing a
whole buffer."""

from __future__ import annotations

import contextlib
import logging
import os

from core import seam
from core.errors import LockLost, UnreadableError
from core.fsutil import read_lock_file
from core.record import FileInfo

log = logging.getLogger("lockwarden.lock")

__all__ = ["link_nofollow", "open_in_place", "put_back", "read_regular", "unlink_quiet",
           "write_all"]


def link_nofollow(src: str, dst: str) -> None:
    """``link(src, dst)`` without following a symlink at ``src`` where the OS can say so
    (``linkat`` without ``AT_SYMLINK_FOLLOW``); ``dst`` is never followed by ``link``."""
    seam.step("link", dst)
    if os.link in os.supports_follow_symlinks:
        os.link(src, dst, follow_symlinks=False)
    else:  # pragma: no cover - Windows: CreateHardLinkW
        os.link(src, dst)


def unlink_quiet(p: str) -> None:
    """Remove ``p``; nothing there is fine."""
    with contextlib.suppress(FileNotFoundError):
        seam.step("unlink", p)
        os.unlink(p)


def read_regular(p: str) -> tuple[bytes, FileInfo] | None:
    """Bytes and identity of the regular file at ``p``; None if it is missing or not a
    readable regular file."""
    try:
        return read_lock_file(p)
    except (FileNotFoundError, UnreadableError):
        return None


def put_back(moved: str, path: str, *, hold: bool = False) -> bool:
    """Return a file that was moved out of ``path`` but is not the one expected (someone
    else's), or that peers opened meanwhile, without ever replacing what may be at ``path``
    now. If ``path`` was taken in the meantime, the file stays under its temp name
    (recognisable, never deleted) -- unless ``hold``: a file whose kernel locks Lockwarden
    holds and that peers lock by inode (:mod:`core.engine.unheld`) is never left linked under
    another name when those are let go, so it is unlinked (it is empty or a lock of ours).
    Returns True when it is back at ``path``."""
    try:
        link_nofollow(moved, path)
    except FileExistsError:
        if hold:
            log.warning("%s was taken meanwhile; the file a peer opened is unlinked (it must "
                        "not stay linked under another name)", path)
            unlink_quiet(moved)
            return False
        log.warning("%s was taken meanwhile; the displaced file stays at %s", path, moved)
        return False
    except OSError:  # not hard-linkable (a directory; no links on this file system)
        if not os.path.lexists(path):
            with contextlib.suppress(OSError):
                seam.step("rename", path)
                os.rename(moved, path)
                return True
        return False
    unlink_quiet(moved)
    return True


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


_IN_PLACE_OPEN = (os.O_RDWR | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                  | getattr(os, "O_CLOEXEC", 0))


def open_in_place(path: str) -> int:
    """``path`` opened for writing (to empty or rewrite the lock file in place, its inode
    kept), never through a symlink; an open another process's file lease holds off
    (``EWOULDBLOCK``: a Lockwarden removing it this instant, :mod:`core.engine.unheld`) is
    tried again for up to 0.5 s.

    Raises:
        LockLost: nothing is at ``path``, it cannot be opened, or the lease stayed.
    """
    import time

    deadline = time.monotonic() + 0.5
    while True:
        try:
            return os.open(path, _IN_PLACE_OPEN)
        except FileNotFoundError:
            raise LockLost(f"{path}: the lock file is gone") from None
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise LockLost(f"{path}: another process holds the file now; left in "
                               "place") from None
            time.sleep(0.001)
        except OSError as exc:
            raise LockLost(f"{path}: cannot be opened to change it in place "
                           f"({exc.strerror}); left in place") from None
