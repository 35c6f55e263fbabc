"""The engine's publish protocol: how a complete lock file gets to, and leaves, a lock path
(docs/engine.md, "Guarantees and how they are kept"; docs/DESIGN.md, "Lock operations"). What is
written comes from the formats (:func:`core.formats.build`); when and why, from
:mod:`core.engine.lock` and :mod:`core.engine.operations`.

- **Publish** (:func:`publish`): the complete, fsynced temp file
  ``.<name>.<pid>.<token>.lwtmp`` (:func:`stage`, ``O_CREAT|O_EXCL|O_NOFOLLOW``, the format's
  mode: 0644, task-mcp 0600) is hard-linked to the lock path; ``link()`` fails with
  ``EEXIST`` when the lock exists. Where hard links are not supported (``EPERM``, ``ENOTSUP``,
  ``EXDEV``...) the specs' ``O_CREAT|O_EXCL`` + write + fsync is used.
  ``rename()`` never targets the lock path here: it would replace a held lock.
- **Take-over**: :mod:`core.engine.takeover` (the guarded exchange of a judged lock for ours);
  it puts a file it should not have moved back with :func:`swap_back`.
- **Renew** (:func:`renew`): a refresh exchanges the renewed file in under the guard after
  checking the path still holds our acquisition, and checks what came out; a lock on the
  empty file flock-style tools lock is rewritten in place instead (:func:`renew_in_place`).
- **Verified remove**: :func:`core.engine.remove.remove_if`. The small operations on
  directory entries both use are :mod:`core.engine.entries`.

Crash testing (test-only): when the environment variable :data:`CRASH_ENV` names one of
:data:`CRASH_POINTS`, the process calls ``os._exit(137)`` at that step (docs/engine.md,
"Crashes and leftovers").
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sys
from collections.abc import Callable, Iterator
from typing import NamedTuple

from core import seam
from core.engine import exchange as _exchange
from core.engine.entries import (
    link_nofollow,
    open_in_place,
    put_back,
    read_regular,
    unlink_quiet,
    write_all,
)
from core.engine.exchange import DirGuard, ExchangeUnsupported
from core.errors import LockError, LockLost
from core.fsutil import (
    MAX_LOCK_BYTES,
    WRITE_EXCL_FLAGS,
    file_info,
    fsync_dir,
    pread,
)
from core.record import FileInfo
from core.tempfiles import temp_path

log = logging.getLogger("lockwarden.lock")

CRASH_ENV = "LOCKWARDEN_CRASH_AT"
"""Environment variable naming a crash point (test-only, see :data:`CRASH_POINTS`)."""

CRASH_POINTS: tuple[str, ...] = (
    "after_temp_create",  # empty temp file exists
    "after_temp_write",  # temp file complete and fsynced
    "after_link",  # lock published, temp name still present
    "after_temp_unlink",  # lock published, before directory fsync and audit
    "reclaim_after_guard",  # guard held, nothing changed yet
    "reclaim_after_exchange",  # new lock at the path, judged file at the temp name
    "reclaim_after_unlink_old",  # judged file removed, before audit
    "reclaim_after_rename_out",  # no-exchange fallback: judged file moved to .swap
    "release_after_rename_out",  # our lock moved to .rel, not yet removed
    "refresh_after_exchange",  # renewed lock at the path, old one at the temp name
)
"""Steps at which ``LOCKWARDEN_CRASH_AT`` makes the process exit with ``os._exit(137)``."""

Dispose = Callable[[str, bytes, FileInfo], None]
"""The last step of a verified removal (:class:`core.engine.trash.Disposal`): called under the
guard with the temp name the judged file was moved to, its bytes and identity; it must unlink
or move that name, or raise (the file is then put back). ``None``: unlink it."""

MAX_RETRIES = 50
"""Attempts before an operation on a path that keeps changing under it gives up."""

_LINK_UNSUPPORTED = {
    errno.EPERM,
    errno.ENOTSUP,
    errno.EOPNOTSUPP,
    errno.EXDEV,
    errno.EMLINK,
    errno.ENOSYS,
}
_no_link_devs: set[int] = set()
"""Devices where ``link()`` was refused: publish with ``O_EXCL`` there."""
_no_exchange_devs: set[int] = set()
"""Devices where the exchange primitive was refused: rename out under the guard there."""


_crash_at = os.environ.get(CRASH_ENV)
"""``LOCKWARDEN_CRASH_AT`` as the process had it when this module was imported (the crash tests
set it for the processes they start): read once, not at each of the five crash points of a
cycle (an environment lookup each, ~7 us of an acquire+release)."""


def crash_point(step: str) -> None:
    """Test-only crash hook: ``os._exit(137)`` when ``LOCKWARDEN_CRASH_AT == step`` (read when
    the module is imported)."""
    if _crash_at is not None and _crash_at == step:
        os._exit(137)


def new_token() -> str:
    """128 random bits as 32 lowercase hex digits (``os.urandom``, as ``secrets.token_hex``
    uses; importing :mod:`secrets` would cost the CLI ~9 ms)."""
    return os.urandom(16).hex()


# -- publishing -------------------------------------------------------------------------------


class Staged(NamedTuple):
    """A complete lock file waiting under its temp name beside the lock.

    Attributes:
        path: the lock path it is meant for. ``tmp``: its temp name. ``data``: its bytes.
        ident: ``(inode, device)`` of the temp file (the lock's once linked; :func:`settle`
            gives the lock's where the ``O_EXCL`` fallback wrote a new inode).
        mode: its permission bits (the ``O_EXCL`` fallback creates the lock with them).
        durable: fsync the file and its directory (:func:`stage`).
        keep: a descriptor of the staged file held open for the block (-1 on Windows, where
            an open file cannot be renamed or unlinked): while it is open the file's inode
            number cannot be given to another file, so ``ident`` names only our file however
            a peer unlinks it meanwhile (a sema peer did, and its new file got our number:
            docs/engine.md, "Every interleaving checked").
    """

    path: str
    tmp: str
    data: bytes
    ident: tuple[int, int]
    mode: int = 0o644
    durable: bool = False
    keep: int = -1


def _write_temp(tmp: str, data: bytes, mode: int = 0o644,
                durable: bool = False) -> tuple[int, int, int]:
    """Create ``tmp`` exclusively (never through a symlink) with permission bits ``mode``
    (the umask may only remove bits), write ``data``, fsync it when ``durable``. Returns the
    file's ``(inode, device)`` and its descriptor, still open (-1 on Windows: closed)."""
    try:
        fd = os.open(tmp, WRITE_EXCL_FLAGS, mode)
    except OSError as exc:
        raise LockError(
            f"cannot create a lock file in {os.path.dirname(tmp)}: "
            f"{exc.strerror or exc}"
        ) from exc
    try:
        crash_point("after_temp_create")
        write_all(fd, data)
        if durable:
            os.fsync(fd)
        st = os.fstat(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if sys.platform == "win32":  # an open file there cannot be renamed or unlinked
        os.close(fd)
        fd = -1
    crash_point("after_temp_write")
    return st.st_ino, st.st_dev, fd


@contextlib.contextmanager
def stage(path: str, token: str, data: bytes, mode: int = 0o644,
          durable: bool = False) -> Iterator[Staged]:
    """Write ``data`` to ``.<name>.<pid>.<token>.lwtmp`` beside ``path``
    (:func:`core.tempfiles.temp_path`; ``O_EXCL|O_NOFOLLOW``, permission bits ``mode`` -- the
    format's :attr:`core.formats.Built.mode`) for the duration of the block; the temp name is
    removed on leaving.

    ``durable``: fsync the file here and its directory in :func:`settle`. Off by default
    (docs/architecture.md, "Durability"): after a power loss every holder is dead, so a lock
    file that survives it buys nothing; what matters -- that no reader takes a torn or empty
    file for a live lock -- is the verdict's rule (an empty or torn file past the writing grace,
    a lock older than the last boot: stale). A process crash loses nothing either way (the page
    cache survives it).

    The staged file's descriptor stays open for the block (:attr:`Staged.keep`): its
    ``ident`` stays ours for the holder's pin taken on it (:class:`core.kernel.pin.Prepin`).

    Raises:
        LockError: the temp file cannot be created (permissions, a full disk...).
    """
    tmp = temp_path(path, token)
    ino, dev, keep = _write_temp(tmp, data, mode, durable)
    staged = Staged(path, tmp, data, (ino, dev), mode, durable, keep)
    try:
        yield staged
    finally:
        unlink_quiet(tmp)
        if keep >= 0:
            os.close(keep)


def publish(staged: Staged) -> bool:
    """Make the complete temp file the lock: ``link(tmp, path)``; ``O_EXCL`` create where
    hard links are not supported. False when something is already at the path."""
    path, tmp, data = staged.path, staged.tmp, staged.data
    dev = os.lstat(tmp).st_dev if _no_link_devs else -1
    if dev not in _no_link_devs:
        try:
            link_nofollow(tmp, path)
            crash_point("after_link")
            return True
        except FileExistsError:
            return False
        except OSError as exc:
            if exc.errno not in _LINK_UNSUPPORTED:
                raise
            _no_link_devs.add(os.lstat(tmp).st_dev)
    # specs' protocol: O_CREAT|O_EXCL, write, fsync (a reader may see it partial)
    try:
        fd = os.open(path, WRITE_EXCL_FLAGS, staged.mode)
    except FileExistsError:
        return False
    try:
        write_all(fd, data)
        if staged.durable:
            os.fsync(fd)
    except BaseException:
        # our own partial file would stay "unreadable" forever: take it back
        with contextlib.suppress(OSError):
            seam.step("unlink", path)
            os.unlink(path)
        raise
    finally:
        os.close(fd)
    return True


def settle(staged: Staged, *, linked: bool) -> tuple[int, int]:
    """Finish a publish once the path holds our lock: drop the temp name when it is still
    linked to the lock (``linked``), fsync the directory when the staged file is ``durable``.
    Returns the lock's ``(inode, device)`` (a new inode where the ``O_EXCL`` fallback wrote
    it)."""
    if linked:
        unlink_quiet(staged.tmp)
        crash_point("after_temp_unlink")
    ident = staged.ident
    if _no_link_devs and ident[1] in _no_link_devs:
        with contextlib.suppress(OSError):
            st = os.lstat(staged.path)
            ident = (st.st_ino, st.st_dev)  # the O_EXCL fallback wrote a new inode
    if staged.durable:
        with contextlib.suppress(OSError):
            fsync_dir(os.path.dirname(staged.path))
    return ident


# -- putting a moved file back, renewing and removing our own lock ---------------------------


def swap_back(moved: str, path: str, *, hold: bool) -> None:
    """Exchange the file a take-over moved out (now at ``moved``, our temp name) back with
    ours at ``path``. When ``path`` is gone meanwhile -- a peer that releases by unlinking
    whatever is there took ours (sema: docs/engine.md, "What it cannot promise") -- the moved
    file is linked back instead (:func:`core.engine.entries.put_back`), never left under a
    temp name our clean-up would delete (found by the interleaving checker: docs/engine.md,
    "Every interleaving checked")."""
    seam.step("exchange", path)
    try:
        _exchange.exchange(moved, path)
    except FileNotFoundError:
        if os.path.lexists(moved):
            put_back(moved, path, hold=hold)




def renew(staged: Staged, old_data: bytes, ident: tuple[int, int]) -> str | None:
    """Under the guard, put the renewed lock ``staged`` in place of ours (``old_data`` at
    inode/device ``ident``): exchange it in and check what came out (swap back if it was not
    ours); without an exchange primitive, ``rename`` it over ours right after the check. The
    path is never empty and a lock that is no longer ours is never overwritten
    (docs/engine.md, "Refresh"). Returns None when renewed, else why the lock is lost.

    Raises:
        GuardTimeout: the directory guard stayed held by another process.
    """
    path, tmp = staged.path, staged.tmp
    with DirGuard(os.path.dirname(path)):
        cur = read_regular(path)
        if cur is None or cur[0] != old_data or (cur[1].ino, cur[1].dev) != ident:
            return "the lock file was removed or replaced"
        try:
            if cur[1].dev in _no_exchange_devs:
                raise ExchangeUnsupported(errno.ENOTSUP, "no exchange")
            seam.step("exchange", path)
            _exchange.exchange(tmp, path)
            crash_point("refresh_after_exchange")
            out = read_regular(tmp)
            if out is None or out[0] != old_data or (out[1].ino, out[1].dev) != ident:
                swap_back(tmp, path, hold=False)
                return "the lock file was replaced"
        except FileNotFoundError:  # a peer that releases by unlinking took ours meanwhile
            return "the lock file was removed"
        except ExchangeUnsupported:
            _no_exchange_devs.add(cur[1].dev)
            seam.step("rename", path)
            os.replace(tmp, path)
    return None


def padded(data: bytes, length: int) -> bytes:
    """``data`` followed by newlines up to ``length`` bytes (as it is when already that long):
    every format ignores blank lines and trailing whitespace (docs/specs/sema.txt, "Empty lines
    are ignored"; JSON), so a record rewritten in place need never be cut shorter."""
    return data + b"\n" * (length - len(data))


def renew_in_place(path: str, data: bytes, ours: Callable[[bytes, FileInfo], bool], *,
                   durable: bool) -> str | None:
    """Under the guard, renew our lock at ``path`` by writing ``data`` over it in the same
    file, once ``ours(bytes, info)`` says what is there is still our acquisition (as
    :func:`core.engine.remove.empty_if` checks): for a lock that replaced the empty file
    flock-style tools lock (docs/engine.md, "Empty files", "Refresh"). Those tools lock the
    inode they opened and flock(1) never looks at the path again: one that opened the path
    while we held it waits on our pin, and a renewed file exchanged in would leave it that
    inode -- nameless once ours is unlinked -- to lock while we hold the new one. Here the inode
    never leaves the path. ``data`` is at least as long as what is there (:func:`padded`):
    the file is never cut, so a process killed in the write leaves the old record or the new
    one, never the new one with the old one's tail. Returns None when renewed, else why the
    lock is lost.

    Raises:
        GuardTimeout: the directory guard stayed held by another process.
        ValueError: ``data`` is shorter than the record there (nothing written).
        OSError: the write failed (the old bytes were put back where they could be). A failed
            ``fsync`` after it is logged, not raised: the record is renewed.
    """
    with DirGuard(os.path.dirname(path)):
        seam.step("read", path)
        try:
            fd = open_in_place(path)
        except LockLost as exc:
            return str(exc)
        try:
            cur = pread(fd, MAX_LOCK_BYTES + 1, 0)
            if not ours(cur, file_info(os.fstat(fd))):
                return "the lock file was removed or replaced"
            if len(data) < len(cur):
                raise ValueError("an in-place renewal is never shorter than the record there")
            seam.step("write", path)
            try:
                os.lseek(fd, 0, os.SEEK_SET)
                write_all(fd, data)
            except OSError:
                with contextlib.suppress(OSError):  # the old record back, as far as it goes
                    os.lseek(fd, 0, os.SEEK_SET)
                    write_all(fd, cur)
                raise
            if durable:
                try:
                    os.fsync(fd)
                except OSError as exc:
                    log.warning("%s: renewed, but fsync failed: %s", path, exc.strerror)
        finally:
            os.close(fd)
    return None


def discard(moved: str, path: str, out: tuple[bytes, FileInfo], dispose: Dispose | None) -> None:
    """Unlink the verified file at ``moved`` (``dispose`` None), or hand it to ``dispose``;
    if that raises, put it back at ``path`` (:func:`core.engine.entries.put_back`) and
    re-raise."""
    if dispose is None:
        seam.step("unlink", moved)
        os.unlink(moved)
        return
    try:
        dispose(moved, out[0], out[1])
    except BaseException:
        put_back(moved, path)
        raise
