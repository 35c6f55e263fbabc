"""Publishing to and reading from the fleet database (PostgreSQL through psycopg 3;
docs/fleet.md).

:class:`Publisher` is one host's writer: one connection, one transaction per publication
that sends only what changed since the last one (every row again after a reconnect, so a
database that was down catches up), a heartbeat, and ``NOTIFY`` on :data:`~core.fleet.schema.
CHANNEL` so readers see changes without polling. :func:`read_snapshot` is a reader's view:
every host's heartbeat, the PIDs they report on and, on request, their locks.

Errors become :class:`FleetError` with a kind and a message that names the database without
its password; nothing here ever stops the local monitor (callers report and go on).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from core.config.model import FleetSpec, ServerSpec
from core.config.servers import redact_url
from core.fleet.schema import CHANNEL, LOCKS_JSON, migrate

if TYPE_CHECKING:  # imported where used: `list --fleet` needs only connect() (docs/fleet.md)
    from core.record import LockStatus

CONNECT_TIMEOUT = 5
"""Seconds libpq waits for the database to answer a connection (``connect_timeout``)."""

STATEMENT_TIMEOUT_MS = 10_000
"""Milliseconds after which the database cancels one of our statements (``statement_timeout``):
a slow database never holds a publisher or a reader for long."""


class FleetError(Exception):
    """The fleet database could not be used: ``kind`` is ``no_driver``, ``unreachable`` (no
    connection: down, unreachable, or the login refused), ``refused`` (privileges, row-level
    security) or ``failed``; the message names the database without its password."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class HostReport:
    """One host's last heartbeat: ``age_s`` is seconds since it, by the database's clock (so
    the hosts' clocks do not matter)."""

    host: str
    boot_id: str | None
    heartbeat_at: datetime
    interval_s: float
    age_s: float
    version: str | None = None


@dataclass(frozen=True)
class PidReport:
    """What a host reports on one of its PIDs: ``liveness`` is ``alive``, ``dead`` or
    ``reused``; ``start`` the process's start (Unix s) when alive; ``checked_at`` aware UTC."""

    host: str
    pid: int
    liveness: str
    start: float | None
    checked_at: datetime


@dataclass(frozen=True, slots=True)
class FleetLock:
    """One published lock: the publishing ``host``, its ``path`` there, the columns a table
    shows, and the whole verdict (:meth:`core.record.LockStatus.to_dict` as published) as the
    JSON text the database holds (``verdict_json``; :meth:`verdict` decodes it)."""

    host: str
    path: str
    state: str
    liveness: str
    pid: int | None
    holder: str | None
    verdict_json: str
    updated_at: datetime

    def verdict(self) -> dict[str, Any]:
        """The published verdict as a dict."""
        return dict(json.loads(self.verdict_json))


@dataclass
class FleetSnapshot:
    """Every host's heartbeat and PID reports at one moment (and the locks, when read)."""

    hosts: dict[str, HostReport] = field(default_factory=dict)
    pids: dict[tuple[str, int], PidReport] = field(default_factory=dict)
    locks: list[FleetLock] = field(default_factory=list)

    def host(self, name: str) -> HostReport | None:
        """The report of host ``name`` (matched as :func:`core.verdicts.liveness.same_host`
        does: case-insensitive, a short name matches its fully qualified one)."""
        found = self.hosts.get(name)
        if found is not None:
            return found
        from core.verdicts.liveness import same_host

        for host, report in self.hosts.items():
            if same_host(name, host):
                return report
        return None

    def pid(self, host: str, pid: int) -> PidReport | None:
        """What ``host`` reports on ``pid``, or None."""
        report = self.host(host)
        return None if report is None else self.pids.get((report.host, pid))


