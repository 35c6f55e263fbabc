"""Whose trash: the freedesktop.org trash directories a removed file may go to, only where this
user owns them (docs/engine.md, "Whose trash"; docs/DESIGN.md, "Nothing lost"). Part of
:mod:`core.engine.trash`.

The freedesktop.org Trash specification (1.0, "Trash directories"): a file on the home's file
system goes to the home trash, ``$XDG_DATA_HOME/Trash``; a file on another mount to that
mount's trash -- ``$topdir/.Trash/$uid`` when ``$topdir/.Trash`` is a directory with the sticky
bit that is not a symbolic link ("the implementation MUST check that the directory is not a
symbolic link and that the sticky bit is set"), else ``$topdir/.Trash-$uid``. On a mount every
user can write to (``/tmp``, ``/run/lock``: mode 1777) another user can make either of those
first -- a symbolic link to a directory of theirs, or a directory they own -- and then read,
swap or plant what lands there. So a directory is used only when it is **this user's own**: a
real directory (``lstat``, never through a link) owned by this user that nobody else may write
to, and so are its ``files`` and ``info``; one that does not exist yet is created so (mode
0700). Otherwise no trash is used there (:class:`NotOurs`) and the caller takes the quarantine
folder in the user's own data directory, which is checked the same way.

The move itself: the ``.trashinfo`` is created exclusively in ``info`` (no existing name is
ever replaced), then the file is renamed into ``files`` under the lock's own name (``NAME``,
``NAME 1``...), so the file manager's *Restore* puts it back where it was.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from datetime import datetime
from urllib.parse import quote

from core.audit.placement import repository_of
from core.fsutil import WRITE_EXCL_FLAGS

__all__ = ["NotOurs", "own_dir", "trash_for", "trash_move"]

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | \
    getattr(os, "O_CLOEXEC", 0)


class NotOurs(OSError):
    """A trash (or quarantine) directory this user does not own alone: a link, another user's
    directory, one others may write to."""


def _euid() -> int:
    if sys.platform == "win32":  # pragma: no cover - no owners by number
        return 0
    return os.geteuid()


def own_dir(path: str, *, create: bool = True) -> None:
    """Check that ``path`` is a real directory (not a link) this user owns and nobody else may
    write to; create it (mode 0700) when it is missing and ``create``.

    Raises:
        NotOurs: it is a link, not a directory, another user's, or writable by others.
        OSError: it cannot be created or looked at.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not create:
            raise
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise NotOurs(errno.EPERM, f"{path} is a symbolic link; a trash is never reached "
                      "through one")
    if not stat.S_ISDIR(st.st_mode):
        raise NotOurs(errno.ENOTDIR, f"{path} is not a directory")
    if st.st_uid != _euid():
        raise NotOurs(errno.EPERM, f"{path} belongs to user {st.st_uid}, not to this user")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise NotOurs(errno.EPERM, f"{path} may be written by other users")


def _mount_top(path: str) -> str:
    """The mount point ``path`` lies under."""
    top = os.path.realpath(os.path.dirname(path))
    while not os.path.ismount(top):
        top = os.path.dirname(top)
    return top


def home_trash() -> str:
    """``$XDG_DATA_HOME/Trash`` (default ``~/.local/share/Trash``)."""
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    return os.path.join(data_home, "Trash")


def trash_for(aside: str) -> str:
    """The trash directory this user owns for the file at ``aside`` (see the module
    docstring): the home trash for a file on the home's file system, else its mount's
    ``.Trash/$uid`` or ``.Trash-$uid``; ``files`` and ``info`` exist in it, this user's.

    Raises:
        NotOurs: no trash there is this user's own.
        OSError: the mount's top lies in a git repository (nothing is written into one,
            docs/audit.md "Where entries go"), or a directory cannot be made.
    """
    st = os.lstat(aside)
    home = os.path.realpath(os.path.expanduser("~"))
    uid = str(_euid())
    if st.st_dev == os.stat(home).st_dev:
        root = home_trash()
        os.makedirs(os.path.dirname(root), mode=0o700, exist_ok=True)
        candidates = [root]
    else:
        top = _mount_top(aside)
        if repository_of(top) is not None:
            raise OSError(errno.EPERM, f"the trash of {top} would be in the git repository "
                          f"{repository_of(top)}; Lockwarden writes nothing into a repository")
        candidates = []
        shared = os.path.join(top, ".Trash")
        with contextlib.suppress(OSError):
            sst = os.lstat(shared)
            if stat.S_ISDIR(sst.st_mode) and sst.st_mode & stat.S_ISVTX:  # lstat: not a link
                candidates.append(os.path.join(shared, uid))
        candidates.append(os.path.join(top, f".Trash-{uid}"))
    why: list[str] = []
    for root in candidates:
        try:
            own_dir(root)
            own_dir(os.path.join(root, "files"))
            own_dir(os.path.join(root, "info"))
        except NotOurs as exc:
            why.append(str(exc.strerror))
            continue
        if os.lstat(os.path.join(root, "files")).st_dev != st.st_dev:
            why.append(f"{root} is on another file system")
            continue
        return root
    raise NotOurs(errno.EPERM, "; ".join(why) or "no trash")


def trash_move(aside: str, original: str, root: str) -> tuple[str, str]:
    """Move the file at ``aside`` into the trash ``root`` (:func:`trash_for`) under the name
    of ``original`` (``NAME``, ``NAME 1``...), with a ``.trashinfo`` naming ``original``.
    Returns the file's path in the trash and its ``.trashinfo``.

    Raises:
        OSError: the move failed (the file is still at ``aside``).
    """
    stem, ext = os.path.splitext(os.path.basename(original))
    date = datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    text = f"[Trash Info]\nPath={quote(original)}\nDeletionDate={date}\n".encode()
    files = os.open(os.path.join(root, "files"), _DIR_FLAGS)
    try:
        info = os.open(os.path.join(root, "info"), _DIR_FLAGS)
        try:
            for n in range(1000):
                name = f"{stem}{ext}" if n == 0 else f"{stem} {n}{ext}"
                try:
                    fd = os.open(name + ".trashinfo", WRITE_EXCL_FLAGS, 0o600, dir_fd=info)
                except FileExistsError:
                    continue
                try:
                    os.write(fd, text)
                finally:
                    os.close(fd)
                try:
                    os.stat(name, dir_fd=files, follow_symlinks=False)
                except FileNotFoundError:
                    pass
                else:  # a file of that name without its info: leave both, try the next
                    os.unlink(name + ".trashinfo", dir_fd=info)
                    continue
                try:
                    os.rename(aside, name, dst_dir_fd=files)
                except BaseException:
                    os.unlink(name + ".trashinfo", dir_fd=info)
                    raise
                return (os.path.join(root, "files", name),
                        os.path.join(root, "info", name + ".trashinfo"))
        finally:
            os.close(info)
    finally:
        os.close(files)
    raise OSError(errno.EEXIST, f"no free name for {original} in {root}")
