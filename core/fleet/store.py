"""Publishing to and reading from the fleet database (PostgreSQL through psycopg 3;
docs/fleet.md).

:class:`Publisher` is one host's writer: one connection, one transaction per publication
that sends only what changed since the last one (every row again after a reconnect, so a
database that was down catches up), a heartbeat, and ``NOTIFY`` on :data:`~core.fleet.schema.
CHANNEL` so readers see changes without polling. :func:`read_snapshot` is a reader's view:
every host's heartbeat, the PIDs they report on and, on request, their locks.

Every operation goes through a :class:`core.fleet.link.Link`, so it ends within the fleet's
deadline whatever the database does (docs/fleet.md, "Deadline"). A reader trusts a host's rows
only when the role bound to that host name wrote them (docs/fleet.md, "Trust"). Errors become
:class:`~core.fleet.errors.FleetError` with a kind and a message that names the database
without its password; nothing here ever stops the local monitor (callers report and go on).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from core.config.model import FleetSpec
from core.config.servers import redact_url
from core.fleet.errors import FleetError, fleet_error
from core.fleet.link import Link, close_quietly, connect
from core.fleet.schema import BINDINGS, CHANNEL, check_schema

if TYPE_CHECKING:  # imported where used: `list --fleet` needs only connect() (docs/fleet.md)
    from core.record import LockStatus

__all__ = ["FleetError", "FleetLock", "FleetSnapshot", "HostReport", "PidReport", "Publisher",
           "close_quietly", "connect", "fleet_error", "pid_reports", "read_snapshot"]

T = TypeVar("T")

FUTURE_SLACK_S = 5.0
"""Seconds a heartbeat may lie in the database's future before its host is not trusted (the
row-level security of schema 3 refuses any; an older row may hold one)."""

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
    untrusted: dict[str, str] = field(default_factory=dict)
    """Hosts whose rows are not trusted (docs/fleet.md, "Trust"): name -> why (``unbound``,
    ``other_role``, ``future_heartbeat``); their reports are in no other field."""

    def host(self, name: str) -> HostReport | None:
        """The report of host ``name`` (matched as :func:`core.verdicts.liveness.same_host`
        does: case-insensitive, a short name matches its fully qualified one)."""
        found = _match(self.hosts, name)
        return None if found is None else found[1]

    def distrust(self, name: str) -> tuple[str, str] | None:
        """``(host, why)`` when the rows published as ``name`` (matched as :meth:`host`) are
        not trusted, else None."""
        return _match(self.untrusted, name)

    def pid(self, host: str, pid: int) -> PidReport | None:
        """What ``host`` reports on ``pid``, or None."""
        report = self.host(host)
        return None if report is None else self.pids.get((report.host, pid))


def _match(table: dict[str, T], name: str) -> tuple[str, T] | None:
    """``(name, table[name])``, else the entry whose key names the same host
    (:func:`core.verdicts.liveness.same_host`), else None."""
    if name in table:
        return name, table[name]
    from core.verdicts.liveness import same_host

    for host, value in table.items():
        if same_host(name, host):
            return host, value
    return None


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
    :meth:`publish`; :meth:`abort` may be called from any thread or a signal handler.

    The tables must exist at the current version (the database's owner creates them:
    ``lockwarden fleet init``, :mod:`core.fleet.setup`), and the host name ``spec.host`` must be
    bound to the role that connects (docs/fleet.md, "Set-up"): else ``no_schema`` or
    ``refused``.

    Args:
        spec: the ``[fleet]`` table.
        boot_id: this boot's identity (Linux ``/proc/sys/kernel/random/boot_id``); default read.
    """

    def __init__(self, spec: FleetSpec, *, boot_id: str | None = None) -> None:
        self.spec = spec
        self.boot_id = boot_id if boot_id is not None else _boot_id()
        where = redact_url(spec.dsn)
        self._link = Link(spec, name="lockwarden-fleet-publish",
                          setup=lambda conn: check_schema(conn, where))
        self._locks: dict[str, tuple[Any, ...]] = {}
        # the verdict each published row was encoded from: the watcher hands the same
        # (immutable) LockStatus back while a lock does not change, so it is not encoded again
        self._encoded: dict[str, tuple[LockStatus, tuple[Any, ...]]] = {}
        self._pids: dict[int, tuple[bool, str, float | None]] = {}
        self._published_on: Any = None  # the connection of the last publication

    def close(self) -> None:
        """Close the connection (the host's rows stay: its heartbeat stops, it turns silent)."""
        self._link.close()
        self._published_on = None

    def abort(self) -> None:
        """Stop for good: a publication under way ends at once (``stopped``), and so does
        every later one. Safe in a signal handler (:meth:`core.fleet.link.Link.abort`)."""
        self._link.abort()

    def publish(self, statuses: Iterable[LockStatus]) -> int:
        """Send the heartbeat and every change in ``statuses`` (this host's whole inventory:
        a lock missing from it is deleted) in one transaction, then ``NOTIFY`` when anything
        changed, all within the fleet's deadline. Returns the number of rows written or
        deleted.

        Raises:
            FleetError: the database failed, refused (this host name is not bound to the
                role: the message says how to bind it), or did not answer in time; the next
                call reconnects and sends everything.
        """
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
        old_locks, old_pids, last = self._locks, self._pids, self._published_on

        def send(conn: Any) -> tuple[int, Any]:
            fresh = conn is not last  # (re)connected: every row again, leftovers deleted
            with conn.transaction(), conn.cursor() as cur:
                cur.execute(
                    "INSERT INTO lockwarden_hosts (host, boot_id, heartbeat_at, interval_s,"
                    " version) VALUES (%s, %s, now(), %s, %s) ON CONFLICT (host) DO UPDATE SET"
                    " boot_id = EXCLUDED.boot_id, heartbeat_at = now(),"
                    " interval_s = EXCLUDED.interval_s, version = EXCLUDED.version,"
                    " owner = current_user",
                    (host, self.boot_id, self.spec.interval, _version()))
                written, touched = _send(cur, host, locks, pids, {} if fresh else old_locks,
                                         {} if fresh else old_pids, fresh)
                if fresh or touched:  # readers' copy (docs/fleet.md, "Bounds"), which the
                    # database's trigger rebuilds from the rows (core.fleet.schema)
                    cur.execute("UPDATE lockwarden_hosts SET locks_json = NULL"
                                " WHERE host = %s", (host,))
                    cur.execute("SELECT pg_notify(%s, %s)", (CHANNEL, host))
            return written, conn

        try:
            written, conn = self._link.run("publish", send)
        except FleetError as exc:
            self._published_on = None
            if exc.kind == "refused":
                raise FleetError("refused", f"{exc}; host name {host!r} must be bound to this "
                                 "role by the database's owner: lockwarden fleet init --bind "
                                 f"{host}=ROLE (docs/fleet.md, \"Set-up\")") from None
            raise
        self._locks, self._pids, self._published_on = locks, pids, conn
        return written


