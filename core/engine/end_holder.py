"""Ending the process that holds a kernel lock (docs/specs/devtool-locks.md, "Two kinds"): the
one action Lockwarden offers on a lock only the kernel knows, because deleting its file would not
release it. An explicit, confirmed human decision, always audited (``end_holder``, fsynced).

The holder is the PID the kernel names for the file at the moment of the action
(:attr:`core.record.LockStatus.kernel_pid`, from ``/proc/locks`` and ``/proc/<pid>/fdinfo``),
re-checked right before the signal: its start time must be the one seen -- the one the person
confirmed, when the caller passes it -- so a PID reused by another process is never signalled.

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

from core.engine.operations import holder_summary, record_audit
from core.errors import LockError
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
    """The process the kernel names as the holder of the lock on ``path``, with what a
    person needs to recognise it (name, user, start time, command line:
    :class:`core.verdicts.liveness.ProcessFacts`); ``None`` when no kernel lock names a live
    one. Never raises."""
    pid = inspect(path, policy=policy).kernel_pid
    return process_facts(pid) if pid is not None else None


def end_holder(path: str, *, reason: str | None, policy: StalePolicy | None = None,
               sig: int = signal.SIGTERM, expected_pid: int | None = None,
               expected_start: float | None = None) -> int:
    """Send ``sig`` (default SIGTERM) to the process the kernel names as the holder of the lock
    on ``path``; returns its PID. Audited as ``end_holder`` (holder, PID, process name, user,
    start time, command line, signal, reason), durable.

    Args:
        path: the lock file.
        reason: why, for the audit log.
        policy: the stale policy to judge with.
        sig: the signal (``SIGTERM``; :data:`KILL_SIGNAL` after a second confirmation).
        expected_pid: the PID the user confirmed; when the kernel now names another holder
            (the confirmed one let go and someone else took the lock meanwhile), nothing is
            signalled.
        expected_start: the start time (Unix s) of the process the user confirmed
            (:attr:`ProcessFacts.start`); another process under that PID is never signalled.

    Raises:
        NotKernelHeld: no kernel lock decides the verdict, the kernel names no PID or another
            PID than ``expected_pid``, the PID is this process, init, or no longer the process
            seen or confirmed (reused or gone).
        PermissionError: the process belongs to another user (nothing was signalled).
    """
    status = inspect(path, policy=policy)
    pid = status.kernel_pid
    if not status.kernel_held or pid is None:
        raise NotKernelHeld(f"{path}: no kernel lock names a holder process; nothing to end",
                            status)
    if expected_pid is not None and pid != expected_pid:
        raise NotKernelHeld(f"{path}: the holder is now PID {pid}, not PID {expected_pid} as "
                            "confirmed; nothing was signalled", status)
    if pid in (1, os.getpid()):
        raise NotKernelHeld(f"{path}: the holder is PID {pid}, which Lockwarden never ends",
                            status)
    facts = process_facts(pid)
    if facts is None:
        raise NotKernelHeld(f"{path}: PID {pid} has already exited", status)
    if expected_start is not None and abs(facts.start - expected_start) > _START_TOLERANCE:
        raise NotKernelHeld(f"{path}: PID {pid} is now another process than the one "
                            "confirmed; nothing was signalled", status)
    again = inspect(path, policy=policy)
    now = process_facts(pid)
    if again.kernel_pid != pid or now is None or abs(now.start - facts.start) > _START_TOLERANCE:
        raise NotKernelHeld(f"{path}: the holder changed while it was checked; nothing was "
                            "signalled", again)
    os.kill(pid, sig)
    record_audit(path, "end_holder", details={
        "holder": holder_summary(status), "pid": pid, "process_name": facts.name,
        "process_user": facts.user, "process_start": facts.start,
        "cmdline": list(facts.cmdline), "signal": signal.Signals(sig).name, "reason": reason,
    }, durable=True)
    return pid


def wait_for_exit(pid: int, start: float, timeout: float) -> bool:
    """Wait at most ``timeout`` seconds for process ``pid`` (the one that started at ``start``,
    Unix s) to exit; True once it has (a zombie counts: it exited), False when it still runs.
    Woken by the exit itself through a pidfd where the OS has one (Linux >= 5.3), else by
    psutil's wait. Never raises."""
    import psutil

    facts = process_facts(pid)
    if facts is None or abs(facts.start - start) > _START_TOLERANCE:
        return True  # gone (or the PID is someone else's now)
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is not None:
        try:
            fd = pidfd_open(pid)
        except OSError:
            return True  # no such process any more
        try:
            again = process_facts(pid)  # opened after the check: the pidfd is that process's
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
