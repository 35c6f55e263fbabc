"""Facts about one :class:`core.record.LockStatus` that the table, the detail pane, the tray
and the confirmations all need: durations in words, whether the holder changed, reasons worded
for now, whether the path is a lock file at all, whether the state needs attention.

Pure functions, no Qt (docs/gui.md "Window", "Tray").
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from core.policy import human_duration as _core_human_duration
from core.reasons import Code, UnreadableKind, advance, texts
from core.record import LockStatus, State

Update = tuple[str, LockStatus | None]
"""One inventory update: (lock path, new status or ``None`` when the lock disappeared)."""


def human_duration(seconds: float) -> str:
    """``seconds`` (float, s; negative counts as 0) in words, whole seconds only, via
    :func:`core.policy.human_duration` ("3m 12s", "2h 0m")."""
    return _core_human_duration(float(int(max(0.0, seconds))))


def holder_changed(old: LockStatus, new: LockStatus) -> bool:
    """True when the lock file now names another acquisition (token, PID or timestamp);
    False when either status has no record."""
    a, b = old.record, new.record
    if a is None or b is None:
        return False
    return (a.token, a.pid, a.acquired_at) != (b.token, b.pid, b.acquired_at)


def status_now(st: LockStatus, now: datetime | None = None) -> LockStatus:
    """``st`` as it reads at ``now`` (aware UTC; default the clock): ticking reason parameters
    moved along the clock (:func:`core.reasons.advance`) and ``checked_at`` set to ``now``
    (never earlier than it was)."""
    at = now or datetime.now(UTC)
    dt = max((at - st.checked_at).total_seconds(), 0.0)
    return replace(st, reasons=advance(st.reasons, dt), checked_at=max(at, st.checked_at))


def current_reasons(st: LockStatus, now: datetime | None = None) -> list[str]:
    """The verdict's reasons in words as they read at ``now`` (aware UTC; default the clock),
    for the detail pane and the confirmations: the watcher does not resend a verdict whose only
    change is a ticking parameter ("held for 3m 12s"), so those parameters are moved along the
    clock here (:func:`core.reasons.advance`) before rendering. Never raises."""
    at = now or datetime.now(UTC)
    return texts(advance(st.reasons, max((at - st.checked_at).total_seconds(), 0.0)))


NOT_FILE_KINDS = frozenset(k for k in UnreadableKind if k.not_a_file)
"""Unreadable kinds that are no regular file (symlink, FIFO, socket, device, directory)."""


def _kind(value: object) -> UnreadableKind | None:
    try:
        return UnreadableKind(str(value))
    except ValueError:
        return None


def not_a_lock_file(st: LockStatus) -> bool:
    """True when the path is a symlink, FIFO, socket, device or directory
    (:func:`core.fsutil.read_lock_file` refused it without opening it): Lockwarden offers
    neither Reclaim nor Force release for what is not a lock file."""
    return st.state is State.UNREADABLE and st.file is None and any(
        r.code is Code.UNREADABLE and _kind(r.get("kind")) in NOT_FILE_KINDS
        for r in st.reasons)


def is_attention(state: State) -> bool:
    """True for the states the tray counts as "stale or expired"."""
    return state in (State.STALE, State.EXPIRED)
