"""Ending the process that holds a kernel lock (docs/specs/devtool-locks.md, "Two kinds"): the
one action Lockwarden offers on a lock only the kernel knows, because deleting its file would not
release it. An explicit, confirmed human decision, always audited (``end_holder``, fsynced).

The holder is a process proven to hold the lock *now* (docs/engine.md, "Ending a holder"): its
own descriptor on the file carries the lock (``/proc/<pid>/fdinfo``,
:mod:`core.kernel.proof`). The PID ``/proc/locks`` shows is only the process that *took* it,
which may have handed the descriptor to a child and closed its own, or exited and had its PID
reused. Right before the signal, through a pidfd opened first, the process is re-proven a
holder and the one seen -- the one the person confirmed, when the caller passes its start time
-- so neither a PID reused by another process nor a process that let go is ever signalled.
The caller's own shell or session leader is never signalled unless the person was told.

Gracefully first (docs/gui.md, "End holder process"): :data:`signal.SIGTERM` lets the holder
clean up; :func:`wait_for_exit` waits a bounded time (:data:`TERM_GRACE`) for it to go, woken by
the process's exit itself (a pidfd on Linux); only if it is still there, and only after a second
confirmation, the caller sends ``SIGKILL`` through :func:`end_holder` again. Each signal is one
audit entry.
"""

from __future__ import annotations

import os
import select
import signal
import sys

from core.engine.audited import holder_summary, record_audit
from core.errors import LockError
from core.kernel.proof import holds_lock, lock_holders, open_pidfd, own_session_role
from core.stale_policy import StalePolicy
from core.verdicts.inspect import inspect
from core.verdicts.liveness import ProcessFacts, process_facts

TERM_GRACE = 5.0
"""Seconds the holder is given to exit after ``SIGTERM`` before a person is asked whether to
kill it (``SIGKILL``)."""

KILL_SIGNAL: int = getattr(signal, "SIGKILL", signal.SIGTERM)
"""``SIGKILL`` (``SIGTERM`` where the platform has none)."""

_START_TOLERANCE = 0.01
"""Seconds by which two reads of one process's start time may differ (psutil rounds)."""


class NotKernelHeld(LockError):
    """The path is not held by a kernel lock of a known, live process; nothing was signalled.
    ``status`` is the verdict seen."""

    def __init__(self, message: str, status: object = None) -> None:
        self.status = status
        super().__init__(message)


def holder_process(path: str, *, policy: StalePolicy | None = None) -> ProcessFacts | None:
    """The process proven to hold the kernel lock on ``path`` now, with what a person needs
    to recognise it (name, user, start time, command line:
    :class:`core.verdicts.liveness.ProcessFacts`): the PID the kernel names
    (:attr:`core.record.LockStatus.kernel_pid`) when its own descriptor carries the lock, else
    the lowest PID among the processes whose descriptor does (:func:`holders`). ``None``
    when no kernel lock is held or nobody can be proven to hold it (another user's
    processes). Never raises."""
    pids = holders(path, policy=policy)
    return process_facts(pids[0]) if pids else None


def holders(path: str, *, policy: StalePolicy | None = None) -> tuple[int, ...]:
    """The PIDs proven to hold the kernel lock on ``path`` now (their descriptor's fdinfo
    lists it: :func:`core.kernel.proof.lock_holders`), the one the kernel names first when it
    is one of them. ``/proc/locks`` names the process that *took* the lock, which may have
    closed its descriptor (a child keeps it) or exited (its PID reused): never trusted alone
    (docs/engine.md, "Ending a holder"). Empty when no kernel lock decides the verdict or
    nobody can be proven. Never raises."""
    status = inspect(path, policy=policy)
    if not status.kernel_held:
        return ()
    found = lock_holders(path)
    named = status.kernel_pid
    if named is not None and named in found:
        return (named, *(p for p in found if p != named))
    return found


