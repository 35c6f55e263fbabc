"""The history's vocabulary: one observed transition of one lock (:class:`Transition`), how a
verdict becomes one (:func:`observation_of`), what the change was (:func:`event_between`), and
why history may be paused (:class:`HistoryUnavailable`).

Rules (docs/history.md, "What is recorded"): a transition is a change of a lock's *state* or of
its *holder* (PID, holder name, host, token, acquisition time). A lock refreshed by its holder,
ages growing and reason parameters ticking are not transitions; ``writing`` (a file still
being written, at most 2 s; docs/DESIGN.md "Liveness and verdicts") is not one either.
Times are Unix seconds, UTC.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from core.record import LockStatus

# the values of core.record.State, as plain strings: reading history never imports the
# verdicts' vocabulary (docs/cli.md, "Start-up time"); tests/core/history/test_history_model.py
# checks them
FREE, HELD, STALE, EXPIRED, WRITING, UNREADABLE = (
    "free", "held", "stale", "expired", "writing", "unreadable")

SKIPPED_STATES = frozenset({WRITING})
"""States never recorded: a lock being written becomes ``held`` within the 2 s grace."""

EVENTS = ("acquired", "holder_changed", "stale", "expired", "reclaimed", "renewed", "released",
          "cleared", "force_released", "unreadable", "vanished", "seen")
"""What a transition was (docs/history.md, "Events"):

- ``acquired``: a lock appeared where there was none;
- ``holder_changed``: a held lock has another holder (without a stale or expired step);
- ``stale`` / ``expired``: the verdict turned stale or expired, same holder;
- ``reclaimed``: a stale or expired lock was replaced by another holder's;
- ``renewed``: an expired lock is held again by the same holder (refreshed);
- ``released``: a held lock went away; ``cleared``: a stale or expired lock went away;
- ``force_released``: a held lock went away and the audit log says Lockwarden forced it;
- ``unreadable``: the file cannot be read or parsed;
- ``vanished``: a lock recorded as present was gone when a recorder started (it went away
  while nothing recorded; the time is when that was noticed);
