"""Judging a lock recorded on another host by that host's own report (docs/fleet.md,
"Verdicts").

A lock whose record names another host has liveness ``remote`` here: its PID cannot be checked
from this host, so the local rules wait out its TTL or its age (``stale_after``). With a fleet,
the host named in the lock publishes the liveness of its own PIDs; :func:`judge_with_fleet`
re-judges such a lock with :func:`core.verdicts.judge.judge` -- the one judge, same policy --
as if the PID had been checked here:

- the host's heartbeat is recent and it reports the PID gone (or now a later process): the
  holder is dead (a lock written by Lockwarden is then stale at once; another tool's when it
  is older than its stale limit, as on the holder's own host), reason ``fleet_report``;
- it reports the PID alive: ``held`` (or ``expired`` past its lease), reason ``fleet_report``;
- it publishes nothing on that PID: unchanged, reason ``fleet_pid_unreported``;
- its heartbeat is older than the silence bound: unchanged, reason ``fleet_host_silent``;
- its rows were not written by the role bound to its name (docs/fleet.md, "Trust"):
  unchanged, reason ``fleet_host_untrusted``;
- a host that never published: unchanged.

A verdict drawn from another host's report carries ``fleet_report``: it rests on that host's
word, so its safe action never advises a forced release on its strength alone
(:func:`core.tools.safe_action`).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from core.codes import Code
from core.fleet.store import FleetSnapshot
from core.reasons import Reason
from core.record import Evidence, Liveness, LockStatus
from core.verdicts.judge import judge
from core.verdicts.liveness import START_TOLERANCE

_LIVENESS = {"alive": Liveness.ALIVE, "dead": Liveness.DEAD, "reused": Liveness.REUSED}


def silence_bound(interval_s: float, silent_after: float) -> float:
    """Seconds after a host's last heartbeat at which it is silent: ``silent_after``, and never
    less than three of its own heartbeat intervals."""
    return max(silent_after, 3 * interval_s)


def judge_with_fleet(status: LockStatus, snap: FleetSnapshot, *, silent_after: float,
                     now: datetime | None = None) -> LockStatus:
    """``status`` re-judged by the report of the host its record names (see the module
    docstring); ``status`` itself when the fleet has nothing to say. ``silent_after`` in
    seconds; ``now`` aware UTC (default: the current time). Never raises."""
    rec = status.record
    if rec is None or rec.host is None or rec.pid is None or status.liveness is not Liveness.REMOTE:
        return status
    host = snap.host(rec.host)
    if host is None:
        distrust = snap.distrust(rec.host)
        if distrust is None:
            return status
        untrusted = Reason.of(Code.FLEET_HOST_UNTRUSTED, host=distrust[0], why=distrust[1])
        return replace(status, reasons=(*status.reasons, untrusted))
    if host.age_s > silence_bound(host.interval_s, silent_after):
        silent = Reason.of(Code.FLEET_HOST_SILENT, host=host.host, silent_s=host.age_s)
        return replace(status, reasons=(*status.reasons, silent))
    report = snap.pids.get((host.host, rec.pid))
    if report is None:
        unreported = Reason.of(Code.FLEET_PID_UNREPORTED, host=host.host, pid=rec.pid)
        return replace(status, reasons=(*status.reasons, unreported))
    liveness = _LIVENESS.get(report.liveness, Liveness.UNKNOWN)
    if (liveness is Liveness.ALIVE and rec.start is not None and report.start is not None
            and abs(rec.start - report.start) > START_TOLERANCE):
        liveness = Liveness.REUSED  # that PID is alive, but it is not the lock's holder
    reason = Reason.of(Code.FLEET_REPORT, host=host.host, pid=rec.pid, liveness=liveness.value,
                       reported_at=report.checked_at.astimezone(UTC).isoformat(
                           timespec="seconds"))
    evidence = Evidence(pid=rec.pid, process_start=report.start)  # no boot rule: not our boot
    return judge(status.path, rec, liveness=liveness, liveness_reasons=[reason],
                 policy=status.policy, now=now or datetime.now(UTC), file=status.file,
                 evidence=evidence)
