"""The stale policy: from what a lock file says and whether its holder lives, to a verdict
(docs/DESIGN.md, "Liveness and verdicts"; Task MCP's reclaim matrix from
``docs/specs/task-mcp.txt``, "Stale Lock Reclaim Algorithm").

Only imports :mod:`core.record`, so the CLI's ``status`` path stays cheap.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from core.codes import Code, UnreadableKind
from core.reasons import Reason
from core.record import Evidence, FileInfo, Liveness, LockRecord, LockStatus, State
from core.stale_policy import StalePolicy

__all__ = [
    "free_status", "judge", "judge_empty", "judge_unparsed", "judge_unreadable",
    "taskmcp_decision",
]

BOOT_SLACK = 1.0
"""Seconds of tolerance when comparing an acquisition time with the boot time (sema timestamps
are whole seconds; ``psutil.boot_time()`` is too)."""


def free_status(path: str, *, policy: StalePolicy, now: datetime,
                reason: Reason | None = None, read_only: bool = False) -> LockStatus:
    """The ``free`` verdict: nothing is at ``path`` (reason ``no_lock_file`` by default)."""
    return LockStatus(path, State.FREE, reasons=(reason or Reason.of(Code.NO_LOCK_FILE),),
                      checked_at=now, policy=policy, read_only=read_only)


def judge_unreadable(path: str, *, kind: UnreadableKind, detail: str, policy: StalePolicy,
                     now: datetime, file: FileInfo | None = None) -> LockStatus:
    """The ``unreadable`` verdict for a path that could not be read (``kind``, ``detail``:
    from :class:`core.errors.UnreadableError`). Never raises."""
    return LockStatus(path, State.UNREADABLE,
                      reasons=(Reason.of(Code.UNREADABLE, kind=kind.value, detail=detail),),
                      error=detail, checked_at=now, file=file, policy=policy)


def judge_unparsed(
    path: str,
    *,
    empty: bool,
    detail: str,
    policy: StalePolicy,
    now: datetime,
    file: FileInfo | None = None,
    mtime: float | None = None,
) -> LockStatus:
    """The verdict on bytes that are empty (``empty``) or that no format parses (``detail``:
    the parser's reason). Never raises.

    Rules: empty -> :func:`judge_empty` without knowing who has the file open; younger than
    ``writing_grace`` (by mtime) -> ``writing`` (a peer created the file with ``O_EXCL`` and is
    still writing); else ``unreadable`` with the parse reason (garbage is never stale: never
    deleted)."""
    if mtime is None and file is not None:
        mtime = file.mtime_ns / 1e9
    if empty:
        return judge_empty(path, openers=None, policy=policy, now=now, file=file, mtime=mtime)
    kind = UnreadableKind.PARSE

    def status(state: State, reason: Reason) -> LockStatus:
        return LockStatus(path, state, reasons=(reason,), error=detail, checked_at=now,
                          file=file, policy=policy)

    age = now.timestamp() - mtime if mtime is not None else None
    if age is not None and -policy.writing_grace <= age < policy.writing_grace:
        return status(State.WRITING, Reason.of(Code.WRITING, empty=empty, age_s=max(age, 0.0)))
    return status(State.UNREADABLE, Reason.of(Code.UNREADABLE, kind=kind.value, detail=detail))


def judge_empty(
    path: str,
    *,
    openers: tuple[int, ...] | None,
    policy: StalePolicy,
    now: datetime,
    file: FileInfo | None = None,
    mtime: float | None = None,
    kernel_error: str | None = None,
    opener: Evidence | None = None,
) -> LockStatus:
    """The verdict on an empty (or whitespace-only) file on which the kernel shows no lock
    (docs/DESIGN.md, "Two kinds of locks": an empty file that no kernel lock holds and no
    process has open is free). Never raises.

    Args:
        openers: the other processes that have the file open (``()``: none), or ``None`` when
            that cannot be told (:meth:`core.kernel.openfiles.KernelView.open_by`).
        kernel_error: why the kernel's locks could not be read (then a kernel lock may hold
            the file unseen), or ``None``.
        opener: the first opener's process (name, user), for the evidence.
        policy, now, file, mtime: as :func:`judge_unparsed`.

    Rules, in order:
        - a process has it open -> ``writing`` (``empty_open``), whatever its age: its writer
          is writing it (sema creates the file, then writes it), or about to lock it
          (filelock and ``flock(1)`` open, then ``flock``);
        - younger than ``writing_grace`` and nobody known to have it open (``openers`` is
          ``None``, or the kernel's locks are unreadable) -> ``writing`` (``writing``);
        - the kernel's locks cannot be read -> ``held``, liveness ``unknown``
          (``empty_unchecked``);
        - otherwise -> ``free`` (``empty_free``): what filelock, portalocker, fasteners and
          ``flock(1)`` leave when they release, and what a sema that crashed between its
          create and its write leaves (nobody holds that either; docs/verdicts.md). Never
          ``stale``, never ``unreadable``.
    """
    if mtime is None and file is not None:
        mtime = file.mtime_ns / 1e9
    age = now.timestamp() - mtime if mtime is not None else None
    young = age is not None and -policy.writing_grace <= age < policy.writing_grace

    def status(state: State, reason: Reason, *, liveness: Liveness = Liveness.UNKNOWN,
               evidence: Evidence | None = None) -> LockStatus:
        return LockStatus(path, state, liveness=liveness, reasons=(reason,), checked_at=now,
                          file=file, policy=policy, evidence=evidence or Evidence())

    if openers:
        who = opener or Evidence(pid=openers[0])
        return status(State.WRITING, Reason.of(Code.EMPTY_OPEN, pid=openers[0],
                                               name=who.process_name, count=len(openers)),
                      liveness=Liveness.ALIVE, evidence=who)
    if young and (openers is None or kernel_error is not None):
        return status(State.WRITING, Reason.of(Code.WRITING, empty=True,
                                               age_s=max(age or 0.0, 0.0)))
    if kernel_error is not None:
        return status(State.HELD, Reason.of(Code.EMPTY_UNCHECKED, detail=kernel_error))
    return status(State.FREE, Reason.of(Code.EMPTY_FREE, open_seen=openers is not None))


def judge(
    path: str,
    record: LockRecord,
    *,
    liveness: Liveness,
    liveness_reasons: Sequence[Reason],
    policy: StalePolicy,
    now: datetime,
    file: FileInfo | None = None,
    mtime: float | None = None,
    evidence: Evidence | None = None,
) -> LockStatus:
    """The verdict on one parsed lock, by the rules of docs/verdicts.md, "Verdicts" (in order:
    a lock of this host taken before its last boot, a passed TTL, a lock Lockwarden wrote
    whose holder is dead, a standing lease, another tool's stale limit; docs/DESIGN.md,
    "Liveness and verdicts").

    Args:
        path: the lock path (``"<proof>/ledger#<node>"`` for af claims replayed from a ledger).
        record: the parsed lock.
        liveness, liveness_reasons: from :func:`core.verdicts.liveness.check`.
        policy: the directory's :class:`StalePolicy` (its limit for ``record.format``).
        now: the moment of the verdict (aware; UTC).
        file: identity of the judged file, or ``None``.
        mtime: the file's modification time (Unix s); default ``file.mtime_ns``.
        evidence: what liveness saw, and this host's boot time (Unix s) for the boot rule.

    Returns a :class:`LockStatus` whose ``reasons`` are the liveness reasons followed by the
    policy's. Never raises.
    """
    if mtime is None and file is not None:
        mtime = file.mtime_ns / 1e9
    evidence = evidence or Evidence(pid=record.pid)
    limit_s = policy.limit_for(record.format)
    read_only = record.format == "af-claim" and "#" in (path or record.path)
    dead = liveness in (Liveness.DEAD, Liveness.REUSED)
    now_ts = now.timestamp()
    taken = _taken_at(record, mtime)
    age = now_ts - taken if taken is not None else None

    def status(state: State, *more: Reason) -> LockStatus:
        return LockStatus(path, state, liveness=liveness,
                          reasons=(*liveness_reasons, *more), record=record,
                          read_only=read_only, checked_at=now, file=file,
                          policy=policy, evidence=evidence)

    boot = evidence.boot_time
    if (boot is not None and taken is not None and liveness is not Liveness.REMOTE
            and record.format != "af-claim" and taken < boot - BOOT_SLACK <= now_ts):
        return status(State.STALE, Reason.of(Code.PREDATES_BOOT, boot_at=_iso(boot)))

    expiry = _expiry(record)
    if expiry is not None:
        return _judge_lease(record, expiry, now, age, liveness, status)

    # only af reaps claims (docs/specs/af.txt, "Stale Lock Cleanup")
    if record.format == "af-claim":
        return status(State.HELD, *_held_for(age), Reason.of(Code.AF_REAPS_CLAIMS))
    if dead and record.written_by_lockwarden:
        return status(State.STALE, Reason.of(Code.OURS_HOLDER_DEAD))
    if age is None:
        return status(State.HELD, Reason.of(Code.AGE_UNKNOWN))
    if liveness is not Liveness.ALIVE and age > limit_s:
        return status(State.STALE,
                      Reason.of(Code.OLDER_THAN_STALE_AFTER, age_s=age, limit_s=limit_s))
    if liveness is not Liveness.ALIVE:
        return status(State.HELD, Reason.of(Code.YOUNGER_THAN_STALE_AFTER, age_s=age,
                                            limit_s=limit_s,
                                            holder="dead" if dead else "unknown"))
    return status(State.HELD, *_held_for(age))


def _judge_lease(
    record: LockRecord,
    expiry: datetime,
    now: datetime,
    age: float | None,
    liveness: Liveness,
    status: Callable[..., LockStatus],
) -> LockStatus:
    """The lease rules of :func:`judge` for a record with a TTL or ``expires_at``."""
    left = (expiry - now).total_seconds()
    dead = liveness in (Liveness.DEAD, Liveness.REUSED)
    if left < 0:
        lease: dict[str, float | str] = (
            {"ttl_s": record.ttl} if record.ttl is not None and record.format != "af-claim"
            else {"expires_at": _iso(expiry.timestamp())})
        expired = Reason.of(Code.EXPIRED, ago_s=-left, **lease)
        if record.format == "af-claim":
            return status(State.EXPIRED, expired, Reason.of(Code.AF_KEEPS_EXPIRED))
        if dead:
            return status(State.STALE, expired, Reason.of(Code.EXPIRED_HOLDER_DEAD))
        if liveness in (Liveness.REMOTE, Liveness.UNKNOWN):
            # docs/DESIGN.md "Liveness and verdicts": stale when "age/TTL [is] past the policy
            # where liveness cannot be known"; only a holder seen alive keeps it "expired".
            return status(State.STALE, expired, Reason.of(
                Code.EXPIRED_HOLDER_UNKNOWABLE, remote=liveness is Liveness.REMOTE))
        return status(State.EXPIRED, expired)
    if dead and record.written_by_lockwarden and record.format != "af-claim":
        # another tool's lease stands until it lapses (docs/DESIGN.md: TTL formats are stale
        # "when expired and not alive"); ours carries proof (token, start) of its holder
        return status(State.STALE, Reason.of(Code.HOLDER_DEAD_BEFORE_EXPIRY, left_s=left))
    return status(State.HELD, *_held_for(age), Reason.of(Code.EXPIRES_IN, left_s=left))


def _taken_at(record: LockRecord, mtime: float | None) -> float | None:
    """When the lock was taken (Unix s): ``acquired_at``, else the file's mtime."""
    if record.acquired_at is not None:
        try:
            return record.acquired_at.timestamp()
        except (OverflowError, OSError, ValueError):
            return None
    return mtime


def _iso(ts: float) -> str:
    try:
        return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")
    except (OverflowError, OSError, ValueError):
        return "?"


def _expiry(record: LockRecord) -> datetime | None:
    """``record.effective_expiry()``, or ``None`` when it lies beyond ``datetime``'s range
    (a TTL of centuries: never expires in practice)."""
    try:
        return record.effective_expiry()
    except (OverflowError, ValueError):
        return None


def _held_for(age: float | None) -> tuple[Reason, ...]:
    if age is None:
        return ()
    if age < 0:
        return (Reason.of(Code.CLOCK_SKEW, ahead_s=-age),)
    return (Reason.of(Code.HELD_FOR, age_s=age),)


PRIVILEGE_ORDER: tuple[str, ...] = ("ci", "cloud", "local")
"""Task MCP's environment privilege order, highest first (docs/specs/task-mcp.txt,
``hasHigherPrivilege``)."""


def taskmcp_decision(
    status: LockStatus,
    *,
    requester_user: str | None = None,
    requester_environment: str | None = None,
    requester_purpose: str | None = None,
    policy: StalePolicy,
) -> tuple[bool, str, str]:
    """Task MCP's reclaim decision for a ``task-mcp`` lock: ``(can_reclaim, reason, priority)``.

    Follows the decision matrix of ``docs/specs/task-mcp.txt``, "Stale Lock Reclaim
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
