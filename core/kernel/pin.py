"""The holder's pin: a shared ``flock`` a Lockwarden holder keeps on its own lock file while
it holds the lock, so that a reader on this kernel has a liveness proof that does not depend
on PIDs (a holder in another PID namespace records a PID that means nothing out here).

:func:`hand_down` gives ``lockwarden run``'s command a pin of its own; :func:`keepers` and
:func:`pinned_by` say whether the pin the recorded holder took is still kept, and by whom.

Rules (docs/engine.md, "The holder's pin"): the pin is evidence of life only, its absence
proves nothing, mutual exclusion never depends on it; it is taken ``LOCK_NB`` and never waited
for, on an ``O_CLOEXEC`` descriptor that a ``fork`` child closes at once; only the recorded
holder's pin counts, kept by processes of the file's owner or root (unknown is not alive).
Linux hides from ``/proc/locks`` the pins of processes the reader's PID namespace cannot see.
A pinned Lockwarden lock may be force-released (:func:`core.engine.gate.ask`): removing it
breaks nothing, unlike other kernel-locked files.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import NamedTuple

from core import seam

if sys.platform != "win32":
    import fcntl
else:  # Windows has no flock, so no pin: every use is behind a sys.platform check
    fcntl = None

__all__ = ["Keepers", "Prepin", "available", "hand_down", "keepers", "pin", "pinned_by",
           "unpin"]

_PIN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) \
    | getattr(os, "O_NONBLOCK", 0)
"""How a pin opens the lock file: read-only, never through a symlink, closed at exec (only
``pass_fds`` hands one on), never blocking on what is not a regular file."""

_pins: set[int] = set()
"""The descriptors of this process's pins (a forked child closes them)."""
_pins_lock = threading.Lock()


def _close_after_fork() -> None:
    """In a forked child: close the pins' copies (the parent keeps its pins) and forget them,
    so that a later :func:`unpin` in the child closes nothing (the number may be reused)."""
    global _pins_lock
    _pins_lock = threading.Lock()  # another thread may have held it at the fork
    for fd in list(_pins):
        try:
            os.close(fd)
        except OSError:
            pass
    _pins.clear()


if sys.platform != "win32":  # no fork on Windows
    os.register_at_fork(after_in_child=_close_after_fork)