def connect(spec: FleetSpec, environ: Mapping[str, str] | None = None) -> Any:
    """A psycopg connection (autocommit) to the fleet database, with the password from
    ``password_env`` or the keychain (:func:`core.remote.sources.password_for`) and the
    statement timeout :data:`STATEMENT_TIMEOUT_MS`.

    Raises:
        FleetError: psycopg is not installed (``no_driver``), or the connection failed.
    """
    try:
        import psycopg
    except ImportError:
        raise FleetError("no_driver", "the fleet needs psycopg: pip install 'psycopg[binary]'"
                         ) from None
    env = os.environ if environ is None else environ
    if spec.password_env and spec.password_env in env:  # the common case, without importing
        password: str | None = env[spec.password_env]  # the lock servers' machinery
    else:
        from core.remote.sources import password_for

        server = ServerSpec(kind="postgres", url=spec.dsn, password_env=spec.password_env,
                            keyring=spec.keyring)
        password, _problem = password_for(server, environ)
    kw: dict[str, Any] = {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT,
                          "options": f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
                          "application_name": "lockwarden-fleet"}
    if password is not None:
        kw["password"] = password
    try:
        return psycopg.connect(spec.dsn, **kw)
    except psycopg.Error as exc:
        raise fleet_error(spec, exc) from None


def close_quietly(conn: Any) -> None:
    """Close ``conn`` (a psycopg connection, or ``None``); a connection already broken cannot
    fail the caller. Never raises."""
    if conn is not None:
        try:
            conn.close()
        except Exception:  # closing a broken connection: nothing to do
            pass


def fleet_error(spec: FleetSpec, exc: Exception) -> FleetError:
    """A psycopg error as a :class:`FleetError` naming the database (never its password)."""
    import psycopg

    where = redact_url(spec.dsn)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return FleetError("refused", f"fleet database {where}: refused: {text}")
    if isinstance(exc, psycopg.OperationalError):  # libpq gives no SQLSTATE for a failed
        # login: a wrong password is told apart only by libpq's text, which is never parsed
        return FleetError("unreachable", f"fleet database {where}: {text}")
    return FleetError("failed", f"fleet database {where}: {text}")


def _lock_row(host: str, s: LockStatus) -> tuple[Any, ...]:
    """The ``lockwarden_locks`` row of one verdict (without the time)."""
    rec = s.record
    d = s.to_dict()
    d.pop("age_s", None)  # ticks: a row that differs only in age is not a change
    reasons = [{"code": r.code.value, **dict(r.params)} for r in s.reasons
               if r.code.value not in ("held_for",)]
    return (host, s.path, s.state.value, s.liveness.value, rec.host if rec else None,
            rec.pid if rec else None, rec.holder if rec else None, rec.tag if rec else None,
            rec.format if rec else None, json.dumps(reasons, sort_keys=True, default=str),
            json.dumps({k: v for k, v in d.items() if k != "reasons"}, sort_keys=True,
                       default=str))


def pid_reports(statuses: Iterable[LockStatus], host: str | None = None
                ) -> dict[int, tuple[bool, str, float | None]]:
    """``{pid: (alive, liveness, start)}`` for the PIDs that this host's locks name on this
    host (``record.host`` is this host; ``host`` overrides the name compared with); a PID
    named by several locks is alive when any verdict found it alive."""
    from core.record import Liveness
    from core.verdicts.liveness import same_host

    out: dict[int, tuple[bool, str, float | None]] = {}
    for s in statuses:
        rec = s.record
        if rec is None or rec.pid is None or rec.host is None:
            continue
        if not (same_host(rec.host, host) if host else same_host(rec.host)):
            continue
        if s.liveness not in (Liveness.ALIVE, Liveness.DEAD, Liveness.REUSED):
            continue
        alive = s.liveness is Liveness.ALIVE
        had = out.get(rec.pid)
        if had is None or (alive and not had[0]):
            out[rec.pid] = (alive, s.liveness.value,
                            s.evidence.process_start if alive else None)
    return out


