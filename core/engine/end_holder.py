"""Ending the process that holds a kernel lock (docs/specs/devtool-locks.md, "Two kinds"): the
one action Lockwarden offers on a lock only the kernel knows, because deleting its file would not
release it. An explicit, confirmed human decision, always audited (``end_holder``, fsynced).

The holder is the PID the kernel names for the file at the moment of the action
(:attr:`core.record.LockStatus.kernel_pid`, from ``/proc/locks`` and ``/proc/<pid>/fdinfo``),
re-checked right before the signal: its start time must be the one seen, so a PID reused by
another process is never signalled. SIGTERM first (the holder may clean up); the caller decides
whether to escalate.
"""

from __future__ import annotations

import os
import signal

from core.engine.operations import holder_summary, record_audit
from core.errors import LockError
from core.stale_policy import StalePolicy
from core.verdicts.inspect import inspect


class NotKernelHeld(LockError):
    """The path is not held by a kernel lock of a known, live process; nothing was signalled.
    ``status`` is the verdict seen."""

    def __init__(self, message: str, status: object = None) -> None:
        self.status = status
        super().__init__(message)


def end_holder(path: str, *, reason: str | None, policy: StalePolicy | None = None,
               sig: int = signal.SIGTERM, expected_pid: int | None = None) -> int:
    """Send ``sig`` (default SIGTERM) to the process the kernel names as the holder of the lock
    on ``path``; returns its PID. Audited as ``end_holder`` (holder, PID, process start,
    reason), durable.

    ``expected_pid``: the PID the user confirmed; when the kernel now names another holder
    (the confirmed one let go and someone else took the lock meanwhile), nothing is signalled.

    Raises:
        NotKernelHeld: no kernel lock decides the verdict, the kernel names no PID or another
            PID than ``expected_pid``, the PID is this process, init, or no longer the process
            seen (reused or gone).
        PermissionError: the process belongs to another user (nothing was signalled).
    """
    import psutil

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
    try:
        proc = psutil.Process(pid)
        start, name = proc.create_time(), proc.name()
    except psutil.NoSuchProcess:
        raise NotKernelHeld(f"{path}: PID {pid} has already exited", status) from None
    again = inspect(path, policy=policy)
    try:
        same = again.kernel_pid == pid and psutil.Process(pid).create_time() == start
    except psutil.NoSuchProcess:
        same = False
    if not same:
        raise NotKernelHeld(f"{path}: the holder changed while it was checked; nothing was "
                            "signalled", again)
    os.kill(pid, sig)
    record_audit(path, "end_holder", details={
        "holder": holder_summary(status), "pid": pid, "process_name": name,
        "process_start": start, "signal": signal.Signals(sig).name, "reason": reason,
    }, durable=True)
    return pid