def pin(path: str, ident: tuple[int, int]) -> int | None:
    """Take the pin on the lock file at ``path`` whose ``(inode, device)`` is ``ident``.

    Returns:
        The descriptor holding the pin (close it with :func:`unpin` after the lock file is
        removed or replaced), or ``None`` when no pin could be taken: the file is gone or is
        another inode now, ``flock`` is refused (NFS without locking, a file system without
        flock), or the platform has no ``flock``. Never raises.
    """
    if sys.platform == "win32":
        return None
    seam.step("lock", path)
    try:
        fd = os.open(path, _PIN_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (st.st_ino, st.st_dev) != tuple(ident):
            os.close(fd)
            return None
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    with _pins_lock:
        _pins.add(fd)
    return fd


def unpin(fd: int | None) -> None:
    """Close a pin's descriptor (the kernel drops the flock); ``None``, or a descriptor that is
    not a pin of this process (a pin inherited over ``fork``, closed then), is ignored. Never
    raises."""
    if fd is None:
        return
    with _pins_lock:
        if fd not in _pins:
            return
        _pins.discard(fd)
    try:
        os.close(fd)
    except OSError:
        pass


class Prepin:
    """The pin taken on a staged lock file *before* it is published, as a context manager:
    the file reaches the lock's path already pinned. A flock-style tool (filelock, flock(1))
    that opens the path the moment our lock replaced its empty file would otherwise take its
    exclusive ``flock`` on our file before our pin, and both would hold (found by the
    interleaving checker's unbounded pass: docs/engine.md, "Every interleaving checked").

    ``path``: the staged file's temp name; ``ident``: its ``(inode, device)``; ``wanted``:
    this process is the lock's recorded holder (else no pin, ``fd`` None). :meth:`take` hands
    the pin over to the holder; leaving the block unpins what was not taken. Never raises.
    """

    def __init__(self, path: str, ident: tuple[int, int], wanted: bool) -> None:
        self.fd = pin(path, ident) if wanted else None

    def take(self) -> int | None:
        """The pin's descriptor, now the caller's to :func:`unpin` (``None``: none taken)."""
        fd, self.fd = self.fd, None
        return fd

    def __enter__(self) -> Prepin:
        return self

    def __exit__(self, *exc: object) -> None:
        unpin(self.take())


def available() -> bool:
    """True where ``flock`` exists (not on Windows): a pin can be taken at all."""
    return sys.platform != "win32"


def hand_down(path: str, token: str) -> int | None:
    """A pin for a command the holder starts (``lockwarden run``): a *new* open file
    description of the lock file at ``path``, checked to hold ``token`` (this acquisition's
    bytes, read through the descriptor), with a shared ``flock`` taken by this process.

    The caller passes it to the command (``subprocess.Popen(pass_fds=...)``) and closes its
    own copy at once: from then on the pin lives exactly as long as some process of the
    command keeps the descriptor -- the command, its children, whatever happens to the holder
    -- and the kernel keeps showing this process's PID as the one that took it
    (docs/engine.md, "The holder's pin"). It is opened ``O_CLOEXEC`` (only ``pass_fds`` hands
    it on) and is *not* one of :func:`pin`'s pins: a fork of the caller does not close it.

    Returns:
        The descriptor, or ``None`` when no pin could be taken: the file is gone or no longer
        carries ``token``, ``flock`` is refused, or the platform has no ``flock``. Never
        raises.
    """
    if sys.platform == "win32" or not token:
        return None
    seam.step("lock", path)
    try:
        fd = os.open(path, _PIN_FLAGS)
    except OSError:
        return None
    try:
        if token.encode("ascii") not in os.pread(fd, MAX_READ, 0):
            os.close(fd)
            return None
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except (OSError, UnicodeEncodeError):
        os.close(fd)
        return None
    return fd


MAX_READ = 64 * 1024
"""Bytes of a lock file read to find a token (the lock formats' limit, docs/DESIGN.md)."""


class Keepers(NamedTuple):
    """Who keeps a lock's pin (:func:`keepers`).

    Attributes:
        pids: the processes that hold it (in this PID namespace), sorted.
        unnamed: a pin taken by the recorded holder is on the lock file itself, but no process
            this reader may inspect carries it (processes of other users when not root): it
            is there, held by someone nobody here can name.
    """

    pids: tuple[int, ...] = ()
    unnamed: bool = False


def keepers(path: str, holder: int, token: str | None, *, exclude: int | None = None,
            proc: str = "/proc") -> Keepers:
    """The processes keeping the pin of the lock at ``path`` whose recorded holder is PID
    ``holder`` and whose acquisition is ``token`` (docs/engine.md, "The holder's pin").

    A kernel lock counts as that holder's pin only when all of this holds:

    - it is an ``flock`` taken by the recorded holder: the PID the kernel shows for it
      (``/proc/locks``; the PID that called ``flock``, shown even after it died) is
      ``holder``, or -- a holder in another PID namespace -- a live process whose PID in its
      own namespace (the last ``NSpid`` of ``/proc/<pid>/status``) is ``holder``, on the
      lock file itself. A neighbour's ``flock -s`` on a readable lock file shows the
      neighbour's PID, so it is never a pin;
    - it is on the lock file at ``path``, or on an earlier file of the same acquisition (one
      a refresh replaced, which ``lockwarden run``'s command still keeps open): a file whose
      content carries ``token``, read through the keeper's descriptor;
    - its keepers run as the lock file's owner or as root.

    ``/proc/locks`` is read within its byte bound and deadline (:mod:`core.kernel.table`);
    when it is cut off, the pin on the lock file itself is still found (through fdinfo), a pin
    on an earlier file of the acquisition or taken in another PID namespace may be missed.
    Keepers are found through ``/proc/<pid>/fd`` and fdinfo (each descriptor's own ``lock:``
    lines, so a lock of another description is never mixed in); ``exclude`` (a PID) is never
    counted: the caller itself (``run`` asking whether anything else keeps it), or the
    process that now has the recorded PID but is not the holder (a reused PID).

    Returns:
        :class:`Keepers`; empty where nothing can be known (no ``/proc/locks``: not Linux, a
        restricted container; the file is gone). Never raises.
    """
    from core.kernel.locks import file_key, key_text, parse_line
    from core.kernel.table import read_table

    try:
        st = os.lstat(path)
        table = read_table(os.path.join(proc, "locks"))
    except (OSError, ValueError):
        return Keepers()
    text = table.text
    here = file_key(st)
    here_text, device = key_text(here), key_text(here).rsplit(":", 1)[0] + ":"
    who = str(holder)
    wanted: dict[tuple[int, int, int], set[int]] = {}  # file -> lockers of its pins
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 8 or parts[1] != "FLOCK":  # "->" (a waiter) or another kind
            continue
        if not (parts[5] == here_text or (parts[4] == who and parts[5].startswith(device))):
            continue
        try:
            lock = parse_line(line)
        except Exception:  # a line of a future kernel: not ours
            continue
        if lock.key is None or lock.pid is None:
            continue
        if lock.pid == holder or (lock.key == here and _own_namespace_pid(lock.pid, proc)
                                  == holder):
            wanted.setdefault(lock.key, set()).add(lock.pid)
    if not table.complete:
        # a table cut off at its bound (core.kernel.table) may hide the pin: look for the
        # holder's flock on the lock file itself in every descriptor's fdinfo instead
        wanted.setdefault(here, set()).add(holder)
    if not wanted:
        return Keepers()
    found, carried = _carriers(wanted, here, token, st.st_uid, exclude, proc)
    unnamed = not found and not carried and any(
        holder in lockers for key, lockers in wanted.items() if key == here)
    return Keepers(tuple(sorted(found)), unnamed)


def _carriers(wanted: dict[tuple[int, int, int], set[int]], here: tuple[int, int, int],
              token: str | None, owner: int, exclude: int | None, proc: str
              ) -> tuple[set[int], bool]:
    """The processes (other than ``exclude``, running as ``owner`` or root) whose
    descriptors carry one of ``wanted``'s pins, on ``here`` or on a file holding ``token``;
    and whether any visible process carries one at all (before those filters)."""
    from core.kernel.locks import LockKind, fdinfo_locks, file_key

    found: set[int] = set()
    carried = False
    holds_token: dict[tuple[int, int, int], bool] = {here: True}
    try:
        pids = [int(n) for n in os.listdir(proc) if n.isdigit()]
    except OSError:
        return found, carried
    for pid in pids:
        base = f"{proc}/{pid}"
        try:
            fds = os.listdir(f"{base}/fd")
        except OSError:
            continue
        for name in fds:
            try:
                key = file_key(os.stat(f"{base}/fd/{name}"))
            except OSError:
                continue
            lockers = wanted.get(key)
            if lockers is None:
                continue
            try:
                with open(f"{base}/fdinfo/{name}", encoding="ascii", errors="replace") as f:
                    info = f.read(1 << 20)
            except OSError:
                continue
            if not any(lk.kind is LockKind.FLOCK and lk.pid in lockers
                       for lk in fdinfo_locks(info)):
                continue
            carried = True
            if pid == exclude or _uid_of(pid) not in (owner, 0):
                continue
            if key not in holds_token:
                holds_token[key] = _carries_token(f"{base}/fd/{name}", token)
            if holds_token[key]:
                found.add(pid)
    return found, carried


def _carries_token(fd_path: str, token: str | None) -> bool:
    """True when the file open at ``fd_path`` (``/proc/<pid>/fd/<n>``: an earlier, unlinked
    file of the lock) holds ``token`` in its first :data:`MAX_READ` bytes. Never raises."""
    if sys.platform == "win32" or not token:  # no /proc (nor pread) on Windows
        return False
    try:
        fd = os.open(fd_path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return False
    try:
        return token.encode("ascii") in os.pread(fd, MAX_READ, 0)
    except (OSError, UnicodeEncodeError):
        return False
    finally:
        os.close(fd)


def _own_namespace_pid(pid: int, proc: str) -> int | None:
    """The PID process ``pid`` has in its own PID namespace (the last ``NSpid`` field of
    ``/proc/<pid>/status``; Linux >= 4.1), or ``None`` when it cannot be read. Never
    raises."""
    try:
        with open(f"{proc}/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    fields = line.split()[1:]
                    return int(fields[-1]) if fields and fields[-1].isdigit() else None
    except OSError:
        return None
    return None


def pinned_by(path: str, holder: int, token: str | None = None, *,
              exclude: int | None = None) -> tuple[bool, int | None]:
    """Whether the lock at ``path``, recorded for PID ``holder`` with acquisition ``token``,
    is kept alive by its holder's pin right now (the rule: :func:`keepers`), and the PID (in
    this PID namespace) of a process keeping it. ``(False, None)`` when it is not, or nothing
    can be known (no ``/proc/locks``).

    Only a keeper proven the holder's counts: a process this reader can inspect, running as
    the lock file's owner or root. A pin nobody here can name (:attr:`Keepers.unnamed`: the
    carriers are processes of another user) is *not* alive: the PID the kernel shows for it
    may be a reused one, and another user who can open the file could keep a dead holder's
    lock alive for ever that way (docs/engine.md, "The holder's pin"). Never raises."""
    found = keepers(path, holder, token, exclude=exclude)
    if found.pids:
        return True, found.pids[0]
    return False, None


def _uid_of(pid: int) -> int | None:
    """The real user ID of process ``pid``, or ``None`` when it cannot be read."""
    if sys.platform == "win32":  # no UIDs there
        return None
    import psutil

    try:
        return int(psutil.Process(pid).uids().real)
    except psutil.Error:  # gone, denied
        return None
