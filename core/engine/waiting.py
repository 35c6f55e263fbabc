"""Waiting for a lock (docs/engine.md): the one-shot :func:`wait` for a path to be
free and the event-driven loop :func:`wait_until` the engine's blocking acquire uses. Events come
from :mod:`core.engine.waiter` (directory events and the holder's exit), with a slow fallback poll.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from core.codes import Code
from core.engine.operations import on_this_host, resolve_policy, state_phrase
from core.errors import LockTimeout
from core.fsutil import refuse_unreadable, validate_lock_path
from core.record import Liveness, LockStatus, State
from core.stale_policy import StalePolicy
from core.verdicts.inspect import inspect

POLL_INTERVAL = 1.0
"""Seconds between re-checks while waiting with directory events (the slow fallback poll)."""

POLL_NO_EVENTS = 0.25
"""Seconds between re-checks while waiting when no directory event source could be set up."""




def wait(
    path: str | os.PathLike[str],
    *,
    timeout: float | None = None,
    stale_after: float | None = None,
    policy: StalePolicy | None = None,
) -> LockStatus:
    """Block until the lock at ``path`` can be taken: it is ``free``, or ``stale`` (a stale
    lock is reclaimed by the next acquire). Returns that verdict. Event-driven like a
    blocking :meth:`core.engine.lock.Lock.acquire` (directory events, the local holder's exit, 1 s
    poll; docs/engine.md, "Waiting is event-driven").

    Args:
        timeout: seconds (None: no limit).
        stale_after: the stale policy's limit for other tools' locks, seconds; replaces
            ``policy.stale_after`` when given.
        policy: the stale policy to judge with (default
            :data:`core.stale_policy.DEFAULT_POLICY`: 3600 s, as in the specs).

    Raises:
        LockTimeout: ``timeout`` passed first (``.status``: the last verdict).
        UnreadableError: the path's directory is missing, or the path is a symlink, FIFO,
            directory or device.
        ValueError: ``stale_after`` is not a finite number of seconds > 0.
    """
    p = validate_lock_path(path)
    judge = resolve_policy(policy, stale_after)
    deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
    status = inspect(p, policy=judge)
    if status.state in (State.FREE, State.STALE):
        return status
    settled: list[LockStatus] = []

    def look() -> LockStatus | None:
        st = inspect(p, policy=judge)
        if st.state in (State.FREE, State.STALE):
            settled.append(st)
            return None
        refuse_unreadable(p, st)
        return st

    wait_until(p, judge, status, deadline, timeout, look)
    return settled[-1]


def local_holder_pid(status: LockStatus) -> int | None:
    """The PID to watch for exit while ``status`` stops us: a live holder on this host -- for a
    lock alive by its holder's pin (reason ``holder_pinned``), the process keeping the pin;
    else the one the lock records, else the process its evidence names (the kernel lock's
    holder, the process that has an empty file open) -- else None (a dead one's exit is past;
    a remote or unknown one cannot be watched)."""
    rec = status.record
    if status.state is State.FREE or status.liveness is not Liveness.ALIVE:
        return None
    if rec is None:
        return status.evidence.pid
    if rec.pid is None:
        return None
    pin = next((r for r in status.reasons if r.code is Code.HOLDER_PINNED), None)
    if pin is not None:
        # alive by its pin (docs/engine.md, "The holder's pin"): the recorded PID is dead or
        # another process; watch the process that keeps the pin (a re-check follows its exit)
        keeper = pin.get("pid")
        return keeper if isinstance(keeper, int) and keeper > 0 else None
    return rec.pid if on_this_host(rec.host) else None


def wait_until(
    path: str,
    policy: StalePolicy,
    status: LockStatus,
    deadline: float | None,
    timeout: float | None,
    attempt: Callable[[], LockStatus | None],
) -> None:
    """Sleep on the lock's directory events and its local holder's exit (no polling loop;
    docs/DESIGN.md "Lock operations", wait), calling ``attempt()`` after each wake-up until it
    returns ``None`` (done); otherwise it returns the verdict that still stops us.

    ``deadline`` is a ``time.monotonic()`` value (``timeout``, seconds, only names it in the
    message).

    Raises:
        LockTimeout: the deadline passed (``.status``: the last verdict).
    """
    # imported on the first wait only: inotify_simple loads ctypes.util (~7 ms), which the
    # CLI's non-waiting verbs must not pay (docs/cli.md, "Start-up time")
    from core.engine.waiter import Waiter

    with Waiter(path) as waiter:
        backoff = 0.005
        watched: int | None = -1
        while True:
            pid = local_holder_pid(status)
            if pid != watched:
                # open the pidfd *before* the next check, so the check that says "alive"
                # and the descriptor refer to the same process
                waiter.watch_holder(pid)
                watched = pid
            else:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise LockTimeout(
                        f"timed out after {timeout:g} s waiting for {status.path}: "
                        f"{state_phrase(status)}", status
                    )
                wake = next_wake(status, policy, waiter.events, remaining)
                if waiter.holder_exited and status.liveness is Liveness.ALIVE:
                    # the holder exited but is still judged alive (not yet reaped):
                    # re-check soon, backing off
                    wake = min(wake, backoff) if wake is not None else backoff
                    backoff = min(backoff * 2, 0.5)
                waiter.wait(wake)
            after = attempt()
            if after is None:
                return
            status = after


def next_wake(
    status: LockStatus, policy: StalePolicy, events: bool, remaining: float | None
) -> float | None:
    """Seconds until the next re-check: the slow poll (:data:`POLL_INTERVAL`, or
    :data:`POLL_NO_EVENTS` without directory events), the moment a TTL expires or
    ``stale_after`` passes, the end of the writing grace, or the caller's timeout."""
    wake = POLL_INTERVAL if events else POLL_NO_EVENTS
    now = time.time()
    rec = status.record
    bounds: list[float] = []
    if rec is not None:
        expiry = rec.effective_expiry()
        if expiry is not None:
            bounds.append(expiry.timestamp() - now)
        if rec.acquired_at is not None:
            bounds.append(rec.acquired_at.timestamp() + policy.stale_after - now)
    if status.state is State.WRITING and status.file is not None:
        bounds.append(status.file.mtime_ns / 1e9 + policy.writing_grace - now)
    for b in bounds:
        if b > 0:
            wake = min(wake, b + 0.002)
    if remaining is not None:
        wake = min(wake, max(remaining, 0.0))
    return wake


