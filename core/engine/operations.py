"""Lock operations on a path that need no :class:`~core.engine.lock.Lock` object -- force release,
release on behalf of a PID -- and what the engine's operations share: the stale policy they judge
with, the reclaim decision, the holder record (docs/engine.md; docs/DESIGN.md, "Lock
operations"). The audit call is :mod:`core.engine.audited`; what an operation may do with
what is at the path, :mod:`core.engine.gate`. Waiting is :mod:`core.engine.waiting`. Importable from
:mod:`core.engine.lock` and :mod:`core` as well.

The file work itself (verified remove under the directory guard) is :mod:`core.engine.publish`;
waking on events is :mod:`core.engine.waiting`.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable
from typing import NamedTuple, NoReturn

from core.codes import Code
from core.engine import gate
from core.engine.audited import holder_summary, record_audit
from core.engine.gate import Act, Answer, Intent
from core.engine.remove import empty_if, remove_if
from core.engine.takeover import Outcome
from core.engine.trash import Disposal, Kept
from core.errors import LockError, LockLost, NotStale
from core.formats.taskmcp import LOCKWARDEN_ENVIRONMENT, LOCKWARDEN_PURPOSE
from core.formats.writing import Holder, Reclaimed
from core.fsutil import validate_lock_path
from core.reasons import Reason, render_all
from core.record import FileInfo, LockRecord, LockStatus, State
from core.stale_policy import DEFAULT_POLICY, StalePolicy
from core.verdicts.inspect import inspect, inspect_bytes
from core.verdicts.judge import taskmcp_decision
from core.verdicts.liveness import hostname, process_identity, process_start_time, same_host

log = logging.getLogger("lockwarden.lock")

def resolve_policy(policy: StalePolicy | None, stale_after: float | None) -> StalePolicy:
    """The stale policy an operation judges with: ``policy`` (default
    :data:`core.stale_policy.DEFAULT_POLICY`), its ``stale_after`` replaced by ``stale_after``
    (seconds) when that is given -- the keyword the engine took before it took a policy.

    Raises:
        ValueError: ``stale_after`` is not a finite number of seconds > 0.
    """
    base = policy if policy is not None else DEFAULT_POLICY
    if stale_after is None:
        return base
    return dataclasses.replace(base, stale_after=stale_after)


def describe(status: LockStatus) -> str:
    """One line for an exception message: the path, its state, the holder and the reasons
    (``"/locks/a.lock is held by PID 42 (...)"``)."""
    return f"{status.path} is {state_phrase(status)}"


def state_phrase(status: LockStatus) -> str:
    """:func:`describe` without the path: ``"held by PID 42 on build-7 (reasons)"``, for a
    message that names the path itself (``"waiting for PATH: held by ..."``)."""
    rec = status.record
    who = ""
    if rec is not None:
        if rec.pid is not None:
            who = f" by PID {rec.pid}" + (f" on {rec.host}" if rec.host else "")
        elif rec.holder:
            who = f" by {rec.holder}"
    why = render_all(status.reasons)
    return f"{status.state.value}{who}" + (f" ({why})" if why else "")


def on_this_host(host: str | None) -> bool:
    """True when ``host`` is this host, or unrecorded (sema's locks carry none)."""
    return host is None or same_host(host)


def _removed_status(
    path: str, removed: tuple[bytes, FileInfo], policy: StalePolicy
) -> LockStatus:
    return inspect_bytes(path, removed[0], removed[1], policy=policy)


_own_start: dict[int, tuple[float, str | None]] = {}
"""This process's psutil start time and identity, by PID (a forked child has its own PID),
shared by every :class:`HolderCache`: a ``with Lock(path):`` per operation looks them up once
per process, not once per ``Lock``."""


class HolderCache:
    """Who a lock names as its holder (:class:`core.formats.Holder`): the PID, this host's
    name, and the process's start time and identity from psutil (docs/DESIGN.md, "Liveness and
    verdicts": they let readers detect a reused PID). This process's are looked up once per
    process; :meth:`keep` pins a held lock's own for its refreshes."""

    def __init__(self) -> None:
        self._starts: dict[int, tuple[float, str | None]] = {}

    def holder(self, pid: int, path: str) -> Holder:
        """The holder record for process ``pid`` taking ``path``.

        Raises:
            LockError: no process ``pid`` exists (nothing may be written in its name).
        """
        cached = self._starts.get(pid)
        if cached is None and pid == os.getpid():
            cached = _own_start.get(pid)  # this process's: looked up once per process
        if cached is None:
            start = process_start_time(pid)
            proc = process_identity(pid)
            if start is not None and pid == os.getpid():
                self._starts[pid] = _own_start[pid] = (start, proc)
        else:
            start, proc = cached
        if start is None:
            raise LockError(f"holder process {pid} does not exist; cannot take {path}")
        return Holder(pid=pid, host=hostname(), start=start, proc=proc)

    def keep(self, record: LockRecord) -> None:
        """Use ``record``'s start time and identity for its PID from now on (a refresh renews
        the lock of the process it names, never of a later process with the same PID)."""
        if record.pid is not None and record.start is not None:
            self._starts[record.pid] = (record.start, record.proc)


# -- reclaim decisions -------------------------------------------------------------------------


class ReclaimJudge:
    """Whether a reclaim may break the lock it sees, as a callable ``judge(status) -> bool``
    (docs/engine.md, "Task MCP reclaim"): a free path, a stale lock, any lock with ``force``;
    for a ``task-mcp`` lock the decision of the reclaim matrix of
    ``docs/specs/task-mcp.txt`` (:func:`core.verdicts.judge.taskmcp_decision`, Lockwarden
    requesting as :data:`~core.formats.taskmcp.LOCKWARDEN_ENVIRONMENT` /
    :data:`~core.formats.taskmcp.LOCKWARDEN_PURPOSE`). Called again under the directory guard;
    ``decision`` holds the last call's Task MCP ``decision`` and ``priority`` (and ``matrix``
    when forced past it), for the audit entry and the new lock's metadata."""

    def __init__(self, policy: StalePolicy, force: bool) -> None:
        self.policy = policy
        self.force = force
        self.decision: dict[str, str] = {}

    def __call__(self, status: LockStatus) -> bool:
        self.decision.clear()
        rec = status.record
        if status.state is State.FREE:
            return True
        if rec is not None and rec.format == "task-mcp":
            ok, why, priority = taskmcp_decision(
                status,
                requester_environment=LOCKWARDEN_ENVIRONMENT,
                requester_purpose=LOCKWARDEN_PURPOSE,
                policy=self.policy,
            )
            self.decision.update(decision=why, priority=priority)
            if not ok and self.force:
                self.decision.update(decision="FORCE", matrix=why)
                return True
            return ok
        return self.force or status.state is State.STALE

    def reclaimed(self, status: LockStatus) -> Reclaimed:
        """What the new lock records about the lock it replaces (task-mcp ``metadata``):
        ``status``'s holder and the last decision (``STALE`` without one)."""
        rec = status.record
        return Reclaimed(holder=rec.holder if rec else None,
                         reason=self.decision.get("decision", "STALE"))

    def refuse(self, path: str, status: LockStatus, reason: str | None) -> NoReturn:
        """Audit a refused reclaim of ``path`` (``reclaim_refused``) and raise.

        Raises:
            NotStale: always (``.status``; ``.decision``: the Task MCP decision, or None).
        """
        decision = self.decision.get("decision")
        record_audit(path, "reclaim_refused", result="refused", details={
            "holder": holder_summary(status), "decision": decision, "reason": reason,
        }, format=status.record.format if status.record else None)
        raise NotStale(f"not reclaimed: {describe(status)}"
                       + (f"; Task MCP decision {decision}" if decision else ""),
                       status, decision=decision)


def audit_lost_race(path: str, fmt: str, out: Outcome, reason: str | None = None,
                    kept: Kept | None = None) -> None:
    """Audit a reclaim that removed the stale lock while another process then linked its own
    lock into the free path first (``reclaim`` with result ``lost_race``; docs/engine.md,
    "Reclaim is race-free"); ``kept``: where the removed file went, if it was kept."""
    assert out.displaced is not None and out.status is not None
    record_audit(path, "reclaim", result="lost_race", details={
        "displaced": holder_summary(out.displaced),
        "reason": reason or render_all(out.displaced.reasons) or "stale",
        "note": "the stale lock was removed, another process then took the free lock",
        "holder": holder_summary(out.status), "kept": kept.to_dict() if kept else None,
    }, format=fmt)


class Removal(NamedTuple):
    """What a forced removal did: ``status``, the verdict on the file removed (``free`` when
    there was none), and ``kept``, where that file went when it was kept rather than unlinked
    (:class:`core.engine.trash.Kept`: the trash or the quarantine folder), else ``None``."""

    status: LockStatus
    kept: Kept | None = None


def force_release(
    path: str | os.PathLike[str],
    *,
    reason: str | None = None,
    policy: StalePolicy | None = None,
    discard_unsaved: bool = False,
) -> LockStatus:
    """Remove whatever lock is at ``path``; returns the verdict on the file removed
    (:func:`force_release_kept`, which also says where a kept file went; raises as it)."""
    return force_release_kept(path, reason=reason, policy=policy,
                              discard_unsaved=discard_unsaved).status


def force_release_kept(
    path: str | os.PathLike[str],
    *,
    reason: str | None = None,
    policy: StalePolicy | None = None,
    discard_unsaved: bool = False,
) -> Removal:
    """Remove whatever lock is at ``path`` (an explicit human or ``--force`` decision,
    docs/DESIGN.md "Lock operations"), under the directory guard, judged under ``policy``
    (default :data:`core.stale_policy.DEFAULT_POLICY`). A foreign file with content goes to
    the trash or the quarantine folder, never simply unlinked; a Lockwarden lock or an empty
    file is unlinked (docs/engine.md, "Nothing is simply unlinked"). Audited as
    ``force_release`` with the displaced holder, ``reason`` and ``kept`` (where the file went).

    Raises:
        UnreadableError: the path is a symlink, FIFO, directory or device, or one of the
            engine's own files (never removed).
        ReadOnlyLock: a regular file that is not a lock (:func:`is_a_lock`), one a kernel
            lock holds (never removed; an empty file is removed holding its ``flock``, so one
            locked meanwhile is refused too: :mod:`core.engine.unheld`), or a claim in an af
            ledger (audited).
        LockHeld: an empty file another process has open (it may lock it next).
        UnsavedChanges: the file stands for unsaved work and not ``discard_unsaved``
            (audited; nothing removed).
        NotKept: the foreign file could be kept neither in the trash nor in quarantine
            (it was put back; nothing removed).
        LockLost: the file changed between the check and the guarded removal (nothing was
            removed; it is still there).
        GuardTimeout: the directory guard stayed held by another process (10 s).
    """
    p = validate_lock_path(path)
    judge = resolve_policy(policy, None)
    seen = inspect(p, policy=judge)
    answer = gate.ask(p, seen, Intent.FORCE_RELEASE, discard_unsaved=discard_unsaved)
    if answer.act is Act.REFUSE:
        gate.refuse(p, answer, Intent.FORCE_RELEASE)
    keep = Disposal(p)
    try:
        removed = _forced(p, answer, judge, discard_unsaved, keep)
    except LockLost:
        if os.path.lexists(p):  # it changed under the guard (a kernel lock, another file)
            raise
        status = LockStatus(p, State.FREE, reasons=(Reason.of(Code.NO_LOCK_FILE),))
        record_audit(p, "force_release", result="free",
                     details={"reason": reason, "displaced": None})
        return Removal(status)
    status = _removed_status(p, removed, judge)
    record_audit(p, "force_release",
                 details={"displaced": holder_summary(status), "reason": reason,
                          "kept": keep.kept.to_dict() if keep.kept else None,
                          **_emptied_detail(answer)},
                 format=status.record.format if status.record else None)
    return Removal(status, keep.kept)


def _emptied_detail(answer: Answer) -> dict[str, str]:
    """The audit detail of a release that emptied a lock in place (``emptied``)."""
    return {"emptied": answer.emptied.text()} if answer.act is Act.EMPTY_IT \
        and answer.emptied is not None else {}


def _forced(p: str, answer: Answer, policy: StalePolicy, discard_unsaved: bool,
            keep: Disposal) -> tuple[bytes, FileInfo]:
    """Carry out the gate's ``answer`` to a forced release of ``p`` under the directory guard,
    asking it again on the bytes about to go (:func:`_removable`): empty a lock of ours that
    replaced an empty file in place, else remove the file (kept by ``keep`` when it is foreign
    content).

    Raises:
        LockLost: nothing there, or it changed so that the gate no longer lets it go.
    """
    check = _removable(p, policy, discard_unsaved)
    if answer.act is Act.EMPTY_IT and answer.emptied is not None:
        return empty_if(p, check, answer.emptied, strict=True)
    return remove_if(p, check, keep)


def release_path(
    path: str | os.PathLike[str],
    *,
    pid: int,
    force: bool = False,
    reason: str | None = None,
    policy: StalePolicy | None = None,
    discard_unsaved: bool = False,
) -> LockStatus:
    """Release the lock at ``path`` on behalf of process ``pid``; returns the verdict on the
    removed lock (:func:`release_path_kept`, which also says where a kept file went; raises
    as it)."""
    return release_path_kept(path, pid=pid, force=force, reason=reason, policy=policy,
                             discard_unsaved=discard_unsaved).status


def release_path_kept(
    path: str | os.PathLike[str],
    *,
    pid: int,
    force: bool = False,
    reason: str | None = None,
    policy: StalePolicy | None = None,
    discard_unsaved: bool = False,
) -> Removal:
    """Release the lock at ``path`` on behalf of process ``pid`` (the CLI ``release`` verb,
    run from another process than the holder): the lock is removed only when it records
    ``pid`` and this host (sema's and semats' release check, ``docs/specs/semats.txt``
    "Lock Release"), checked under the directory guard; with ``force`` it is removed whoever
    holds it (audited as ``force_release``; a foreign file with content is kept in the trash
    or quarantine, as :func:`force_release_kept` does) -- also an empty file nobody holds or
    has open (``free``, :attr:`core.record.LockStatus.empty_free`), removed holding its
    ``flock`` (:mod:`core.engine.unheld`). Judged under ``policy`` (default
    :data:`core.stale_policy.DEFAULT_POLICY`).

    Raises:
        LockLost: no lock, or it is not ``pid``'s on this host (and not ``force``).
        UnreadableError: the path is a symlink, FIFO, directory or device, or one of the
            engine's own files.
        ReadOnlyLock: ``force`` and a regular file that is not a lock (:func:`is_a_lock`), or
            an empty file a kernel lock holds by the time it is removed; a claim in an af
            ledger (audited ``release_refused``, result ``refused``).
        LockHeld: ``force`` and an empty file another process has open (it may lock it next).
        UnsavedChanges: ``force``, the file stands for unsaved work and not
            ``discard_unsaved`` (audited).
        NotKept: ``force``, and the foreign file could not be kept (nothing removed).
        GuardTimeout: the directory guard stayed held by another process (10 s).
    """
    p = validate_lock_path(path)
    judge = resolve_policy(policy, None)
    status = inspect(p, policy=judge)
    if force:
        answer = gate.ask(p, status, Intent.FORCE_RELEASE, discard_unsaved=discard_unsaved)
        if answer.act is Act.REFUSE:
            gate.refuse(p, answer, Intent.FORCE_RELEASE)
    else:
        answer = gate.ask(p, status, Intent.RELEASE, kernel=False)
        if answer.act is Act.REFUSE:  # a claim in an af ledger: af's
            gate.refuse(p, answer, Intent.RELEASE)
    if answer.act is Act.NOTHING or (status.state is State.FREE and not force):
        record_audit(p, "release_refused", result="free", details={"pid": pid, "reason": reason})
        raise LockLost(f"{p}: there is no lock to release")
    fmt = status.record.format if status.record else None
    if force:
        return _release_forced(p, pid, reason, fmt, judge, answer, discard_unsaved)

    def mine(data: bytes, info: FileInfo) -> bool:
        r = inspect_bytes(p, data, info, policy=judge).record
        return r is not None and r.pid == pid and on_this_host(r.host)

    try:
        if answer.act is Act.EMPTY_IT and answer.emptied is not None:
            removed = _removed_status(p, empty_if(p, mine, answer.emptied), judge)
        else:
            removed = _removed_status(p, remove_if(p, mine), judge)
    except LockLost as exc:
        record_audit(p, "release_refused", result="refused",
                     details={"pid": pid, "holder": holder_summary(status), "reason": str(exc)},
                     format=fmt)
        raise LockLost(f"{p}: not released, the lock is not held by PID {pid} on this "
                       f"host ({describe(status)})") from None
    record_audit(p, "release", details={
        "pid": pid, "holder": holder_summary(removed),
        "token": removed.record.token if removed.record else None,
        **_emptied_detail(answer)}, format=fmt)
    return Removal(removed)


def _removable(p: str, policy: StalePolicy,
               discard_unsaved: bool = False) -> Callable[[bytes, FileInfo], bool]:
    """The check a forced removal makes under the directory guard, on the bytes it is about
    to remove: the gate (:func:`core.engine.gate.ask`) still lets a forced release take them
    -- a lock, held by no kernel lock but its holder's pin, standing for no unsaved work unless
    ``discard_unsaved``."""
    def check(data: bytes, info: FileInfo) -> bool:
        st = inspect_bytes(p, data, info, policy=policy)
        return gate.ask(p, st, Intent.FORCE_RELEASE, discard_unsaved=discard_unsaved).allowed

    return check


def _release_forced(
    p: str, pid: int, reason: str | None, fmt: str | None, policy: StalePolicy,
    answer: Answer, discard_unsaved: bool = False,
) -> Removal:
    """``release_path(force=True)``: remove whatever is there, keeping a foreign file with
    content (:class:`core.engine.trash.Disposal`); audited as ``release`` when it was
    ``pid``'s on this host after all, else ``force_release``."""
    keep = Disposal(p)
    try:
        removed = _removed_status(p, _forced(p, answer, policy, discard_unsaved, keep), policy)
    except LockLost:
        record_audit(p, "release_refused", result="free", details={"pid": pid, "reason": reason})
        raise
    r = removed.record
    op = "release" if r is not None and r.pid == pid and on_this_host(r.host) else "force_release"
    record_audit(p, op, details={"pid": pid, "displaced": holder_summary(removed),
                                 "reason": reason,
                                 "kept": keep.kept.to_dict() if keep.kept else None,
                                 **_emptied_detail(answer)}, format=fmt)
    return Removal(removed, keep.kept)


__all__ = [
    "HolderCache",
    "ReclaimJudge",
    "Removal",
    "audit_lost_race",
    "describe",
    "force_release",
    "force_release_kept",
    "on_this_host",
    "release_path",
    "release_path_kept",
    "resolve_policy",
    "state_phrase",
]
