"""What a forced operation does with the file it removes: a foreign file with content goes to
the desktop trash, or to a quarantine folder where there is no trash, never simply unlinked;
and the way back (docs/DESIGN.md, "Nothing lost"; docs/engine.md, "Nothing is simply
unlinked").

The protocol around it is unchanged (:mod:`core.engine.publish`): under the directory guard the
judged file is renamed out of the lock path to an engine temp name in the same directory and
verified to be the file judged; only then does :class:`Disposal` decide what becomes of that
temp name -- unlink it (a Lockwarden lock, an empty file), or :func:`put_aside` it. If the file
cannot be kept, it is put back and the operation fails (:class:`core.errors.NotKept`).

- **Trash**: ``send2trash`` (the XDG trash on Linux: ``$XDG_DATA_HOME/Trash`` for files on the
  home's file system, ``.Trash/$UID`` or ``.Trash-$UID`` at the top of other mounts -- never
  when that top lies in a git repository, docs/audit.md "Where entries go"; the system's
  trash on macOS and Windows). On Linux the entry is then given the lock's own name
  and its ``.trashinfo`` the lock's path, so the file manager's *Restore* puts it back where
  it was (never under an engine temp name, which ``lockwarden clean`` would treat as a
  leftover).
- **Quarantine**: where the trash refuses (no trash on that mount, a headless account without
  a writable one), ``platformdirs.user_data_dir("lockwarden")/quarantine/`` (mode 0700),
  the file named ``<UTC time>-<random>-<lock name>``.
- **Back** (:func:`restore`): link the kept file to the lock path, which fails if anything is
  there now (a new lock is never overwritten), then drop it from the trash or quarantine.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from core import audit, formats
from core.audit.placement import repository_of
from core.engine import gate
from core.engine.gate import Act, Intent, must_keep
from core.errors import LockError, LockHeld, NotKept, ParseError
from core.fsutil import WRITE_EXCL_FLAGS
from core.record import FileInfo, LockStatus
from core.tempfiles import temp_path
from core.verdicts.inspect import inspect

QUARANTINE_DIR = "quarantine"
"""Folder inside ``platformdirs.user_data_dir("lockwarden")`` that takes what the trash
refuses."""

_XDG = sys.platform not in ("darwin", "win32")


@dataclass(frozen=True)
class Kept:
    """Where a forced operation put the file it removed.

    Attributes:
        method: ``"trash"`` or ``"quarantine"``.
        path: the file's path now ("" when the system trash does not say: macOS, Windows).
        original: the lock path it was removed from.
        info: the trash's ``.trashinfo`` file of it (XDG trash), else ``None``.
    """

    method: str
    path: str
    original: str
    info: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        """The audit entry's ``details["kept"]``: ``method``, ``path``, ``original``, ``info``."""
        return {"method": self.method, "path": self.path, "original": self.original,
                "info": self.info}

    def where(self) -> str:
        """In words: ``the trash (PATH)`` or ``quarantine (PATH)``."""
        place = "the trash" if self.method == "trash" else "quarantine"
        return f"{place} ({self.path})" if self.path else place