class Publisher:
    """One host's publisher (see the module docstring). Not thread-safe: one thread calls
    :meth:`publish`.

    Args:
        spec: the ``[fleet]`` table.
        boot_id: this boot's identity (Linux ``/proc/sys/kernel/random/boot_id``); default read.
        migrate_schema: create or migrate the tables on first connect (a role without the
            right gets ``refused``: the schema must exist, docs/fleet.md "Set-up").
    """

    def __init__(self, spec: FleetSpec, *, boot_id: str | None = None,
                 migrate_schema: bool = True) -> None:
        self.spec = spec
        self.boot_id = boot_id if boot_id is not None else _boot_id()
        self._migrate = migrate_schema
        self._conn: Any = None
        self._locks: dict[str, tuple[Any, ...]] = {}
        # the verdict each published row was encoded from: the watcher hands the same
        # (immutable) LockStatus back while a lock does not change, so it is not encoded again
        self._encoded: dict[str, tuple[LockStatus, tuple[Any, ...]]] = {}
        self._pids: dict[int, tuple[bool, str, float | None]] = {}
        self._fresh = True  # after (re)connecting: every row again, leftovers deleted
        self._locks_touched = False  # the last _send wrote or deleted lock rows

    def _connection(self) -> Any:
        if self._conn is None or self._conn.closed:
            self._conn = connect(self.spec)
            self._fresh = True
            if self._migrate:
                try:
                    migrate(self._conn)
                except Exception as exc:
                    self.close()
                    raise fleet_error(self.spec, exc) from None
        return self._conn

    def close(self) -> None:
        """Close the connection (the host's rows stay: its heartbeat stops, it turns silent)."""
        conn, self._conn = self._conn, None
        close_quietly(conn)

    def publish(self, statuses: Iterable[LockStatus]) -> int:
        """Send the heartbeat and every change in ``statuses`` (this host's whole inventory:
        a lock missing from it is deleted) in one transaction, then ``NOTIFY`` when anything
        changed. Returns the number of rows written or deleted.

        Raises:
            FleetError: the database failed; the next call reconnects and sends everything.
        """
        import psycopg

        statuses = list(statuses)
        host = self.spec.host
        locks: dict[str, tuple[Any, ...]] = {}
        encoded: dict[str, tuple[LockStatus, tuple[Any, ...]]] = {}
        for st in statuses:
            was = self._encoded.get(st.path)
            row = was[1] if was is not None and was[0] is st else _lock_row(host, st)
            locks[st.path] = row
            encoded[st.path] = (st, row)
        self._encoded = encoded
        pids = pid_reports(statuses, host)
        try:
            conn = self._connection()
            with conn.transaction(), conn.cursor() as cur:
                cur.execute(
                    "INSERT INTO lockwarden_hosts (host, boot_id, heartbeat_at, interval_s,"
                    " version) VALUES (%s, %s, now(), %s, %s) ON CONFLICT (host) DO UPDATE SET"
                    " boot_id = EXCLUDED.boot_id, heartbeat_at = now(),"
                    " interval_s = EXCLUDED.interval_s, version = EXCLUDED.version",
                    (host, self.boot_id, self.spec.interval, _version()))
                fresh = self._fresh
                written = self._send(cur, host, locks, pids)
                if fresh or self._locks_touched:  # readers' copy (docs/fleet.md, "Bounds")
                    cur.execute(f"UPDATE lockwarden_hosts SET locks_json = {LOCKS_JSON}"
                                " WHERE host = %s", (host,))
                    cur.execute("SELECT pg_notify(%s, %s)", (CHANNEL, host))
        except FleetError:
            raise
        except psycopg.Error as exc:
            self.close()
            raise fleet_error(self.spec, exc) from None
        self._locks, self._pids, self._fresh = locks, pids, False
        return written

    def _send(self, cur: Any, host: str, locks: dict[str, tuple[Any, ...]],
              pids: dict[int, tuple[bool, str, float | None]]) -> int:
        """The lock and PID rows that changed since the last publication (all after a
        reconnect), inside the caller's transaction; returns how many."""
        old_locks = {} if self._fresh else self._locks
        old_pids = {} if self._fresh else self._pids
        changed = [row for path, row in locks.items() if old_locks.get(path) != row]
        if self._fresh:
            cur.execute("DELETE FROM lockwarden_locks WHERE host = %s AND NOT path = ANY(%s)",
                        (host, list(locks)))
            cur.execute("DELETE FROM lockwarden_pids WHERE host = %s AND NOT pid = ANY(%s)",
                        (host, list(pids)))
            gone_paths: list[str] = []
            gone_pids: list[int] = []
            written = 1  # a (re)connected host: readers look again
        else:
            gone_paths = [p for p in old_locks if p not in locks]
            gone_pids = [p for p in old_pids if p not in pids]
            written = 0
        if changed:
            cur.executemany(
                "INSERT INTO lockwarden_locks (host, path, state, liveness, record_host, pid,"
                " holder, tag, format, reasons, verdict, updated_at) VALUES (%s, %s, %s, %s,"
                " %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, now()) ON CONFLICT (host, path)"
                " DO UPDATE SET state = EXCLUDED.state, liveness = EXCLUDED.liveness,"
                " record_host = EXCLUDED.record_host, pid = EXCLUDED.pid,"
                " holder = EXCLUDED.holder, tag = EXCLUDED.tag, format = EXCLUDED.format,"
                " reasons = EXCLUDED.reasons, verdict = EXCLUDED.verdict, updated_at = now()",
                changed)
        if gone_paths:
            cur.execute("DELETE FROM lockwarden_locks WHERE host = %s AND path = ANY(%s)",
                        (host, gone_paths))
        new_pids = [(host, pid, *v) for pid, v in pids.items() if old_pids.get(pid) != v]
        if new_pids:
            cur.executemany(
                "INSERT INTO lockwarden_pids (host, pid, alive, liveness, start, checked_at)"
                " VALUES (%s, %s, %s, %s, %s, now()) ON CONFLICT (host, pid) DO UPDATE SET"
                " alive = EXCLUDED.alive, liveness = EXCLUDED.liveness,"
                " start = EXCLUDED.start, checked_at = now()", new_pids)
        if gone_pids:
            cur.execute("DELETE FROM lockwarden_pids WHERE host = %s AND pid = ANY(%s)",
                        (host, gone_pids))
        self._locks_touched = bool(changed or gone_paths)
        return written + len(changed) + len(gone_paths) + len(new_pids) + len(gone_pids)


