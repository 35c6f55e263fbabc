"""The listing queries of PostgreSQL locks and their rows as verdicts, for
:mod:`core.remote.postgres.backend` (no driver, no I/O): ``pg_locks`` joined with
``pg_stat_activity`` (:data:`LOCKS_SQL`), one verdict per advisory key; Liquibase's
``DATABASECHANGELOGLOCK`` rows (:data:`LIQUIBASE_SQL`). The rules are docs/remote.md,
"PostgreSQL" and docs/specs/distributed-locks.md, "PostgreSQL advisory locks".
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from core.codes import Code
from core.reasons import Reason
from core.record import Evidence, Liveness, LockRecord, LockStatus
from core.remote.postgres.keys import (
    advisory_key,
    as_utc,
    holder_info,
    known_user,
    liquibase_token,
    lockedby_ip,
)
from core.stale_policy import StalePolicy
from core.verdicts.judge import judge

__all__ = ["ADVISORY", "LIQUIBASE", "LIQUIBASE_SQL", "LIQUIBASE_TABLE", "LOCKS_SQL",
           "advisory_status", "liquibase_status"]

ADVISORY = "postgres-advisory"
"""``LockRecord.format`` of an advisory lock."""
LIQUIBASE = "liquibase"
"""``LockRecord.format`` of a Liquibase ``DATABASECHANGELOGLOCK`` row."""

LOCKS_SQL = """
SELECT l.classid::bigint, l.objid::bigint, l.objsubid::int, l.mode, l.granted, l.pid,
       a.usename, a.application_name, host(a.client_addr), a.client_port, a.backend_start,
       a.xact_start, a.state_change, a.state, l.waitstart,
       CASE WHEN l.granted THEN NULL ELSE pg_blocking_pids(l.pid) END, now()
FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory'
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY l.classid, l.objid, l.objsubid, l.granted DESC, l.pid
"""

LIQUIBASE_TABLE = "databasechangeloglock"
LIQUIBASE_SQL = f"""
SELECT id, locked, lockgranted, lockedby, now(),
       (SELECT count(*) FROM pg_stat_activity s
        WHERE s.pid <> pg_backend_pid() AND host(s.client_addr) = %(ip)s)
FROM {LIQUIBASE_TABLE} WHERE locked ORDER BY id
"""



def advisory_status(key: tuple[int, int, int], rows: list[tuple[Any, ...]], *,
                    path_of: Callable[[str], str], server_host: str | None, dbname: str,
                    policy: StalePolicy) -> LockStatus | None:
    """The verdict on one advisory lock ``key`` (``(classid, objid, objsubid)``) from its
    rows of :data:`LOCKS_SQL` (holders and waiters), or None when only waiters are left.
    ``path_of`` gives a key's URL (the source's ``path_of``); ``server_host`` is where the
    holder's backend runs (None: this host, a unix socket); ``dbname`` names the database
    (some tools' keys depend on it: :func:`core.remote.postgres.keys.known_user`). Never stale: a
    listed holder is a live backend (docs/remote.md, "PostgreSQL")."""
    held = [r for r in rows if r[4]]
    if not held:
        return None  # waiters only: the holder let go between two rows of the snapshot
    waiters = len(rows) - len(held)
    first = held[0]
    now: datetime = first[16]
    path = path_of(advisory_key(*key))
    holders = [holder_info(r) for r in held]
    client = first[8] + (f":{first[9]}" if first[9] is not None else "") if first[8] else None
    record = LockRecord(
        path=path, format=ADVISORY, holder=f"{first[6] or '?'} PID {first[5]}",
        pid=first[5], host=server_host,
        tag=_label(known_user(*key, dbname), first[7] or None),
        token=",".join(f"{h['pid']}@{h['backend_start']}" for h in holders),
        metadata={"key": advisory_key(*key), "mode": first[3], "holders": holders,
                  "waiters": waiters, "classid": key[0], "objid": key[1],
                  "objsubid": key[2], "tool": known_user(*key, dbname)},
        removal=tuple(Reason.of(Code.TERMINATES_SESSION, pid=h["pid"], user=h["user"],
                                app=h["app"] or None) for h in holders))
    reasons = [Reason.of(Code.PG_SESSION, pid=first[5], user=first[6], app=first[7] or None,
                         client=client or "local socket", state=first[13],
                         holders=len(held) - 1 or None)]
    if first[13] == "idle" and first[12] is not None:
        reasons.append(Reason.of(Code.SESSION_IDLE,
                                 idle_s=(now - first[12]).total_seconds()))
    if waiters:
        reasons.append(Reason.of(Code.WAITERS, count=waiters))
    return judge(path, record, liveness=Liveness.ALIVE, liveness_reasons=reasons,
                 policy=policy, now=now.astimezone(UTC),
                 evidence=Evidence(pid=first[5]))


def liquibase_status(row: tuple[Any, ...], *, path_of: Callable[[str], str],
                     policy: StalePolicy) -> LockStatus:
    """The verdict on one locked Liquibase row of :data:`LIQUIBASE_SQL`: judged like another
    tool's lock, held while a session is connected from the IP its LOCKEDBY names, else
    stale when older than ``policy``'s limit (docs/remote.md, "PostgreSQL"). ``path_of``
    gives a key's URL."""
    ident, _locked, granted, lockedby, now, sessions = row
    path = path_of(f"liquibase/{ident}")
    ip = lockedby_ip(lockedby)
    granted_utc = as_utc(granted, now)
    record = LockRecord(
        path=path, format=LIQUIBASE, holder=lockedby,
        host=(lockedby or '').rsplit(' (', 1)[0] or None,
        acquired_at=granted_utc, tag=f"{LIQUIBASE_TABLE} id {ident}",
        token=liquibase_token(granted, lockedby),
        metadata={"id": ident, "lockgranted": granted.isoformat() if granted else None,
                  "lockedby": lockedby},
        removal=(Reason.of(Code.RESETS_ROW, table=LIQUIBASE_TABLE, id=ident),))
    if ip is not None and sessions:
        liveness, reasons = Liveness.ALIVE, [Reason.of(Code.CLIENT_CONNECTED, ip=ip,
                                                       sessions=sessions)]
    else:
        liveness = Liveness.UNKNOWN
        reasons = [Reason.of(Code.NO_SESSION_FROM_CLIENT, ip=ip)] if ip else []
    return judge(path, record, liveness=liveness, liveness_reasons=reasons,
                 policy=policy, now=now.astimezone(UTC))


def _label(tool: str | None, app: str | None) -> str | None:
    """An advisory lock's tag: the application name, with the tool that takes such keys
    (``flyway``, ``rails``: :func:`core.remote.postgres.keys.known_user`) named first."""
    words = {"flyway": "Flyway migration", "rails": "Rails migration"}
    if tool is None:
        return app
    return f"{words[tool]}" + (f" ({app})" if app else "")