class Disposal:
    """The last step of a verified removal, called under the directory guard with the temp
    name the judged file was moved to, its bytes and identity (:func:`core.engine.publish.
    remove_if`, :func:`core.engine.publish.take_over`): unlink it, or -- when ``keep`` and
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
    from send2trash import send2trash  # imported here: the CLI's other verbs never pay for it

    st = os.lstat(aside)
    if _XDG:
        top = _mount_top(aside)
        home = os.path.realpath(os.path.expanduser("~"))
        if st.st_dev != os.stat(home).st_dev and repository_of(top) is not None:
            raise OSError(errno.EPERM, f"the trash of {top} would be in the git repository "
                          f"{repository_of(top)}; Lockwarden writes nothing into a repository")
    send2trash(aside)
    if os.path.lexists(aside):
        raise OSError(errno.EIO, "send2trash returned but the file is still there")
    if not _XDG:  # pragma: no cover - macOS, Windows: the system trash keeps its own records
        return Kept("trash", "", original)
    found = _find_trashed(aside, st)
    if found is None:
        return Kept("trash", "", original)
    return _tidy(found[0], found[1], original)


def _trash_roots(aside: str) -> list[str]:
    """The XDG trash directories ``aside`` may have gone to (send2trash's, then the
    environment's home trash; then the mount top's ``.Trash/$UID`` and ``.Trash-$UID``)."""
    roots: list[str] = []
    plat = sys.modules.get("send2trash.plat_other")
    home = getattr(plat, "HOMETRASH", None)
    if isinstance(home, str):
        roots.append(home)
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
    roots.append(os.path.join(data_home, "Trash"))
    top = _mount_top(aside)
    uid = ""
    if sys.platform != "win32":
        uid = str(os.getuid())
    roots += [os.path.join(top, ".Trash", uid), os.path.join(top, f".Trash-{uid}")]
    return list(dict.fromkeys(roots))


def _mount_top(path: str) -> str:
    """The mount point ``path`` lies under (where send2trash puts a mount's trash)."""
    top = os.path.realpath(os.path.dirname(path))
    while not os.path.ismount(top):
        top = os.path.dirname(top)
    return top


def _find_trashed(aside: str, st: os.stat_result) -> tuple[str, str | None] | None:
    """The trashed file (``files/<name>``) and its ``.trashinfo`` for ``aside``, whose name
    holds 128 random bits and so is unique in any trash; the same inode wins when several
    roots hold that name."""
    name = os.path.basename(aside)
    hits: list[tuple[str, str | None]] = []
    for root in _trash_roots(aside):
        f = os.path.join(root, "files", name)
        try:
            fst = os.lstat(f)
        except OSError:
            continue
        info = os.path.join(root, "info", name + ".trashinfo")
        hit = (f, info if os.path.lexists(info) else None)
        if (fst.st_ino, fst.st_dev) == (st.st_ino, st.st_dev):
            return hit
        hits.append(hit)
    return hits[0] if hits else None


def _tidy(files_path: str, info_path: str | None, original: str) -> Kept:
    """Give the trashed file the lock's name (``name``, ``name 1``... as send2trash numbers)
    and its ``.trashinfo`` the lock's path, so *Restore* puts it back there; on any failure
    the entry stays as send2trash made it."""
    root = os.path.dirname(os.path.dirname(files_path))
    stem, ext = os.path.splitext(os.path.basename(original))
    date = datetime.now().strftime("%Y-%m-%dT%H:%M:%S")
    if info_path is not None:
        with contextlib.suppress(OSError, UnicodeDecodeError), \
                open(info_path, encoding="utf-8") as f:
            for line in f:
                if line.startswith("DeletionDate="):
                    date = line.split("=", 1)[1].strip()
    text = f"[Trash Info]\nPath={quote(original)}\nDeletionDate={date}\n".encode()
    for n in range(100):
        name = f"{stem}{ext}" if n == 0 else f"{stem} {n}{ext}"
        new_info = os.path.join(root, "info", name + ".trashinfo")
        new_file = os.path.join(root, "files", name)
        try:
            fd = os.open(new_info, WRITE_EXCL_FLAGS, 0o600)
        except FileExistsError:
            continue
        except OSError:
            break
        try:
            os.write(fd, text)
        finally:
            os.close(fd)
        try:
            os.link(files_path, new_file, follow_symlinks=False)
        except FileExistsError:
            os.unlink(new_info)
            continue
        except OSError:
            os.unlink(new_info)
            break
        os.unlink(files_path)
        if info_path is not None:
            with contextlib.suppress(OSError):
                os.unlink(info_path)
        return Kept("trash", new_file, original, new_info)
    return Kept("trash", files_path, original, info_path)


def quarantine_dir() -> str:
    """``platformdirs.user_data_dir("lockwarden")/quarantine`` (Linux:
    ``~/.local/share/lockwarden/quarantine``). Not created here."""
    import platformdirs

    return os.path.join(platformdirs.user_data_dir("lockwarden"), QUARANTINE_DIR)


def _to_quarantine(aside: str, original: str) -> Kept:
    qdir = quarantine_dir()
    os.makedirs(qdir, mode=0o700, exist_ok=True)
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
    return Kept("quarantine", dest, original)


def restore(kept: Kept, *, reason: str | None = None) -> LockStatus:
    """Put a kept file back at its lock path (the GUI's Undo of a force release), audited as
    ``restore`` with where it came from. The file is linked in, so a path taken meanwhile is
    never overwritten; across file systems it is copied to an engine temp name beside the lock
    first. Returns the verdict on the restored file.

    Raises:
        LockHeld: something is at the lock path now (the file stays where it was kept).
        LockError: the kept file is gone from the trash or quarantine, or its path is unknown.
        OSError: the lock's directory cannot be written.
    """
    src, path = kept.path, kept.original
    if not src or not os.path.isfile(src):
        raise LockError(f"{path}: the removed file is no longer in {kept.where()}")
    answer = gate.ask(path, inspect(path), Intent.RESTORE)
    if answer.act is not Act.PUBLISH:
        raise LockHeld(f"{path}: not restored, {answer.words()}; the removed file stays in "
                       f"{kept.where()}", answer.status)
    try:
        _link_in(src, path)
    except FileExistsError:
        now = inspect(path)
        raise LockHeld(f"{path}: not restored, the path is taken again; the removed file stays "
                       f"in {kept.where()}", now) from None
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


def _link_in(src: str, path: str) -> None:
    """``link(src, path)``; across file systems through a complete copy under an engine temp
    name beside ``path`` that is then linked; where the lock's file system has no hard links,
    an ``O_EXCL`` create of ``path`` and a copy (the specs' protocol). Raises
    FileExistsError when ``path`` is taken."""
    try:
        os.link(src, path, follow_symlinks=False)
        return
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in _NO_LINK:
            raise
    mode = stat.S_IMODE(os.lstat(src).st_mode)
    tmp = temp_path(path)
    _copy_to(src, tmp, mode)
    try:
        os.link(tmp, path, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in _NO_LINK:
            raise
        _copy_to(src, path, mode)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


_NO_LINK = {errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK,
            errno.ENOSYS}


def _copy_to(src: str, dest: str, mode: int) -> None:
    """Create ``dest`` exclusively (never through a symlink) with ``mode`` and copy ``src``
    into it. Raises FileExistsError when ``dest`` exists."""
    with open(src, "rb") as f:
        fd = os.open(dest, WRITE_EXCL_FLAGS, mode)
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(f, out)


__all__ = ["QUARANTINE_DIR", "Disposal", "Kept", "put_aside", "quarantine_dir",
           "restore"]