def _send(cur: Any, host: str, locks: dict[str, tuple[Any, ...]],
          pids: dict[int, tuple[bool, str, float | None]], old_locks: dict[str, tuple[Any, ...]],
          old_pids: dict[int, tuple[bool, str, float | None]], fresh: bool) -> tuple[int, bool]:
    """The lock and PID rows that changed since ``old_locks``/``old_pids`` (all, and every
    leftover deleted, when ``fresh``), inside the caller's transaction; returns how many, and
    whether lock rows were written or deleted."""
    changed = [row for path, row in locks.items() if old_locks.get(path) != row]
    if fresh:
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
            " reasons = EXCLUDED.reasons, verdict = EXCLUDED.verdict, updated_at = now(),"
            " owner = current_user", changed)
    if gone_paths:
        cur.execute("DELETE FROM lockwarden_locks WHERE host = %s AND path = ANY(%s)",
                    (host, gone_paths))
    new_pids = [(host, pid, *v) for pid, v in pids.items() if old_pids.get(pid) != v]
    if new_pids:
        cur.executemany(
            "INSERT INTO lockwarden_pids (host, pid, alive, liveness, start, checked_at)"
            " VALUES (%s, %s, %s, %s, %s, now()) ON CONFLICT (host, pid) DO UPDATE SET"
            " alive = EXCLUDED.alive, liveness = EXCLUDED.liveness,"
            " start = EXCLUDED.start, checked_at = now(), owner = current_user", new_pids)
    if gone_pids:
        cur.execute("DELETE FROM lockwarden_pids WHERE host = %s AND pid = ANY(%s)",
                    (host, gone_pids))
    touched = bool(changed or gone_paths)
    return written + len(changed) + len(gone_paths) + len(new_pids) + len(gone_pids), touched