- ``seen``: any other change of state (e.g. stale back to held after a clock step).
"""

ACTION_OPERATIONS: dict[str, frozenset[str]] = {
    "acquired": frozenset({"acquire"}),
    "released": frozenset({"release", "force_release"}),
    "cleared": frozenset({"release", "force_release"}),
    "reclaimed": frozenset({"reclaim"}),
    "holder_changed": frozenset({"reclaim", "acquire"}),
    "renewed": frozenset({"refresh"}),
}
"""The one mapping between Lockwarden's actions and history events (docs/history.md,
"Events"): the events an action of Lockwarden's may cause, and the audit operations
(docs/audit.md) that can cause each -- for these the audit log is asked, wherever the entry
went (:func:`core.audit.logs_for`: the lock's directory, or this user's own log for a lock
in a git repository); :func:`action_event` says what the action makes of the event."""

ACTION_EVENTS = frozenset(ACTION_OPERATIONS)


def action_event(event: str, operation: str) -> str:
    """The event of a transition whose cause is Lockwarden's audited ``operation``: a held
    lock a ``force_release`` removed is ``force_released`` (else ``released``), wherever the
    lock lives; any other event stays as the states say."""
    if operation == "force_release" and event == "released":
        return "force_released"
    return event


HELD_STATES = frozenset({HELD})
DEAD_STATES = frozenset({STALE, EXPIRED})


class HistoryUnavailable(Exception):
    """History cannot be written or read: the data directory is read-only, the disk is full,
    the database is corrupt or was written by a newer Lockwarden. ``reason`` says which in
    plain words (shown by the app's status line and the CLI); the monitor keeps running."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Observation(NamedTuple):
    """What a recorder saw of one lock at one moment (before it is compared with the last
    recorded transition).

    Attributes:
        lock: the lock path (absolute) or server URL.
        t: when it was seen, Unix seconds (UTC).
        state: :class:`core.record.State` value (``"free"`` when the lock is gone).
        holder, pid, process, host, tag: the holder as the lock file and the process table
            name it (``None`` when unknown); ``process`` is the process name seen for ``pid``.
        reasons: the verdict's reason codes (strings, in the verdict's order).
        ident: the holder's identity digest: two observations with equal ``state`` and
            ``ident`` are the same as far as history goes (:func:`observation_of`).
        event: the event to record, when the observer knows better than
            :func:`event_between` (``vanished``); ``None``: derived.
    """

    lock: str
    t: float
    state: str
    holder: str | None = None
    pid: int | None = None
    process: str | None = None
    host: str | None = None
    tag: str | None = None
    reasons: tuple[str, ...] = ()
    ident: str = ""
    event: str | None = None


class Transition(NamedTuple):
    """One recorded row (docs/history.md, "What is recorded").

    Attributes:
        id: the row id (increasing with insertion).
        lock: lock path or server URL.
        t: Unix seconds (UTC) when the transition was seen.
        state, holder, pid, process, host, tag, reasons: as :class:`Observation`.
        event: one of :data:`EVENTS`.
        audit_id: the SHA-256 digest of the audit entry of Lockwarden's own action that
            caused the transition (the ``prev`` value the next audit line carries), or ``None``.
    """

    id: int
    lock: str
    t: float
    state: str
    event: str
    holder: str | None = None
    pid: int | None = None
    process: str | None = None
    host: str | None = None
    tag: str | None = None
    reasons: tuple[str, ...] = ()
    audit_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: ``time`` (RFC 3339 UTC, ms), ``t`` (Unix s), ``lock``, ``state``,
        ``event``, ``holder``, ``pid``, ``process``, ``host``, ``tag``, ``reasons`` (codes),
        ``audit_id``."""
        return {"time": iso(self.t), "t": round(self.t, 3), "lock": self.lock,
                "state": self.state, "event": self.event, "holder": self.holder,
                "pid": self.pid, "process": self.process, "host": self.host, "tag": self.tag,
                "reasons": list(self.reasons), "audit_id": self.audit_id}


def iso(t: float) -> str:
    """Unix seconds as RFC 3339 UTC with milliseconds: ``2026-11-26T00:11:13.250Z``."""
    import datetime as _dt

    stamp = _dt.datetime.fromtimestamp(t, _dt.UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def _digest(parts: list[Any]) -> str:
    """A 128-bit BLAKE2b digest (hex) of ``parts``, each as ``repr`` (so ``None`` and ``"None"``
    differ), unit-separated: the same in every process (not Python's salted ``hash``)."""
    import hashlib

    text = "\x1f".join(map(repr, parts))
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()


def observation_of(status: LockStatus, t: float) -> Observation:
    """The :class:`Observation` of a verdict seen at ``t`` (Unix s, UTC).

    The holder is the lock record's (holder name, PID, host, tag); a lock only the kernel
    holds (flock, POSIX) names the PID the kernel gives (:attr:`LockStatus.kernel_pid`). The
    identity digest covers the state's holder: PID, holder, host, token and acquisition time
    (not the file's mtime, which a refresh changes)."""
    rec = status.record
    pid = rec.pid if rec is not None and rec.pid is not None else status.kernel_pid
    acquired = rec.acquired_at.isoformat() if rec is not None and rec.acquired_at else None
    token = rec.token if rec is not None else None
    holder = rec.holder if rec is not None else None
    host = rec.host if rec is not None else None
    process = status.evidence.process_name if status.evidence.pid == pid else None
    state = status.state.value
    ident = _digest([state, pid, holder, host, token, acquired]) if status.present else ""
    return Observation(
        lock=status.path, t=t, state=state if status.present else FREE,
        holder=holder, pid=pid, process=process, host=host,
        tag=rec.tag if rec is not None else None,
        reasons=tuple(r.code.value for r in status.reasons), ident=ident)


def gone(lock: str, t: float, *, event: str | None = None) -> Observation:
    """The observation of a lock that is no longer there (``free``); ``event``: as
    :attr:`Observation.event`."""
    return Observation(lock=lock, t=t, state=FREE, event=event)


def holder_key(state: str, ident: str) -> str:
    """What makes two consecutive observations the same: the state and the holder's
    identity (for ``free``: nothing more)."""
    return state if state == FREE else f"{state}:{ident}"


def chain_key(prev_chain: str, key: str) -> str:
    """The row's place in its lock's sequence: a digest of the previous row's chain key and
    this row's :func:`holder_key`. Two recorders that see the same sequence compute the same
    keys, so the store's ``UNIQUE (lock, chain)`` keeps each transition once."""
    return _digest([prev_chain, key])


def event_between(prev_state: str | None, prev_ident: str | None, obs: Observation,
                  *, forced: bool = False) -> str:
    """What happened between the last recorded row (``prev_state``/``prev_ident``, ``None``
    when there is none) and ``obs`` (one of :data:`EVENTS`); ``forced``: the audit log holds
    a ``force_release`` of this lock."""
    new = obs.state
    if new == UNREADABLE:
        return "unreadable"
    if new == FREE:
        if prev_state in DEAD_STATES:
            return "cleared"
        return "force_released" if forced else "released"
    if new in DEAD_STATES:
        return new
    if new in HELD_STATES:
        if prev_state is None or prev_state in (FREE, UNREADABLE):
            return "acquired"
        if prev_state in DEAD_STATES:
            return "renewed" if prev_ident == obs.ident else "reclaimed"
        if prev_state in HELD_STATES:
            return "holder_changed"
    return "seen"
