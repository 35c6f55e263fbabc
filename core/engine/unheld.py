"""Removing or replacing a file that tools lock with ``flock``/``lockf``, following their
protocol (docs/DESIGN.md, "Two kinds of locks"; docs/engine.md, "Empty files", "Peers' kernel
locks").

filelock, portalocker, fasteners and ``flock(1)`` lock the **inode** they opened, not the name,
and never remove the file. Their protocols differ in what they do when the file goes:

- filelock (``UnixFileLock``) opens the path (``O_NONBLOCK``), takes ``flock(LOCK_EX|LOCK_NB)``
  and then checks ``fstat().st_nlink``: a file with no name left is not the lock, it tries the
  path again. A file that still has *a* name -- any name, e.g. one a removal moved it to -- is
  the lock for it;
- portalocker and fasteners open the path once and then retry the lock (``flock``; fasteners:
  POSIX ``lockf``) on that descriptor until they get it; ``flock(1)`` blocks on it. None looks
  at the path again.

So a file leaves its lock path only (1) while Lockwarden holds the lock such a tool would take
on it, (2) when no other process has it open -- a waiter of portalocker or fasteners would
otherwise get the lock on a file with no name while another takes the new one: two holders --
and (3) it is **unlinked** before that lock is let go, never kept under another name. Under the
directory guard :func:`holding`:

1. opens the file (``O_RDONLY|O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC``) and checks it is the judged
   file (device, inode; an empty file: still empty);
2. takes its ``flock`` -- exclusive for a foreign file (failing means a process holds it now:
   :class:`core.errors.ReadOnlyLock`, kind ``kernel_lock``); shared for a Lockwarden lock,
   whose holder's pin is a shared ``flock`` (:mod:`core.kernel.pin`): a peer's exclusive
   lock on it then shows as :attr:`Hold.busy`;
3. takes a **write lease** on it (``fcntl(F_SETLEASE, F_WRLCK)``, Linux): granted only while
   no other descriptor of the file is open anywhere, and from then on every ``open`` of it by
   another process is held off and breaks the lease, which :meth:`Hold.disturbed` reads
   (``F_GETLEASE``). Refused because others have it open: a foreign file is refused
   (:class:`core.errors.LockHeld`, naming them), a Lockwarden lock is :attr:`Hold.busy` (its
   release then empties it in place: the inode stays for them). Where leases are not
   available (another user's file, a file system without them) one walk of ``/proc``
   (:func:`core.kernel.openfiles.scan_open_files`) stands in for it, before and after;
4. lets the caller move the file out (rename or exchange) -- only if nobody has tried to open
   it since the lease was granted (:meth:`Hold.opened`, right before the move) -- and ask
   :meth:`Hold.disturbed` after it: a process whose ``open`` was on its way meanwhile (it
   waits on the lease) gets the file put back at the path; otherwise the caller unlinks it,
   and only then is the descriptor closed.

What remains (docs/engine.md gives the figures): an ``open`` in flight in the kernel at the
moment of the move -- the path looked up just before it (an ``open`` with ``O_CREAT`` looks it
up under the directory's lock, which the move waits for) and held up, its process preempted,
before it reaches the lease: it then finds a file with no name left (harmless for filelock,
which checks, not for the others); and, where no lease can be taken, a process that opens the
file between the last walk of ``/proc`` and the move. The check after the move asks the lease
twice: its state (``F_GETLEASE``: an ``open`` waiting on it), and whether it could be taken
again (``F_SETLEASE`` fails while another descriptor exists: an ``open`` past its counts but
not at the lease yet).

Where the file system has no ``flock`` at all (``ENOLCK``,
``ENOTSUP``) nobody can hold one, and step 2 is skipped; on NFS, whose ``flock`` needs a
writable descriptor (``EBADF``), the file is opened for writing (never truncated).
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from core import seam
from core.codes import ReadOnlyKind
from core.errors import LockError, LockHeld, LockLost, ReadOnlyLock
from core.fsutil import MAX_LOCK_BYTES, READ_FLAGS, file_info, pread
from core.record import FileInfo, LockRecord

if sys.platform != "win32":  # Windows has no flock
    import fcntl as _fcntl

__all__ = ["Hold", "hold_while_it_goes", "holding"]

_NO_FLOCK = {errno.ENOLCK, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}
"""``flock`` errors that mean "this file system has no flock": nobody can hold one there."""


LEASE_TRIES = 5
"""Attempts at the write lease while another descriptor of the file is open (a reader that
looks for a moment -- a watcher -- closes it again); 1 ms apart."""

if sys.platform == "linux":  # leases and F_SETSIG: Linux only
    _F_SETLEASE: int | None = _fcntl.F_SETLEASE
    _F_GETLEASE: int | None = _fcntl.F_GETLEASE
    _F_SETSIG: int | None = getattr(_fcntl, "F_SETSIG", None)  # not in every Python build
else:
    _F_SETLEASE = _F_GETLEASE = _F_SETSIG = None
_QUIET_SIGNAL = getattr(signal, "SIGURG", 0)
"""The signal a lease break is delivered as: SIGURG, ignored unless handled (the default,
SIGIO, would end the process)."""


class Hold:
    """The kernel locks Lockwarden holds on a file while it leaves its lock path (see the
    module docstring): a descriptor with the file's ``flock``, and its write lease where one
    was granted.

    Attributes:
        path: the lock path. ``seen``: the file's identity when judged. ``lease``: a write
        lease is held. ``busy``: processes other than the lock's holder that use the file now
        (a Lockwarden lock's hold only; ``-1`` stands for one holding a kernel lock on it):
        removing it would let two of them in.
    """

    def __init__(self, path: str, fd: int, seen: FileInfo, *, lease: bool,
                 busy: tuple[int, ...] = (), keepers: Callable[[], set[int]] | None = None
                 ) -> None:
        self.path = path
        self.fd = fd
        self.seen = seen
        self.lease = lease
        self.busy = busy
        self._keepers = keepers

    def moved(self, where: str) -> tuple[bytes, FileInfo] | None:
        """What was moved to ``where`` when it is the held file (``lstat`` there, ``fstat`` of
        the descriptor: no ``open``, which would break the lease): its bytes, read through the
        descriptor, and identity; else ``None``."""
        try:
            st = os.lstat(where)
        except OSError:
            return None
        own = os.fstat(self.fd)
        if (st.st_dev, st.st_ino) != (own.st_dev, own.st_ino):
            return None
        return pread(self.fd, MAX_LOCK_BYTES + 1, 0), file_info(own)

    def disturbed(self) -> tuple[int, ...]:
        """The processes that opened the file since the hold began (or have it open, where no
        lease was granted): ``(-1,)`` for an ``open`` the lease held off, whose process the
        kernel does not name; ``()`` for none."""
        if (sys.platform == "linux" and self.lease and _F_GETLEASE is not None
                and _F_SETLEASE is not None):
            try:
                if _fcntl.fcntl(self.fd, _F_GETLEASE) != _fcntl.F_WRLCK:
                    return (-1,)
                # set again: refused while another descriptor of the file exists -- an open
                # that found the file before it moved and has not reached the lease yet
                _fcntl.fcntl(self.fd, _F_SETLEASE, _fcntl.F_WRLCK)
            except OSError:
                return (-1,)
            return ()
        return _openers(self.seen, self._keepers)

    def opened(self) -> bool:
        """True when, with a lease held, a process has tried to open the file since the hold
        began: asked right before the file is moved, so that it is moved only while nobody
        is opening it (a move made anyway would have to be undone, exposing the file that
        replaced it for a moment). Always False without a lease (the walk of ``/proc`` made
        when the hold began stands for it)."""
        if sys.platform == "linux" and self.lease and _F_GETLEASE is not None:
            try:
                return bool(_fcntl.fcntl(self.fd, _F_GETLEASE) != _fcntl.F_WRLCK)
            except OSError:
                return True
        return False

    def retake(self) -> bool:
        """After an ``open`` broke the lease (:meth:`opened`, :meth:`disturbed`): give it back
        and take it again at once. True when a lease is held again: the ``open`` was a look
        that gave up (``O_NONBLOCK``: a reader, filelock's try), nothing is open. False when
        another descriptor of the file exists: an ``open`` that waited on the lease -- counted
        from before it waited -- holds it now, or one on its way has come that far."""
        if not self.lease:
            return False
        self.unlease()
        granted = _lease(self.fd)
        self.lease = granted is True
        return self.lease

    def others(self) -> tuple[int, ...]:
        """The other processes that have the file open now (one walk of ``/proc``), less the
        lock holder's pin keepers."""
        return _openers(self.seen, self._keepers)

    def unlease(self) -> None:
        """Give the write lease back (before the descriptor closes, or to let a put-back
        file's openers go on)."""
        if sys.platform == "linux" and self.lease and _F_SETLEASE is not None:
            try:
                _fcntl.fcntl(self.fd, _F_SETLEASE, _fcntl.F_UNLCK)
            except OSError:
                pass
            self.lease = False


def _open_same(path: str, seen: FileInfo, flags: int, *, empty: bool) -> int:
    """``path`` opened with ``flags``, checked to be the judged file (device, inode; an empty
    file: still its judged size).

    Raises:
        LockLost: it is gone, or another file (or content) is there now.
        LockError: it cannot be opened.
    """
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise LockLost(f"{path}: the file is gone") from None
    except BlockingIOError:  # another process's lease holds it off this instant
        raise LockLost(f"{path}: another process is removing it now") from None
    except OSError as exc:
        raise LockError(f"{path}: cannot be opened to lock it before removing it "
                        f"({exc.strerror or exc}); nothing was changed") from None
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != (seen.dev, seen.ino) or (empty and st.st_size != seen.size):
        os.close(fd)
        raise LockLost(f"{path}: the file changed since it was judged; nothing was changed")
    return fd


def _flock(path: str, fd: int, seen: FileInfo, *, shared: bool, empty: bool) -> tuple[int, bool]:
    """Take the file's ``flock`` on ``fd`` (reopening for writing on NFS); returns the
    descriptor now used and whether a process holds a conflicting lock (``BlockingIOError``).

    Raises:
        LockError: ``flock`` failed for another reason.
    """
    if sys.platform != "win32":  # Windows has no flock
        how = (_fcntl.LOCK_SH if shared else _fcntl.LOCK_EX) | _fcntl.LOCK_NB
        try:
            seam.step("lock", path)
            _fcntl.flock(fd, how)
        except BlockingIOError:
            return fd, True
        except OSError as exc:
            if exc.errno == errno.EBADF:  # NFS: a lock needs a writable descriptor
                os.close(fd)
                fd = _open_same(path, seen, READ_FLAGS | os.O_WRONLY, empty=empty)
                try:
                    seam.step("lock", path)
                    _fcntl.flock(fd, how)
                except BlockingIOError:
                    return fd, True
            elif exc.errno not in _NO_FLOCK:
                os.close(fd)
                raise LockError(f"{path}: cannot be locked before removing it "
                                f"({exc.strerror or exc}); nothing was changed") from None
    return fd, False


def _lease(fd: int) -> bool | None:
    """Take a write lease on ``fd``: True when granted, False when another descriptor of the
    file is open (``EAGAIN``), None when leases cannot be had here (another user's file
    without ``CAP_LEASE``, a file system without leases, not Linux)."""
    if sys.platform == "linux" and _F_SETLEASE is not None:
        try:
            if _F_SETSIG is not None and _QUIET_SIGNAL:
                _fcntl.fcntl(fd, _F_SETSIG, _QUIET_SIGNAL)
            _fcntl.fcntl(fd, _F_SETLEASE, _fcntl.F_WRLCK)
        except BlockingIOError:
            return False
        except OSError as exc:
            return False if exc.errno == errno.EAGAIN else None
        return True
    return None


def _openers(seen: FileInfo, keepers: Callable[[], set[int]] | None) -> tuple[int, ...]:
    """The other processes that have the file ``seen`` open (one walk of ``/proc``; ``()``
    where there is none to walk), less the lock holder's pin keepers."""
    from core.kernel.openfiles import scan_open_files

    try:
        index = scan_open_files()
    except OSError:
        return ()
    pids = index.open_by(seen.dev, seen.ino)
    if pids and keepers is not None:
        mine = keepers()
        pids = tuple(p for p in pids if p not in mine)
    return pids


def _named(pids: tuple[int, ...]) -> str:
    """``PID 12 (python3) and 2 more``: the first process named, for a message."""
    real = [p for p in pids if p > 0]
    if not real:
        return "a process"
    from core.verdicts.liveness import process_facts

    facts = process_facts(real[0])
    who = f"PID {real[0]}" + (f" ({facts.name})" if facts is not None else "")
    return who + (f" and {len(real) - 1} more" if len(real) > 1 else "")


@contextmanager
def holding(path: str, seen: FileInfo, *, lockwarden: bool = False,
            keepers: Callable[[], set[int]] | None = None) -> Iterator[Hold]:
    """Hold the file at ``path`` (the one ``seen`` describes) the way its peers would lock it
    while the body moves it out and unlinks it (steps 1-4 of the module docstring). Call it
    under the directory guard.

    ``lockwarden``: the file is a Lockwarden lock -- a shared ``flock``, compatible with its
    holder's pin; peers that use it show as :attr:`Hold.busy` instead of raising. ``keepers``:
    the PIDs keeping that lock's pin (never counted as other users).

    Raises:
        LockLost: the file is gone or changed since it was judged (nothing done).
        ReadOnlyLock: a foreign file a process holds a kernel lock on now (kind
            ``kernel_lock``; nothing done).
        LockHeld: a foreign file another process has open, to write it or to lock it (nothing
            done).
        LockError: it cannot be opened or locked (nothing done).
    """
    empty = seen.size == 0 or not lockwarden
    fd = _open_same(path, seen, READ_FLAGS, empty=empty)
    try:
        fd, conflict = _flock(path, fd, seen, shared=lockwarden, empty=empty)
        if conflict and not lockwarden:
            raise ReadOnlyLock(
                f"{path}: a process holds a kernel lock on it now; deleting it would let a "
                "second holder in, so nothing was changed", kind=ReadOnlyKind.KERNEL_LOCK)
        busy: tuple[int, ...] = (-1,) if conflict else ()
        granted = None if conflict else _lease(fd)
        for _ in range(LEASE_TRIES - 1):
            if granted is not False:
                break
            time.sleep(0.001)
            granted = _lease(fd)
        if granted is not True and not conflict:
            others = _openers(seen, keepers)
            if granted is False and not others:  # it was open for a moment only
                granted = _lease(fd)
                if granted is False and not lockwarden:
                    others = (-1,)  # open by another descriptor of this process
            if others:
                if not lockwarden:
                    raise LockHeld(f"{path}: {_named(others)} has it open, to write it or to "
                                   "lock it; removing it now would let that process lock a "
                                   "file that no longer exists, so nothing was changed")
                busy = others
        hold = Hold(path, fd, seen, lease=granted is True, busy=busy, keepers=keepers)
        try:
            yield hold
        finally:
            hold.unlease()
    finally:
        os.close(fd)


def hold_while_it_goes(stack: contextlib.ExitStack, path: str, data: bytes, info: FileInfo,
                       rec: LockRecord | None, *, own: bool) -> Hold | None:
    """Enter on ``stack`` the hold a file needs while it leaves its lock path
    (:func:`core.engine.unheld.holding`): an empty file -- what flock-style tools lock -- and,
    when its holder releases it (``own``), a lock of Lockwarden's, which such tools may have
    come to lock too (a lock a reclaim or a forced release breaks is not held: a kernel lock on
    it keeps nothing alive, docs/engine.md "The holder's pin"). ``None`` otherwise: another
    tool's lock with content, whose mutual exclusion is the file.

    Raises:
        LockLost, ReadOnlyLock, LockHeld, LockError: as :func:`~core.engine.unheld.holding`.
    """
    if not data.strip() and rec is None:
        return stack.enter_context(holding(path, info))
    if own and rec is not None and rec.written_by_lockwarden:
        return stack.enter_context(holding(path, info, lockwarden=True,
                                           keepers=_pin_keepers(path, rec)))
    return None


def _pin_keepers(path: str, rec: LockRecord) -> Callable[[], set[int]]:
    """The PIDs keeping the pin of the Lockwarden lock ``rec`` at ``path``, looked up when
    asked (:func:`core.kernel.pin.keepers`): they have the file open by design."""
    def keepers() -> set[int]:
        if rec.pid is None:
            return set()
        from core.kernel.pin import keepers as pin_keepers

        return set(pin_keepers(path, rec.pid, rec.token).pids)

    return keepers
