"""The stale policy: from what a lock file says and whether its holder lives, to a verdict
(DESIGN.md, "Liveness and verdicts"; Task MCP's reclaim matrix from
``specs/004_6119ce42cf21683e.txt``, "Stale Lock Reclaim Algorithm").

Only imports :mod:`core.record`, so the CLI's ``status`` path stays cheap.
"""

from __future__ import annotations

import getpass
import math
from dataclasses import dataclass
from datetime import UTC, datetime

from core.record import FileInfo, Liveness, LockRecord, LockStatus, State

DEFAULT_STALE_AFTER = 3600.0
"""Seconds after which a lock whose holder is not alive is stale (the specs' default:
``specs/000_f378b7650aba3ec0.txt``, "Stale Detection")."""

DEFAULT_WRITING_GRACE = 2.0
"""Seconds an empty or partial lock file is given to be completed by its writer."""


@dataclass(frozen=True, slots=True)
class StalePolicy:
    """How verdicts are made, per watched directory (DESIGN.md, "Default stale policy").

    Attributes:
        stale_after: seconds; a lock of another tool whose holder is not alive becomes stale
            when older than this (default 3600 s, as in the specs). Also the age at which an
            empty lock file (a writer that crashed between create and write) becomes stale.
        writing_grace: seconds an empty or partial file is shown as ``writing``.
        allow_higher_privilege: Task MCP's HIGHER_PRIVILEGE reclaim (environment ``ci`` >
            ``cloud`` > ``local``). Off by default: the environment is self-declared.
        allow_emergency: Task MCP's EMERGENCY_OVERRIDE reclaim (purpose ``emergency``). Off by
            default: the purpose is self-declared.
    """

    stale_after: float = DEFAULT_STALE_AFTER
    writing_grace: float = DEFAULT_WRITING_GRACE
    allow_higher_privilege: bool = False
    allow_emergency: bool = False


def human_duration(seconds: float) -> str:
    """A duration in seconds as short text: ``0.4s``, ``45s``, ``3m 12s``, ``2h 0m``,
    ``3d 4h``. Negative durations get a leading ``-``; non-finite ones are ``"forever"``."""
    if math.isnan(seconds) or math.isinf(seconds):
        return "forever"
    if seconds < 0:
        return "-" + human_duration(-seconds)
    if seconds < 10:
        text = f"{seconds:.1f}".rstrip("0").rstrip(".")
        return f"{text}s"
    total = int(seconds)
    if total < 60:
        return f"{total}s"
    if total < 3600:
        return f"{total // 60}m {total % 60}s"
    if total < 86400:
        return f"{total // 3600}h {total % 3600 // 60}m"
    return f"{total // 86400}d {total % 86400 // 3600}h"