# Long: one proof-then-signal sequence whose steps must run in this order under one pidfd.
def end_holder(path: str, *, reason: str | None, policy: StalePolicy | None = None,
               sig: int = signal.SIGTERM, expected_pid: int | None = None,
               expected_start: float | None = None, own_session: bool = False) -> int:
    """Send ``sig`` (default SIGTERM) to the process that holds the kernel lock on ``path``
    (:func:`holders`: ``expected_pid`` when given, else the first); returns its PID. Audited
    as ``end_holder`` (holder, PID, process name, user, start time, command line, signal,
    reason), durable.

    The rule (docs/engine.md, "Ending a holder"): a pidfd is opened on the PID first
    (:func:`core.kernel.proof.open_pidfd`); then, last, the process is re-proven the one
    confirmed (its start time) and a holder *now* (its own descriptor's fdinfo lists a lock on
    the file at ``path``); the signal goes through that pidfd, so it reaches that process or
    nobody. Where there is no pidfd (not Linux), the same checks run just before ``kill``.

    Args:
        path: the lock file.
        reason: why, for the audit log.
        policy: the stale policy to judge with.
        sig: the signal (``SIGTERM``; :data:`KILL_SIGNAL` after a second confirmation).
        expected_pid: the PID the user confirmed; when it is not (or no longer) a holder,
            nothing is signalled.
        expected_start: the start time (Unix s) of the process the user confirmed
            (:attr:`ProcessFacts.start`); another process under that PID is never signalled.
        own_session: the person was told that the process is their own shell or session
            leader (:func:`core.kernel.proof.own_session_role`) and confirmed; without it such
            a process is never signalled.

    Raises:
        NotKernelHeld: no kernel lock decides the verdict; nobody or another PID than
            ``expected_pid`` is proven to hold it; the PID is this process, init, the caller's
            own shell or session leader (without ``own_session``), or no longer the process
            seen or confirmed (reused or gone).
        PermissionError: the process belongs to another user (nothing was signalled).
    """
    status = inspect(path, policy=policy)
    if not status.kernel_held:
        raise NotKernelHeld(f"{path}: no kernel lock names a holder process; nothing to end",
                            status)
    found = holders(path, policy=policy)
    if expected_pid is not None:
        if expected_pid not in found:
            raise NotKernelHeld(f"{path}: PID {expected_pid} does not hold its kernel lock now "
                                f"({_named(found)}); nothing was signalled", status)
        pid = expected_pid
    elif found:
        pid = found[0]
    else:
        raise NotKernelHeld(f"{path}: no process can be proven to hold its kernel lock "
                            "(another user's processes cannot be inspected); nothing was "
                            "signalled", status)
    if pid == 1:
        raise NotKernelHeld(f"{path}: the holder is PID 1, which Lockwarden never ends", status)
    role = own_session_role(pid)
    if role == "this process":
        raise NotKernelHeld(f"{path}: the holder is PID {pid}, this process, which Lockwarden "
                            "never ends", status)
    if role is not None and not own_session:
        raise NotKernelHeld(f"{path}: the holder, PID {pid}, is {role}; nothing was "
                            "signalled (confirm on a terminal to end it)", status)
    facts = process_facts(pid)
    if facts is None:
        raise NotKernelHeld(f"{path}: PID {pid} has already exited", status)
    want = facts.start if expected_start is None else expected_start
    pidfd = open_pidfd_or_gone(path, pid, status)
    try:
        now = process_facts(pid)  # after the pidfd: the pidfd is the process checked here
        if now is None or abs(now.start - want) > _START_TOLERANCE:
            raise NotKernelHeld(f"{path}: PID {pid} is now another process than the one "
                                "confirmed; nothing was signalled", status)
        if not holds_lock(path, pid):
            raise NotKernelHeld(f"{path}: PID {pid} let go of the lock while it was checked; "
                                "nothing was signalled", status)
        try:
            if sys.platform.startswith("linux") and pidfd is not None:
                signal.pidfd_send_signal(pidfd, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError:
            raise NotKernelHeld(f"{path}: PID {pid} exited while it was checked; nothing was "
                                "signalled", status) from None
    finally:
        if pidfd is not None:
            os.close(pidfd)
    record_audit(path, "end_holder", details={
        "holder": holder_summary(status), "pid": pid, "process_name": now.name,
        "process_user": now.user, "process_start": now.start,
        "cmdline": list(now.cmdline), "signal": signal.Signals(sig).name, "reason": reason,
        "own_session": role,
    }, durable=True)
    return pid


def _named(pids: tuple[int, ...]) -> str:
    if not pids:
        return "no process can be proven to hold it"
    return "held by PID " + ", ".join(str(p) for p in pids)


def open_pidfd_or_gone(path: str, pid: int, status: object) -> int | None:
    """:func:`core.kernel.proof.open_pidfd`, a vanished process said as :class:`NotKernelHeld`.

    Raises:
        NotKernelHeld: no process has PID ``pid`` any more.
        OSError: the pidfd cannot be opened.
    """
    try:
        return open_pidfd(pid)
    except ProcessLookupError:
        raise NotKernelHeld(f"{path}: PID {pid} has already exited", status) from None


def wait_for_exit(pid: int, start: float, timeout: float) -> bool:
    """Wait at most ``timeout`` seconds for process ``pid`` (the one that started at ``start``,
    Unix s) to exit; True once it has (a zombie counts: it exited), False when it still runs.
    Woken by the exit itself through a pidfd where the OS has one (Linux >= 5.3), else by
    psutil's wait. Never raises."""
    import psutil

    facts = process_facts(pid)
    if facts is None or abs(facts.start - start) > _START_TOLERANCE:
        return True  # gone (or the PID is someone else's now)
    if sys.platform.startswith("linux") and hasattr(os, "pidfd_open"):  # Linux >= 5.3
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            return True  # no such process any more
        except OSError:
            fd = -1  # ENOSYS (a kernel before 5.3), EPERM (seccomp): psutil's wait below
        if fd >= 0:
            try:
                again = process_facts(pid)  # opened after the check: the pidfd is its process's
                if again is None or abs(again.start - start) > _START_TOLERANCE:
                    return True
                poller = select.poll()
                poller.register(fd, select.POLLIN)
                return bool(poller.poll(max(timeout, 0.0) * 1000))
            finally:
                os.close(fd)
    try:
        psutil.Process(pid).wait(timeout=max(timeout, 0.0))
    except psutil.TimeoutExpired:
        return process_facts(pid) is None
    except psutil.Error:
        return True
    return True
