"""Verified removal of a lock file (docs/engine.md, "Release never deletes a successor's lock",
"Releasing without the guard"): check in place, rename out to ``.<name>.<pid>.<random>.lwrel``,
check again what was moved, delete it (or hand it to a disposal); a foreign file is put back,
never replacing anything. Split from :mod:`core.engine.publish`, whose helpers it uses.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import sys
from collections.abc import Callable

from core import formats, seam
from core.engine.entries import open_in_place, put_back, read_regular
from core.engine.exchange import GUARD_TIMEOUT, DirGuard, GuardTimeout
from core.engine.gate import EmptyFile
from core.engine.publish import Dispose, crash_point, discard, new_token
from core.engine.unheld import Hold, hold_while_it_goes
from core.errors import LockHeld, LockLost, ParseError
from core.fsutil import MAX_LOCK_BYTES, describe_mode, file_info, pread
from core.record import FileInfo, LockRecord
from core.tempfiles import temp_path
from core.text import printable

log = logging.getLogger("lockwarden.lock")

OWN_RELEASE_GUARD_WAIT = 1.0
"""Seconds a holder releasing its own lock waits for the directory guard before it goes on
without it (Lockwarden holds the guard for well under a millisecond; longer means a stuck or
hostile process holds it)."""


def remove_if(path: str, ours: Callable[[bytes, FileInfo], bool],
              dispose: Dispose | None = None, *,
              notes: list[str] | None = None) -> tuple[bytes, FileInfo]:
    """Under the directory guard: check the lock in place with ``ours(bytes, info)`` (a lock
    that is not ours is never touched), then move it out to
    ``.<name>.<pid>.<random>.lwrel``, check that what was moved is that very file, unchanged
    (closes the gap between the check and the move against tools that replace files without
    the guard) and delete it -- or hand it to ``dispose`` (a forced removal keeps foreign
    files: :class:`core.engine.trash.Disposal`); put it back if it is not that file, or if
    ``dispose`` raises (docs/engine.md, "Release never deletes a successor's
    lock"). An empty file, or a lock its holder releases, is removed holding it as the tools
    that lock such files with ``flock``/``lockf`` would (:func:`core.engine.unheld.holding`): a
    peer that opened it meanwhile finds it put back at the path; a lock that peers hold or wait
    for is released by emptying it in place, never removed from under them.
    Returns the removed file's bytes and identity.

    Raises:
        LockLost: nothing is at ``path``, or what is there is not ``ours`` (left in place).
        ReadOnlyLock: an empty file a process holds a kernel lock on now (left in place).
        LockHeld: an empty file another process has open, or opened meanwhile (left in
            place).
        GuardTimeout: the directory guard stayed held by another process (a forced removal,
            ``dispose`` given).

    Without ``dispose`` -- a holder releasing its own lock, which ``ours`` proves -- a guard
    that stays held past :data:`OWN_RELEASE_GUARD_WAIT` (another user's ``flock -x`` on a
    shared directory) is not waited for: the release goes on without it, and the guard's holder
    (PID, user) is logged and appended to ``notes`` (docs/engine.md, "Releasing without the
    guard"). The check after the rename-out, not the guard, is what keeps a successor's lock
    from being deleted.
    """
    with contextlib.ExitStack() as guarded:
        _guard(guarded, path, strict=dispose is not None, notes=notes)
        # a fresh random name: the token is readable in the lock file, so a name derived from
        # it could be occupied in advance by anyone who can write to the directory
        rel = temp_path(path, new_token(), "rel")
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            raise LockLost(f"{path}: the lock file is gone") from None
        if not stat.S_ISREG(st.st_mode):
            raise LockLost(f"{path}: now {describe_mode(st.st_mode)}, not our lock")
        seen = read_regular(path)
        if seen is None or not ours(seen[0], seen[1]):
            raise LockLost(f"{path}: the lock file now belongs to someone else; left in place")
        with contextlib.ExitStack() as stack:
            # an empty file, or a lock of ours that flock-style tools may have come to lock
            # too: hold it as they would while it goes (core/engine/unheld.py)
            hold = hold_while_it_goes(stack, path, seen[0], seen[1], _record(seen[0], path),
                                      own=dispose is None)
            if hold is not None and (hold.busy or _kept_open(hold, own=dispose is None)):
                if not seen[0].strip():  # an empty file a peer is opening now: it stays
                    raise LockHeld(f"{path}: a process is opening it now, to lock it; "
                                   "nothing was removed")
                # its peers hold, wait for or open this very file: removing it would let two
                # of them in; releasing our lock leaves it in place, empty, for them
                hold.unlease()
                return _empty_in_place(path, ours, seen)
            _rename_out(path, rel)
            crash_point("release_after_rename_out")
            # what was moved must be the file checked, unchanged -- asked of the file itself,
            # never of the path again: another file may be there by now
            out = hold.moved(rel) if hold is not None else read_regular(rel)
            if out is None or out[1] != seen[1] or out[0] != seen[0]:
                put_back(rel, path, hold=hold is not None)
                raise LockLost(f"{path}: the lock file now belongs to someone else; left in "
                               "place")
            if hold is not None and (opened := hold.disturbed()) and not hold.retake():
                if not put_back(rel, path, hold=True):  # a peer opened it: back it goes
                    return out  # the path was taken meanwhile: it is unlinked (unheld.py)
                if seen[0].strip():  # a lock of ours: released by emptying it in place
                    hold.unlease()
                    return _empty_in_place(path, ours, seen)
                raise LockHeld(f"{path}: {_who(opened)} opened it meanwhile, to lock it; it "
                               "was put back, nothing was removed")
            discard(rel, path, out, dispose)
    return out


def _rename_out(path: str, rel: str) -> None:
    """Move the lock at ``path`` out to ``rel`` (a scheduling point: :mod:`core.seam`).

    Raises:
        LockLost: nothing is at ``path`` any more.
    """
    seam.step("rename", path)
    try:
        os.rename(path, rel)
    except FileNotFoundError:
        raise LockLost(f"{path}: the lock file is gone") from None


def _kept_open(hold: Hold, *, own: bool) -> bool:
    """True when an ``open`` broke ``hold``'s lease before the move and the file stays open
    elsewhere: the lease cannot be taken again (a reader that only looked is gone by then) --
    for a lock its holder releases, when a walk of ``/proc`` names another process than the
    lock's pin keepers too."""
    if not hold.opened() or hold.retake():
        return False
    return bool(hold.others()) if own else True


def _record(data: bytes, path: str) -> LockRecord | None:
    """The lock ``data`` holds, or ``None`` (empty, or no format reads it)."""
    if not data.strip():
        return None
    try:
        return formats.parse(data, path)
    except ParseError:
        return None


def _who(pids: tuple[int, ...]) -> str:
    real = [p for p in pids if p > 0]
    return f"PID {real[0]}" if real else "a process"


def _empty_in_place(path: str, ours: Callable[[bytes, FileInfo], bool],
                    seen: tuple[bytes, FileInfo]) -> tuple[bytes, FileInfo]:
    """Release the lock at ``path`` (still ``seen``, checked ``ours`` again through the
    descriptor) by emptying the file in place, its mode and owner kept (other processes lock
    or wait for this inode). Returns what it held.

    Raises:
        LockLost: it is gone or not ours any more.
    """
    fd = open_in_place(path)
    try:
        st = os.fstat(fd)
        data = pread(fd, MAX_LOCK_BYTES + 1, 0)
        info = file_info(st)
        if info != seen[1] or not ours(data, info):
            raise LockLost(f"{path}: the lock file now belongs to someone else; left in place")
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)
    log.info("%s: released by emptying it in place: other processes lock or wait for it",
             printable(path))
    return data, info


def _guard(stack: contextlib.ExitStack, path: str, *, strict: bool,
           notes: list[str] | None) -> None:
    """Enter the directory guard of ``path`` on ``stack``: waited for up to
    :data:`~core.engine.exchange.GUARD_TIMEOUT` when ``strict`` (a forced operation:
    :class:`~core.engine.exchange.GuardTimeout` past it), else up to
    :data:`OWN_RELEASE_GUARD_WAIT` and then gone on without it, the holder logged and noted
    (docs/engine.md, "Releasing without the guard")."""
    try:
        stack.enter_context(DirGuard(os.path.dirname(path),
                                     GUARD_TIMEOUT if strict else OWN_RELEASE_GUARD_WAIT))
    except GuardTimeout as exc:
        if strict:
            raise
        note = f"released without the directory guard: {exc.strerror}"
        log.warning("%s: %s", printable(path), note)
        if notes is not None:
            notes.append(note)


def empty_if(path: str, ours: Callable[[bytes, FileInfo], bool], emptied: EmptyFile, *,
             strict: bool = False, notes: list[str] | None = None) -> tuple[bytes, FileInfo]:
    """Release a lock that replaced an empty file by emptying it in place: under the
    directory guard (as :func:`remove_if`: ``strict`` for a forced operation), open it,
    check through that descriptor with ``ours(bytes, info)`` that it is the lock to release,
    then truncate it to nothing and give it the replaced file's mode, owner (where this user
    may) and modification time (docs/engine.md, "Empty files"). The inode never leaves the
    path, so a tool that locks the file with ``flock``/``lockf`` -- and may hold or wait for
    it now -- keeps one file to contend on. Returns the bytes and identity it had.

    Raises:
        LockLost: nothing is at ``path``, or what is there is not ``ours`` (left in place).
        GuardTimeout: ``strict`` and the guard stayed held by another process.
    """
    with contextlib.ExitStack() as guarded:
        _guard(guarded, path, strict=strict, notes=notes)
        fd = open_in_place(path)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise LockLost(f"{path}: now {describe_mode(st.st_mode)}, not our lock")
            os.lseek(fd, 0, os.SEEK_SET)
            data = os.read(fd, MAX_LOCK_BYTES + 1)
            info = file_info(st)
            if not ours(data, info):
                raise LockLost(f"{path}: the lock file now belongs to someone else; left in "
                               "place")
            os.ftruncate(fd, 0)
            if sys.platform != "win32":  # Windows: no owner or mode bits to give back
                with contextlib.suppress(OSError):
                    os.fchmod(fd, emptied.mode)
                if (st.st_uid, st.st_gid) != (emptied.uid, emptied.gid):
                    with contextlib.suppress(OSError):  # only root may give a file away
                        os.fchown(fd, emptied.uid, emptied.gid)
            if os.utime in os.supports_fd:
                with contextlib.suppress(OSError):
                    os.utime(fd, ns=(emptied.mtime_ns, emptied.mtime_ns))
        finally:
            os.close(fd)
    return data, info