_TRUSTED = (f"JOIN {BINDINGS} b ON b.host = {{t}}.host AND b.role = {{t}}.owner")
"""SQL join keeping only the rows of table alias ``t`` written by the role bound to their host
(docs/fleet.md, "Trust")."""


def read_snapshot(conn: Any, *, locks: bool = False, pids: Collection[int] | None = None,
                  where: str = "") -> FleetSnapshot:
    """Every host's heartbeat and PID reports (and, with ``locks``, every published lock)
    through ``conn`` (a psycopg connection: call it inside :meth:`core.fleet.link.Link.run`,
    which bounds it). Only rows written by the role bound to their host are taken; hosts whose
    rows are not are in :attr:`FleetSnapshot.untrusted` (docs/fleet.md, "Trust"). ``pids``:
    only the reports on these PIDs (of any host; none for an empty collection): what a reader
    judging a few locks needs, instead of every host's every PID. A database where nothing was
    set up yet (no tables) is an empty snapshot. ``where``: the database named in messages
    (without its password).

    Raises:
        FleetError: ``no_schema``: tables older than this Lockwarden reads.
        psycopg.Error: the database failed (callers map it with
            :func:`~core.fleet.errors.fleet_error`).
    """
    import psycopg

    snap = FleetSnapshot()
    with conn.cursor() as cur:
        try:
            cur.execute("SELECT h.host, h.boot_id, h.heartbeat_at, h.interval_s,"
                        " extract(epoch FROM now() - h.heartbeat_at), h.version,"
                        " CASE WHEN b.role IS NULL THEN 'unbound'"
                        " WHEN b.role <> h.owner THEN 'other_role'"
                        " WHEN h.heartbeat_at > now() + make_interval(secs => %s)"
                        " THEN 'future_heartbeat' END"
                        f" FROM lockwarden_hosts h LEFT JOIN {BINDINGS} b ON b.host = h.host",
                        (FUTURE_SLACK_S,))
        except psycopg.errors.UndefinedTable:  # nothing set up, or an older schema
            check_schema(conn, where, missing_ok=True)
            return snap
        for host, boot_id, at, interval, age, version, why in cur.fetchall():
            if why is not None:
                snap.untrusted[host] = why
                continue
            snap.hosts[host] = HostReport(host, boot_id, _aware(at), float(interval),
                                          max(0.0, float(age)), version)
        rows: list[Any] = []
        select = ("SELECT p.host, p.pid, p.liveness, p.start, p.checked_at FROM lockwarden_pids p"
                  f" {_TRUSTED.format(t='p')}")
        if pids is None:
            cur.execute(select)
            rows = cur.fetchall()
        elif pids:
            cur.execute(select + " WHERE p.pid = ANY(%s)", (sorted(pids),))
            rows = cur.fetchall()
        for host, pid, liveness, start, checked in rows:
            if host not in snap.hosts:
                continue
            snap.pids[(host, int(pid))] = PidReport(host, int(pid), liveness,
                                                    None if start is None else float(start),
                                                    _aware(checked))
        if locks:  # the verdict as text: decoding 50,000 of them would cost seconds
            cur.execute("SELECT l.host, l.path, l.state, l.liveness, l.pid, l.holder,"
                        " l.verdict::text, l.updated_at FROM lockwarden_locks l"
                        f" {_TRUSTED.format(t='l')} ORDER BY l.host, l.path")
            for host, path, state, liveness, pid, holder, verdict, updated in cur.fetchall():
                if host in snap.hosts:
                    snap.locks.append(FleetLock(host, path, state, liveness, pid, holder,
                                                verdict, _aware(updated)))
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
