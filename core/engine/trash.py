"""What a forced operation does with the file it removes: a foreign file with content goes to
the desktop trash, or to a quarantine folder where there is no trash, never simply unlinked;
and the way back (docs/DESIGN.md, "Nothing lost"; docs/engine.md, "Nothing is simply
unlinked", "Whose trash").

The protocol around it is unchanged (:mod:`core.engine.publish`): under the directory guard the
judged file is renamed out of the lock path to an engine temp name in the same directory and
verified to be the file judged; only then does :class:`Disposal` decide what becomes of that
temp name -- unlink it (a Lockwarden lock, an empty file: :func:`core.engine.gate.must_keep`),
or :func:`put_aside` it. If the file cannot be kept, it is put back and the operation fails
(:class:`core.errors.NotKept`).

- **Trash**, only where this user owns it (:mod:`core.engine.trashdirs`): on Linux the XDG
  trash -- ``$XDG_DATA_HOME/Trash`` for files on the home's file system, the mount's
  ``.Trash/$UID`` or ``.Trash-$UID`` for others, each a real directory of this user's, never
  a link, never another user's; never when the mount's top lies in a git repository,
  docs/audit.md "Where entries go". The file keeps the lock's own name and its
  ``.trashinfo`` the lock's path, so the file manager's *Restore* puts it back where it was.
  ``send2trash`` (the system's trash) on macOS and Windows.
- **Quarantine**: where no trash qualifies, ``platformdirs.user_data_dir("lockwarden")/
  quarantine/`` (this user's, mode 0700, checked the same way), the file named
  ``<UTC time>-<random>-<lock name>``.
- **Back** (:func:`restore`): only the very file that was put away -- the device, inode and
  SHA-256 of its content recorded in :class:`Kept` (the audit entry's ``kept``), owned by this
  user -- is linked back to the lock path, through the descriptor it was checked on; a path
  taken meanwhile is never overwritten (the gate: :func:`core.engine.gate.ask`).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import stat
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from core import audit, formats
from core.engine import gate
from core.engine.gate import Act, Intent, must_keep
from core.engine.trashdirs import own_dir, trash_for, trash_move
from core.errors import LockError, LockHeld, NotKept, ParseError
from core.fsutil import READ_FLAGS, WRITE_EXCL_FLAGS, pread
from core.record import FileInfo, LockStatus
from core.tempfiles import temp_path
from core.verdicts.inspect import inspect

QUARANTINE_DIR = "quarantine"
"""Folder inside ``platformdirs.user_data_dir("lockwarden")`` that takes what the trash
refuses."""

_XDG = sys.platform not in ("darwin", "win32")



@dataclass(frozen=True)
class Kept:
    """Where a forced operation put the file it removed, and which file that is.

    Attributes:
        method: ``"trash"`` or ``"quarantine"``.
        path: the file's path now ("" when the system trash does not say: macOS, Windows).
        original: the lock path it was removed from.
        info: the trash's ``.trashinfo`` file of it (XDG trash), else ``None``.
        dev, ino: the kept file's device and inode; ``sha256``: the SHA-256 of its content
            (hex). :func:`restore` puts back only that file. ``None`` where unknown.
    """

    method: str
    path: str
    original: str
    info: str | None = None
    dev: int | None = None
    ino: int | None = None
    sha256: str | None = None

    def to_dict(self) -> dict[str, str | int | None]:
        """The audit entry's ``details["kept"]``: ``method``, ``path``, ``original``, ``info``,
        ``dev``, ``ino``, ``sha256``."""
        return {"method": self.method, "path": self.path, "original": self.original,
                "info": self.info, "dev": self.dev, "ino": self.ino, "sha256": self.sha256}

    def where(self) -> str:
        """In words: ``the trash (PATH)`` or ``quarantine (PATH)``."""
        place = "the trash" if self.method == "trash" else "quarantine"
        return f"{place} ({self.path})" if self.path else place


def _digest(fd: int) -> str:
    """SHA-256 (hex) of the content of the open file ``fd``, read from its start."""
    h = hashlib.sha256()
    offset = 0
    while True:
        chunk = pread(fd, 1 << 16, offset)
        if not chunk:
            return h.hexdigest()
        h.update(chunk)
        offset += len(chunk)


def _identity(path: str) -> tuple[int, int, str]:
    """``(dev, ino, sha256)`` of the regular file at ``path`` (never through a link).

    Raises:
        OSError: it cannot be opened, or is not a regular file.
    """
    fd = os.open(path, READ_FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file")
        return st.st_dev, st.st_ino, _digest(fd)
    finally:
        os.close(fd)


class Disposal:
    """The last step of a verified removal, called under the directory guard with the temp
    name the judged file was moved to, its bytes and identity (:func:`core.engine.remove.
    remove_if`, :func:`core.engine.takeover.take_over`): unlink it, or -- when ``keep`` and
    :func:`must_keep` -- :func:`put_aside` it; :attr:`kept` then says where.

    Raises (from the call): :class:`core.errors.NotKept` (the file is still at the temp name:
    the caller puts it back).
    """

    def __init__(self, original: str, *, keep: bool = True) -> None:
        self.original = original
        self.keep = keep
        self.kept: Kept | None = None

    def __call__(self, aside: str, data: bytes, info: FileInfo) -> None:
        ours = False
        if data:
            with contextlib.suppress(ParseError):
                ours = formats.parse(data, self.original).written_by_lockwarden
        if not self.keep or not must_keep(data, ours):
            os.unlink(aside)
            return
        self.kept = put_aside(aside, self.original)


def put_aside(aside: str, original: str) -> Kept:
    """Move the file at ``aside`` (out of the lock path already) to the trash, else to the
    quarantine folder; ``original`` is the lock path it came from.

    Raises:
        NotKept: neither took it; the file is still at ``aside``.
    """
    why: list[str] = []
    try:
        return _to_trash(aside, original)
    except Exception as exc:  # send2trash raises OSError, and more on odd platforms
        if not os.path.lexists(aside):
            raise NotKept(f"{original}: the trash took the file but it cannot be found "
                          f"({exc})") from exc
        why.append(f"trash: {exc}")
    try:
        return _to_quarantine(aside, original)
    except OSError as exc:
        why.append(f"quarantine: {exc.strerror or exc}")
    raise NotKept(f"{original}: the file could not be kept ({'; '.join(why)}), so it was not "
                  "removed")


def _to_trash(aside: str, original: str) -> Kept:
    if not _XDG:  # pragma: no cover - macOS, Windows: the system trash keeps its own records
        from send2trash import send2trash  # imported here: other verbs never pay for it

        send2trash(aside)
        if os.path.lexists(aside):
            raise OSError(errno.EIO, "send2trash returned but the file is still there")
        return Kept("trash", "", original)
    dev, ino, digest = _identity(aside)
    root = trash_for(aside)  # NotOurs (an OSError): no trash there is this user's own
    moved, info = trash_move(aside, original, root)
    return Kept("trash", moved, original, info, dev, ino, digest)


def quarantine_dir() -> str:
    """``platformdirs.user_data_dir("lockwarden")/quarantine`` (Linux:
    ``~/.local/share/lockwarden/quarantine``). Not created here."""
    import platformdirs

    return os.path.join(platformdirs.user_data_dir("lockwarden"), QUARANTINE_DIR)


def _to_quarantine(aside: str, original: str) -> Kept:
    qdir = quarantine_dir()
    os.makedirs(os.path.dirname(qdir), mode=0o700, exist_ok=True)
    own_dir(qdir)  # this user's alone, never through a link (NotOurs otherwise)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    dest = os.path.join(qdir, f"{stamp}-{os.urandom(3).hex()}-{os.path.basename(original)}")
    try:
        os.rename(aside, dest)  # the same file system: one step
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        try:
            shutil.copy2(aside, dest, follow_symlinks=False)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(dest)
            raise
        os.unlink(aside)
    dev, ino, digest = _identity(dest)
    return Kept("quarantine", dest, original, None, dev, ino, digest)


def restore(kept: Kept, *, reason: str | None = None) -> LockStatus:
    """Put a kept file back at its lock path (the GUI's Undo of a force release), audited as
    ``restore`` with where it came from -- only the very file that was put away: a regular
    file of this user's whose device, inode and content hash are the ones ``kept`` recorded,
    linked back through the descriptor it was checked on. The gate must see the path free
    (:attr:`~core.engine.gate.Intent.RESTORE`), and the link never replaces anything, so a
    lock taken meanwhile is never overwritten; across file systems the checked content is
    copied to an engine temp name beside the lock first. Returns the verdict on the restored
    file (docs/engine.md, "Whose trash").

    Raises:
        LockHeld: something is at the lock path now (the file stays where it was kept).
        LockError: the kept file is gone from the trash or quarantine, or is not the file put
            away (another inode, other content, another user's), or ``kept`` does not say
            which file it was.
        OSError: the lock's directory cannot be written.
    """
    src, path = kept.path, kept.original
    if not src or kept.dev is None or kept.ino is None or kept.sha256 is None:
        raise LockError(f"{path}: which file was put away is not known, so nothing is put "
                        "back")
    try:
        fd = os.open(src, READ_FLAGS)
    except OSError:
        raise LockError(f"{path}: the removed file is no longer in {kept.where()}") from None
    try:
        st = os.fstat(fd)
        uid = st.st_uid
        if sys.platform != "win32":
            uid = os.geteuid()
        if not stat.S_ISREG(st.st_mode) or st.st_uid != uid:
            raise LockError(f"{path}: {src} is not this user's file any more; nothing was put "
                            "back")
        if (st.st_dev, st.st_ino) != (kept.dev, kept.ino) or _digest(fd) != kept.sha256:
            raise LockError(f"{path}: {src} is not the file that was put away (another file "
                            "or other content now); nothing was put back")
        answer = gate.ask(path, inspect(path), Intent.RESTORE)
        if answer.act is not Act.PUBLISH:
            raise LockHeld(f"{path}: not restored, {answer.words()}; the removed file stays "
                           f"in {kept.where()}", answer.status)
        try:
            _link_in(fd, src, path, stat.S_IMODE(st.st_mode))
        except FileExistsError:
            now = inspect(path)
            raise LockHeld(f"{path}: not restored, the path is taken again; the removed file "
                           f"stays in {kept.where()}", now) from None
    finally:
        os.close(fd)
    with contextlib.suppress(OSError):
        if (os.lstat(src).st_dev, os.lstat(src).st_ino) == (kept.dev, kept.ino):
            os.unlink(src)
    if kept.info:
        with contextlib.suppress(OSError):
            os.unlink(kept.info)
    status = inspect(path)
    details: dict[str, Any] = {"kept": kept.to_dict(), "reason": reason,
                               "restored": status.to_dict()}
    try:
        audit.append(path, "restore", details=details,
                     format=status.record.format if status.record else None)
    except Exception:  # auditing never turns a done operation into a failure
        pass
    return status


def _link_in(fd: int, src: str, path: str, mode: int) -> None:
    """Link the checked file (open as ``fd``) to ``path``: through ``/proc/self/fd`` where
    there is one (the inode checked, whatever ``src`` names now), else ``src``; across file
    systems, or where the lock's file system has no hard links, a complete copy of the
    descriptor's content under an engine temp name beside ``path``, linked (or, without
    links, an ``O_EXCL`` create of ``path``). Raises FileExistsError when ``path`` is taken."""
    proc = f"/proc/self/fd/{fd}"
    try:
        if os.path.exists(proc):
            os.link(proc, path, follow_symlinks=True)
        else:
            os.link(src, path, follow_symlinks=False)
        return
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in _NO_LINK:
            raise
    tmp = temp_path(path)
    _copy_to(fd, tmp, mode)
    try:
        os.link(tmp, path, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in _NO_LINK:
            raise
        _copy_to(fd, path, mode)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


_NO_LINK = {errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK,
            errno.ENOSYS}


def _copy_to(fd: int, dest: str, mode: int) -> None:
    """Create ``dest`` exclusively (never through a symlink) with ``mode`` and copy the content
    of the open file ``fd`` into it. Raises FileExistsError when ``dest`` exists."""
    out = os.open(dest, WRITE_EXCL_FLAGS, mode)
    try:
        offset = 0
        while chunk := pread(fd, 1 << 16, offset):
            view = memoryview(chunk)
            while view:
                view = view[os.write(out, view):]
            offset += len(chunk)
    finally:
        os.close(out)


__all__ = ["QUARANTINE_DIR", "Disposal", "Kept", "put_aside", "quarantine_dir",
           "restore"]