def read_snapshot(conn: Any, *, locks: bool = False,
                  pids: Collection[int] | None = None) -> FleetSnapshot:
    """Every host's heartbeat and PID reports (and, with ``locks``, every published lock)
    through ``conn`` (:func:`connect`). ``pids``: only the reports on these PIDs (of any
    host; none for an empty collection): what a reader judging a few locks needs, instead of
    every host's every PID. A database where no host has published yet (no tables: the first
    publisher creates them) is an empty snapshot.

    Raises:
        psycopg.Error: the database failed (callers map it with :class:`FleetError`).
    """
    import psycopg

    snap = FleetSnapshot()
    with conn.cursor() as cur:
        try:
            cur.execute("SELECT host, boot_id, heartbeat_at, interval_s,"
                        " extract(epoch FROM now() - heartbeat_at), version"
                        " FROM lockwarden_hosts")
        except psycopg.errors.UndefinedTable:  # the first publisher creates the tables
            return snap
        for host, boot_id, at, interval, age, version in cur.fetchall():
            snap.hosts[host] = HostReport(host, boot_id, _aware(at), float(interval),
                                          max(0.0, float(age)), version)
        rows: list[Any] = []
        if pids is None:
            cur.execute("SELECT host, pid, liveness, start, checked_at FROM lockwarden_pids")
            rows = cur.fetchall()
        elif pids:
            cur.execute("SELECT host, pid, liveness, start, checked_at FROM lockwarden_pids"
                        " WHERE pid = ANY(%s)", (sorted(pids),))
            rows = cur.fetchall()
        for host, pid, liveness, start, checked in rows:
            snap.pids[(host, int(pid))] = PidReport(host, int(pid), liveness,
                                                    None if start is None else float(start),
                                                    _aware(checked))
        if locks:  # the verdict as text: decoding 50,000 of them would cost seconds
            cur.execute("SELECT host, path, state, liveness, pid, holder, verdict::text,"
                        " updated_at FROM lockwarden_locks ORDER BY host, path")
            for host, path, state, liveness, pid, holder, verdict, updated in cur.fetchall():
                snap.locks.append(FleetLock(host, path, state, liveness, pid, holder, verdict,
                                            _aware(updated)))
    return snap


def _aware(dt: datetime) -> datetime:
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip() or None
    except OSError:
        return None


def _version() -> str:
    from core import __version__

    return f"lockwarden {__version__} on {socket.gethostname()}"
