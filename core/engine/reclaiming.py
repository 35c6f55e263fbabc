"""``reclaim``: break the lock at a path and hold it, race-free (docs/DESIGN.md, "Lock
operations"; docs/engine.md, "Reclaim is race-free"). A module of its own above
:mod:`core.engine.lock`, whose :class:`~core.engine.lock.Lock` does the take-over."""

from __future__ import annotations

import os

from core import formats
from core.engine import gate, operations, publish, takeover
from core.engine.gate import Act, EmptyFile, Intent
from core.engine.lock import Lock
from core.engine.operations import describe, resolve_policy
from core.engine.trash import Disposal
from core.errors import LockError, LockHeld, NotStale
from core.fsutil import validate_lock_path
from core.record import WRITABLE_FORMATS, LockStatus
from core.stale_policy import StalePolicy
from core.verdicts.inspect import inspect

__all__ = ["reclaim"]


def reclaim(
    path: str | os.PathLike[str],
    *,
    force: bool = False,
    reason: str | None = None,
    holder_pid: int | None = None,
    tag: str | None = None,
    ttl: float | None = None,
    stale_after: float | None = None,
    auto_refresh: bool = False,
    policy: StalePolicy | None = None,
    durable: bool = False,
) -> Lock:
    """Break the lock at ``path`` and hold it; returns the held :class:`Lock`.

    Allowed when the verdict is ``stale`` (docs/DESIGN.md stale policy, judged under ``policy`` --
    default :data:`core.stale_policy.DEFAULT_POLICY` -- with ``stale_after`` seconds replacing
    its limit when given), or ``force`` is True (an explicit human or ``--force`` decision),
    or -- for a ``task-mcp`` lock -- when docs/specs/task-mcp.txt's decision matrix
    (:func:`core.verdicts.judge.taskmcp_decision`: LOCK_EXPIRED, HOLDER_DEAD, SAME_USER;
    HIGHER_PRIVILEGE and EMERGENCY_OVERRIDE only when the policy enables them, since they rest
    on self-declared fields) says so. The decision and its reason go into the audit entry and,
    for task-mcp, into the new lock's ``metadata`` (``reclaimed_from``, ``reclaimed_reason``;
    ``docs/specs/task-mcp.txt`` "Reclaim Process").

    The new lock keeps the old one's format when Lockwarden writes it (sema, task-mcp,
    af-ledger), else sema. A free path is simply acquired. Race-free when many processes
    reclaim at once: exactly one wins, the others get NotStale (or LockHeld); see
    docs/engine.md, "Reclaim is race-free".

    ``durable``: as :class:`Lock` (the take-over itself is always made durable).

    ``auto_refresh``: renew the new lock at 75% of its lease in a daemon thread, as
    :class:`Lock` does (docs/specs/task-mcp.txt "Auto-Refresh Mechanism"); it applies
    when the new lock has a lease (``ttl`` given, or a task-mcp lock with the spec's default TTL)
    and is ignored otherwise.

    Raises:
        NotStale: not stale and not ``force`` (``.status``; ``.decision`` for task-mcp).
        LockHeld: someone else took the lock first.
        ReadOnlyLock: what is there may not be replaced: a file no format reads (``kind``
            ``not_a_lock``), an af claim or a claim in an af ledger (``not_writable``,
            ``ledger_claim``); nothing is changed.
        UnreadableError: the path is a symlink, FIFO, directory or device.
        LockError: neither a directory guard nor an exchange primitive is available here.
        ValueError: a bad ``ttl`` or ``stale_after``.
    """
    p = validate_lock_path(path)
    judge = resolve_policy(policy, stale_after)
    status = inspect(p, policy=judge)
    fmt = "sema"
    if status.record is not None and status.record.format in WRITABLE_FORMATS:
        fmt = status.record.format
    leased = ttl is not None or formats.default_ttl(fmt) is not None
    lk = Lock(p, tag=tag, ttl=ttl, format=fmt, holder_pid=holder_pid,
              auto_refresh=auto_refresh and leased, policy=judge, durable=durable)
    try:
        return _take(lk, force=force, reason=reason)
    except LockHeld as exc:
        raise NotStale(str(exc), exc.status) from exc


def _take(lk: Lock, *, force: bool, reason: str | None) -> Lock:
    """Break the lock at the path and hold it (see :func:`core.engine.reclaiming.reclaim`):
    what the gate lets a reclaim take (:func:`core.engine.gate.ask`,
    :attr:`~core.engine.gate.Intent.RECLAIM` judged by a
    :class:`~core.engine.operations.ReclaimJudge`, or
    :attr:`~core.engine.gate.Intent.FORCE_RECLAIM`)."""
    with lk._mutex:
        if lk.is_held:
            raise LockError(f"{lk.path} is already held by this Lock object")
    judge = operations.ReclaimJudge(lk.policy, force)
    intent = Intent.FORCE_RECLAIM if force else Intent.RECLAIM
    status: LockStatus | None = None
    for _ in range(publish.MAX_RETRIES):
        status = inspect(lk.path, policy=lk.policy)
        if not status.present:  # a free kernel-lock anchor is refused below, never taken
            return lk.acquire(blocking=False)
        answer = gate.ask(lk.path, status, intent, judge=judge)
        if answer.act is Act.REFUSE:
            gate.refuse(lk.path, answer, intent)
        if answer.act is not Act.TAKE_OVER:
            judge.refuse(lk.path, status, reason)
        emptied = answer.emptied
        token = publish.new_token()
        built = lk._build(token, judge.reclaimed(status), emptied=emptied)
        keep = Disposal(lk.path)  # a forced reclaim keeps a foreign file it replaces

        def accept(st: LockStatus, emptied: EmptyFile | None = emptied) -> bool:
            again = gate.ask(lk.path, st, intent, judge=judge)
            return again.act is Act.TAKE_OVER and again.emptied == emptied

        with publish.stage(lk.path, token, built.data, lk.policy.file_mode(built.mode),
                           durable=True) as staged, \
                lk._prepin(staged) as pre:  # an explicit reclaim: made durable
            out = takeover.take_over(staged, status, accept, lk.policy,
                                    keep if force else None)
            lk.kept = keep.kept
            if out.kind in ("published", "won"):
                lk._took_over(out, token, built, staged, pre, judge, reason, emptied)
                return lk
        if out.kind == "lost_race":
            operations.audit_lost_race(lk.path, lk.format, out, reason, lk.kept)
            assert out.status is not None
            raise LockHeld(f"lock taken first by another process: "
                           f"{describe(out.status)}", out.status)
        if out.kind == "refused":
            assert out.status is not None
            again = gate.ask(lk.path, out.status, intent, judge=judge)
            if again.act is Act.REFUSE:
                gate.refuse(lk.path, again, intent)
            if again.act is not Act.TAKE_OVER:
                judge.refuse(lk.path, out.status, reason)
            # what the gate lets go, the file's peers hold, opened or use (unheld.py)
            raise LockHeld(f"not reclaimed: {describe(out.status)}", out.status)
    raise LockHeld(f"{lk.path} kept changing; reclaim gave up", status)
