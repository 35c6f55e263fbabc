"""Proof that a process holds a kernel lock *now*, and a handle on it that cannot be reused
(docs/engine.md, "Ending a holder"; docs/specs/devtool-locks.md, "The PID can be stale").

``/proc/locks`` names the process that *took* an ``flock`` or OFD lock, not who holds it now;
the proof is the process's own descriptor on the file whose ``/proc/P/fdinfo/<fd>`` lists a
``lock:`` line (:func:`holds_lock`, :func:`lock_holders`). :func:`open_pidfd` gives a pidfd, so a
signal reaches the process checked and never a later owner of its PID;
:func:`own_session_role` says when a process is the caller's own shell or session leader.

Linux only; elsewhere nothing can be proven (:func:`holds_lock` is False, :func:`open_pidfd`
``None``). Nothing here takes, waits for or breaks a lock.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from core.kernel.locks import fd_holders, file_key, locks_on, pid_running
from core.kernel.table import read_table

__all__ = ["describe_lockers", "holds_lock", "lock_holders", "lockers", "open_pidfd",
           "own_session_role"]


def lock_holders(path: str, *, pids: Iterable[int] | None = None,
                 proc: str = "/proc") -> tuple[int, ...]:
    """The processes (of ``pids``, default every process this user may inspect) that hold a
    kernel lock on the file now at ``path`` (``lstat``: a symlink is never followed): each
    has a descriptor on that inode whose fdinfo lists a lock. Sorted, without repeats;
    empty when nobody can be proven (no such file, another user's processes, not Linux).
    Never raises."""
    try:
        st = os.lstat(path)
    except (OSError, ValueError):
        return ()
    return tuple(sorted({h.pid for h in fd_holders(st, pids=pids, proc=proc) if h.locks}))


def holds_lock(path: str, pid: int, *, proc: str = "/proc") -> bool:
    """True when process ``pid`` holds a kernel lock on the file now at ``path``, proven by
    its own descriptor's fdinfo (:func:`lock_holders`). A process that only took the lock
    (the PID ``/proc/locks`` shows) and closed its descriptor, or an unrelated process that
    got that PID since, is not a holder. Never raises."""
    return pid in lock_holders(path, pids=(pid,), proc=proc)


def open_pidfd(pid: int) -> int | None:
    """A pidfd for process ``pid`` (``os.pidfd_open``, Linux >= 5.3): it keeps naming that
    process after its PID is reused, so a signal sent through it
    (``signal.pidfd_send_signal``) reaches it or fails with ``ProcessLookupError``. The caller
    closes it. ``None`` where the platform has no pidfd.

    Raises:
        ProcessLookupError: no process has that PID.
        OSError: the pidfd cannot be opened (descriptor limit...).
    """
    if not sys.platform.startswith("linux") or not hasattr(os, "pidfd_open"):  # Linux >= 5.3
        return None
    try:
        return int(os.pidfd_open(pid))
    except OSError as exc:
        if exc.errno == 38:  # ENOSYS: a kernel before 5.3
            return None
        raise


def own_session_role(pid: int) -> str | None:
    """Why ending ``pid`` would end the caller itself, in words: ``"this process"``, ``"the
    shell or program that started this command"`` (an ancestor of this process) or ``"the
    leader of your login session"`` (``getsid``); ``None`` when it is none of them. Never
    raises."""
    if pid == os.getpid():
        return "this process"
    try:
        import psutil

        if pid in {p.pid for p in psutil.Process().parents()}:
            return "the shell or program that started this command"
    except Exception:  # psutil errors, a platform without parents: not known to be ours
        pass
    if sys.platform == "win32":  # no login sessions (getsid) there
        return None
    try:
        if pid == os.getsid(0):
            return "the leader of your login session"
    except OSError:
        pass
    return None


def lockers(path: str, *, proc: str = "/proc") -> tuple[tuple[int, str | None], ...]:
    """Who holds a kernel lock on the file or *directory* at ``path`` (a directory guard,
    docs/engine.md "Why the guard is a flock on the directory"): ``(PID, user name)`` pairs,
    the user ``None`` when it cannot be read. The PID ``/proc/locks`` shows when that process
    runs; for an flock or OFD lock whose listed PID is dead or ``-1``, the processes whose
    descriptor carries it (fdinfo; only those this user may inspect). ``/proc/locks`` is read
    within the bounds every verdict keeps (:func:`core.kernel.table.read_table`: 16 MiB,
    0.3 s; docs/verdicts.md, "When the kernel's lock table is too large"): when it was cut off
    before naming anyone, the processes whose descriptor on ``path`` carries a lock are named
    instead (fdinfo). Empty when nobody can be named or ``/proc/locks`` cannot be read (not
    Linux). Never raises."""
    try:
        st = os.stat(path)
        table = read_table(os.path.join(proc, "locks"))
    except (OSError, ValueError):
        return ()
    pids: set[int] = set()
    for lock in locks_on(table.text, [file_key(st)]).get(file_key(st), []):
        if lock.pid is not None and pid_running(lock.pid, proc):
            pids.add(lock.pid)
        elif lock.kind.per_description:
            pids.update(h.pid for h in fd_holders(st, proc=proc) if h.locks)
    if not pids and not table.complete:  # a flood of newer locks pushed it out of reach
        pids.update(h.pid for h in fd_holders(st, proc=proc) if h.locks)
    return tuple((pid, _user_of(pid, proc)) for pid in sorted(pids))


def describe_lockers(path: str, *, proc: str = "/proc") -> str:
    """:func:`lockers` in words: ``"PID 4242 (user ann)"``, several joined by ``", "``, or
    ``"a process this user may not inspect"`` when nobody can be named. Never raises."""
    found = lockers(path, proc=proc)
    if not found:
        return "a process this user may not inspect"
    return ", ".join(f"PID {pid} (user {user or '?'})" for pid, user in found)


def _user_of(pid: int, proc: str) -> str | None:
    """The user name of process ``pid`` (the real UID of ``/proc/<pid>/status``, readable
    for every process; its number when no name is known), or ``None``. Never raises."""
    try:
        with open(f"{proc}/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Uid:"):
                    uid = int(line.split()[1])
                    break
            else:
                return None
    except (OSError, ValueError, IndexError):
        return None
    if sys.platform == "win32":  # pragma: no cover - no /proc there: returned above
        return str(uid)
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)