def _fmt_time(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def judge(
    path: str,
    record: LockRecord | None,
    *,
    file: FileInfo | None,
    liveness: Liveness,
    liveness_reasons: list[str],
    policy: StalePolicy,
    now: datetime,
    mtime: float | None = None,
    error: str | None = None,
    empty_or_partial: bool = False,
    empty: bool | None = None,
) -> LockStatus:
    """The verdict on one lock (DESIGN.md, "Liveness and verdicts", default stale policy).

    Args:
        path: the lock path (``"<proof>/ledger#<node>"`` for af claims replayed from a ledger).
        record: the parsed lock, or ``None`` (no file, unreadable, empty or unparsable).
        file: identity of the judged file, or ``None``.
        liveness, liveness_reasons: from :func:`core.liveness.check` (``UNKNOWN``/``[]``
            when there is no record).
        policy: the directory's :class:`StalePolicy`.
        now: the moment of the verdict (aware; UTC).
        mtime: the file's modification time (Unix s); default ``file.mtime_ns``.
        error: the reason the file could not be read, or (with ``empty_or_partial``) parsed.
        empty_or_partial: the bytes were empty or did not parse.
        empty: the bytes were empty (or only whitespace); default ``file.size == 0``.

    Rules, in order:
        - ``empty_or_partial``: younger than ``writing_grace`` (by mtime) -> ``writing``;
          empty and older than ``stale_after`` -> ``stale`` (sema creates the file, then writes
          it: a crash in between leaves an empty file forever, DESIGN.md "Defects"); else
          ``unreadable`` with the parse reason (garbage is never stale: never deleted).
        - ``error`` -> ``unreadable``. No record -> ``free``.
        - Past the TTL/``expires_at``: holder dead/reused -> ``stale``; otherwise ``expired``
          (af claims are never stale: af reaps them itself, specs/003 "Stale Lock Cleanup").
        - A lock written by Lockwarden (``token`` and ``host``) whose holder is dead/reused ->
          ``stale`` at once; so is a ``task-mcp`` lock (its owner is a long-running server).
        - A lock with a TTL not yet passed -> ``held`` (the lease stands).
        - Another tool's lock: ``stale`` only when the holder is not alive **and** the lock is
          older than ``stale_after`` (sema and semats record the PID of their short-lived CLI
          process). Age from ``acquired_at``, else the file's mtime.
        - Otherwise ``held``.

    Returns a :class:`LockStatus` whose ``reasons`` say why, in plain words. Never raises.
    """
    if mtime is None and file is not None:
        mtime = file.mtime_ns / 1e9
    if empty_or_partial:
        return _judge_unparsed(path, file, policy, now, mtime, error, empty)
    if error is not None:
        return LockStatus(
            path,
            State.UNREADABLE,
            reasons=[error],
            error=error,
            record=record,
            checked_at=now,
            file=file,
            stale_after=policy.stale_after,
        )
    if record is None:
        return LockStatus(
            path,
            State.FREE,
            reasons=["no lock file"],
            checked_at=now,
            file=file,
            stale_after=policy.stale_after,
        )

    reasons = list(liveness_reasons)
    read_only = record.format == "af-claim" and "#" in (path or record.path)
    dead = liveness in (Liveness.DEAD, Liveness.REUSED)
    alive = liveness is Liveness.ALIVE
    now_ts = now.timestamp()
    age: float | None = None
    if record.acquired_at is not None:
        age = now_ts - record.acquired_at.timestamp()
    elif mtime is not None:
        age = now_ts - mtime

    def status(state: State, *more: str) -> LockStatus:
        return LockStatus(
            path,
            state,
            liveness=liveness,
            reasons=reasons + list(more),
            record=record,
            read_only=read_only,
            checked_at=now,
            file=file,
            stale_after=policy.stale_after,
        )

    expiry = _expiry(record)
    if expiry is not None:
        left = (expiry - now).total_seconds()
        lease = (
            f"TTL {human_duration(record.ttl)}"
            if record.ttl is not None and record.format != "af-claim"
            else f"at {_fmt_time(expiry)}"
        )
        if left < 0:
            expired = f"expired {human_duration(-left)} ago ({lease})"
            if record.format == "af-claim":
                return status(State.EXPIRED, expired, "af keeps an expired claim until af reaps it")
            if dead:
                return status(State.STALE, expired, "its holder is dead, so the lock is stale")
            if liveness in (Liveness.REMOTE, Liveness.UNKNOWN):
                # DESIGN.md "Liveness and verdicts": stale when "age/TTL [is] past the policy
                # where liveness cannot be known"; only a holder seen alive keeps it "expired".
                why = (
                    "its holder is on another host"
                    if liveness is Liveness.REMOTE
                    else "its holder cannot be checked"
                )
                return status(State.STALE, expired, f"{why}, so the lapsed lease makes it stale")
            return status(State.EXPIRED, expired)
        if dead and record.written_by_lockwarden and record.format != "af-claim":
            # another tool's lease stands until it lapses (DESIGN.md: TTL formats are stale
            # "when expired and not alive"); ours carries proof (token, start) of its holder
            return status(
                State.STALE,
                "its holder is proven dead on this host, so the lock is stale "
                f"(its lease would have expired in {human_duration(left)})",
            )
        return status(State.HELD, *_held_for(age), f"expires in {human_duration(left)}")

    if record.format == "af-claim":  # specs/003 "Stale Lock Cleanup": only af reaps claims
        return status(State.HELD, *_held_for(age), "af claims are reaped by af itself")
    if dead and record.written_by_lockwarden:
        return status(
            State.STALE, "a lock written by Lockwarden is stale as soon as its holder is dead"
        )
    limit = human_duration(policy.stale_after)
    if age is None:
        return status(State.HELD, "its age is unknown, so it cannot be judged stale")
    if not alive and age > policy.stale_after:
        return status(
            State.STALE, f"lock is {human_duration(age)} old, older than the {limit} stale limit"
        )
    if dead:
        return status(
            State.HELD,
            f"lock is {human_duration(age)} old; another tool's lock becomes stale only after "
            f"{limit} (its PID may be that of a short-lived CLI process)",
        )
    if not alive:
        return status(
            State.HELD,
            f"lock is {human_duration(age)} old; a lock whose holder cannot be checked becomes "
            f"stale after {limit}",
        )
    return status(State.HELD, *_held_for(age))


def _expiry(record: LockRecord) -> datetime | None:
    """``record.effective_expiry()``, or ``None`` when it lies beyond ``datetime``'s range
    (a TTL of centuries: never expires in practice)."""
    try:
        return record.effective_expiry()
    except (OverflowError, ValueError):
        return None


def _held_for(age: float | None) -> list[str]:
    if age is None:
        return []
    if age < 0:
        return [f"taken {human_duration(-age)} in the future (clock skew?)"]
    return [f"held for {human_duration(age)}"]


def _judge_unparsed(
    path: str,
    file: FileInfo | None,
    policy: StalePolicy,
    now: datetime,
    mtime: float | None,
    error: str | None,
    empty: bool | None,
) -> LockStatus:
    def status(state: State, reason_text: str, err: str) -> LockStatus:
        return LockStatus(
            path,
            state,
            reasons=[reason_text],
            error=err,
            checked_at=now,
            file=file,
            stale_after=policy.stale_after,
        )

    if empty is None:
        empty = (file.size == 0) if file is not None else error is None
    what = "file is empty" if empty else "file is incomplete"
    reason = error or ("the file is empty" if empty else "the file could not be parsed")
    age = now.timestamp() - mtime if mtime is not None else None
    if age is not None and -policy.writing_grace <= age < policy.writing_grace:
        return status(
            State.WRITING,
            f"{what}, written {human_duration(max(age, 0.0))} ago: "
            "its writer is probably still writing",
            reason,
        )
    if empty and age is not None and age > policy.stale_after:
        return status(
            State.STALE,
            f"empty lock file {human_duration(age)} old: its writer crashed before writing it",
            reason,
        )
    return status(State.UNREADABLE, reason, reason)


PRIVILEGE_ORDER: tuple[str, ...] = ("ci", "cloud", "local")
"""Task MCP's environment privilege order, highest first (spec 004, ``hasHigherPrivilege``)."""


def taskmcp_decision(
    status: LockStatus,
    *,
    requester_user: str | None = None,
    requester_environment: str | None = None,
    requester_purpose: str | None = None,
    policy: StalePolicy,
) -> tuple[bool, str, str]:
    """Task MCP's reclaim decision for a ``task-mcp`` lock: ``(can_reclaim, reason, priority)``.

    Follows the decision matrix of ``specs/004_6119ce42cf21683e.txt``, "Stale Lock Reclaim
    Algorithm" (``canReclaimLock``), in its order:

    1. ``LOCK_EXPIRED`` (priority ``high``): the TTL passed (``status`` is ``expired``, or
       ``stale`` past its expiry).
       Lockwarden's addition, ``HOLDER_DEAD`` (``high``): the verdict is ``stale`` before the
       TTL passed, i.e. the holder is proven dead on this host (an ``owner`` ``pid-N@host`` or
       ``metadata.process_id`` naming a process that exited or whose PID was reused). A lock
       whose holder is dead protects nothing, so it is reclaimable; the reason says why.
    2. ``SAME_USER`` (``medium``): the lock's ``metadata.user_identity`` equals the requester's
       user. The requester is the **real OS user of this process** (``getpass.getuser()``),
       never a value a requester claims; ``requester_user`` exists for tests and documentation
       only.
    3. ``HIGHER_PRIVILEGE`` (``medium``): the requester's environment ranks above the lock's
       (``ci`` > ``cloud`` > ``local``; unknown environments rank nowhere). Only when
       ``policy.allow_higher_privilege``: the environments are self-declared, so anyone could
       claim ``ci``; off by default.
    4. ``EMERGENCY_OVERRIDE`` (``high``): the requester's purpose is ``emergency``. Only when
       ``policy.allow_emergency``: the purpose is self-declared; off by default.
    5. ``LOCK_HELD`` (``low``): not reclaimable.

    Locks that are ``writing`` or ``unreadable`` give ``LOCK_HELD`` (nothing is known of their
    holder); ``free`` gives ``LOCK_EXPIRED`` trivially (there is nothing to take over).
    Never raises.
    """
    if status.state is State.FREE:
        return True, "LOCK_EXPIRED", "high"
    record = status.record
    if status.state in (State.EXPIRED, State.STALE):
        expiry = _expiry(record) if record is not None else None
        if status.state is State.EXPIRED or (expiry is not None and expiry <= status.checked_at):
            return True, "LOCK_EXPIRED", "high"
        return True, "HOLDER_DEAD", "high"
    if record is None:
        return False, "LOCK_HELD", "low"
    metadata = record.metadata if isinstance(record.metadata, dict) else {}

    existing_user = metadata.get("user_identity")
    user = requester_user if requester_user is not None else _real_user()
    if isinstance(existing_user, str) and existing_user and user and existing_user == user:
        return True, "SAME_USER", "medium"

    if policy.allow_higher_privilege:
        existing_env = metadata.get("environment")
        new_rank = _rank(requester_environment)
        old_rank = _rank(existing_env if isinstance(existing_env, str) else None)
        if new_rank != -1 and new_rank < old_rank:
            return True, "HIGHER_PRIVILEGE", "medium"

    if policy.allow_emergency and requester_purpose == "emergency":
        return True, "EMERGENCY_OVERRIDE", "high"

    return False, "LOCK_HELD", "low"


def _rank(environment: str | None) -> int:
    try:
        return PRIVILEGE_ORDER.index(environment) if environment is not None else -1
    except ValueError:
        return -1


def _real_user() -> str | None:
    try:
        return getpass.getuser()
    except Exception:  # no login name and no passwd entry (containers): nobody to match
        return None
