"""The holder's pin: a shared ``flock`` a Lockwarden holder keeps on its own lock file while
it holds the lock, so that a reader on this kernel has a liveness proof that does not
depend on PIDs (``docs/specs/devtool-locks.md`` §2.6 "Kernel-held locks": a kernel lock
disappears when its holder's last descriptor closes; ``docs/engine.md``, "The holder's pin").

Why: a holder in another PID namespace (a container sharing the lock directory) records a PID
that means another process -- or none -- out here, and a PID check alone would judge its live
lock stale (``pid_reused``/``holder_dead``) and let a reclaim break it. The kernel shows the
pin in ``/proc/locks`` whatever namespace took it, and drops it when the holder dies -- to a
reader whose PID namespace sees the holder (the same one, or an ancestor: the host). Linux
hides from ``/proc/locks`` the locks of processes the reader's PID namespace cannot see, so a
reader *inside* a container does not see the pin of a holder outside it (the host, another
container) and still judges that lock by its PID alone.

Rules:

- The pin is **evidence of life only**. Its absence proves nothing: a lock taken from the
  shell (``lockwarden try``) records the shell's PID and the CLI process that pinned it exits
  at once; a refresh replaces the file and pins the new one a moment later; other systems have
  no ``/proc/locks`` to show it.
- It is a *shared* lock taken with ``LOCK_NB`` and never waited for, on a descriptor opened
  ``O_RDONLY | O_NOFOLLOW | O_CLOEXEC`` (so commands the holder starts never inherit it) and
  checked to be the very inode the engine published. A child made by ``fork`` without
  ``exec`` (multiprocessing's fork) closes its copies at once (``os.register_at_fork``): the
  flock belongs to the open file description, so a child keeping a copy would keep the pin --
  and a dead holder's lock would look alive -- for as long as the child lives.
- Mutual exclusion never depends on it: the lock is still the file (link/``O_EXCL``,
  docs/engine.md). Removing a pinned file (a force release) breaks nothing, so unlike other
  kernel-locked files a pinned Lockwarden lock may be force-released
  (:func:`core.engine.operations.refuse_not_a_lock`).
- Only a lock whose recorded holder is this process is pinned (a lock taken for another PID
  is not: the pin would outlive or predecease that holder).
"""

from __future__ import annotations

import os
import threading

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock, no pin
    fcntl = None  # type: ignore[assignment]

__all__ = ["pin", "pinned_by", "unpin"]

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


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_after_fork)


def pin(path: str, ident: tuple[int, int]) -> int | None:
    """Take the pin on the lock file at ``path`` whose ``(inode, device)`` is ``ident``.

    Returns:
        The descriptor holding the pin (close it with :func:`unpin` after the lock file is
        removed or replaced), or ``None`` when no pin could be taken: the file is gone or is
        another inode now, ``flock`` is refused (NFS without locking, a file system without
        flock), or the platform has no ``flock``. Never raises.
    """
    if fcntl is None:
        return None
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) \
        | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
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


def pinned_by(path: str) -> tuple[bool, int | None]:
    """Whether a kernel lock is held on the file at ``path`` right now by its owner, and the
    PID the kernel names for it in this PID namespace (``None`` when it names none: another
    namespace, or a holder this user may not see) -- ``(False, None)`` when none is, or
    nothing can be known (no ``/proc/locks``: :func:`core.kernel.locks.kernel_holders`).

    A lock whose named holders all run as another user than the file's owner is not the pin:
    a reader of a shared directory could otherwise ``flock -s`` a dead holder's lock file and
    keep it "alive" for ever. Root's processes count (root may hold anyone's lock). Never
    raises."""
    from core.kernel.locks import kernel_holders

    try:
        held = kernel_holders([path]).get(path)
        owner = os.lstat(path).st_uid
    except Exception:  # no /proc/locks here, or the file went: nothing known, so no proof
        return False, None
    if not held:
        return False, None
    named = [p for h in held for p in h.pids]
    if not named:
        return True, None  # nobody this namespace can see: the holder's own namespace
    for pid in named:
        uid = _uid_of(pid)
        if uid is None or uid in (owner, 0):
            return True, pid
    return False, None


def _uid_of(pid: int) -> int | None:
    """The real user ID of process ``pid``, or ``None`` when it cannot be read."""
    import psutil

    try:
        return int(psutil.Process(pid).uids().real)
    except (psutil.Error, AttributeError):  # gone, denied; no uids() on Windows
        return None
