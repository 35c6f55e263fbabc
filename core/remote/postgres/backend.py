"""PostgreSQL locks: session and transaction advisory locks (``pg_advisory_lock`` and friends)
and Liquibase's ``DATABASECHANGELOGLOCK`` row, read with psycopg 3 (:class:`PostgresSource`).

Rules (one read-only query over ``pg_locks`` and ``pg_stat_activity``; an advisory lock is
never stale and its age unknown; keys, tokens and what ``pid``/``host`` name; force release is
``pg_terminate_backend`` of each holder still holding the key under the same backend start,
needing ``pg_signal_backend`` else ``permission_denied``; the Liquibase row judged like another
tool's lock, reset by one conditional ``UPDATE``): docs/remote.md, "PostgreSQL" and "What a
release does"; docs/specs/distributed-locks.md, "PostgreSQL advisory locks".

The listing queries and how their rows become verdicts are :mod:`core.remote.postgres.rows`;
keys and tokens :mod:`core.remote.postgres.keys`.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from core.record import LockStatus, State
from core.remote.base import (
    ReleaseOutcome,
    RemoteError,
    RemoteErrorKind,
    RemoteSource,
    audit_remote,
    bounded,
    url_host,
)
from core.remote.deadline import DEFAULT_DEADLINE_S
from core.remote.postgres.keys import (
    advisory_key,
    liquibase_token,
    lockedby_ip,
    parse_advisory_key,
    parse_holders,
)
from core.remote.postgres.rows import (
    ADVISORY,
    LIQUIBASE,
    LIQUIBASE_SQL,
    LIQUIBASE_TABLE,
    LOCKS_SQL,
    advisory_status,
    liquibase_status,
)
from core.stale_policy import DEFAULT_POLICY, StalePolicy

try:
    import psycopg
except ImportError:  # pragma: no cover - exercised only without the extra
    psycopg = None  # type: ignore[assignment]

CONFIRM_TIMEOUT = 5.0
"""Seconds a force release waits for ``pg_locks`` to show the terminated holders gone."""

_TERMINATE_SQL = """
SELECT a.pid, pg_terminate_backend(a.pid)
FROM pg_stat_activity a
WHERE a.pid = %(pid)s AND a.backend_start = %(start)s
  AND EXISTS (SELECT 1 FROM pg_locks l
              WHERE l.pid = a.pid AND l.locktype = 'advisory' AND l.granted
                AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                AND l.classid = %(classid)s::oid AND l.objid = %(objid)s::oid
                AND l.objsubid = %(sub)s)
"""
_STILL_HELD_SQL = """
SELECT count(*) FROM pg_locks l
WHERE l.locktype = 'advisory' AND l.granted AND l.pid = ANY(%(pids)s)
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND l.classid = %(classid)s::oid AND l.objid = %(objid)s::oid AND l.objsubid = %(sub)s
"""

def _need_driver(url: str) -> None:
    if psycopg is None:
        raise RemoteError(
            "psycopg is not installed: pip install 'lockwarden[postgres]'",
            kind=RemoteErrorKind.NO_DRIVER, url=url)


class PostgresSource(RemoteSource):
    """Advisory locks and the Liquibase lock row of one PostgreSQL database.

    Args:
        host: server name or address, or a unix socket directory.
        port: TCP port (also names the unix socket).
        dbname: the database whose locks are listed (advisory locks are per database).
        user, password: credentials; ``None`` lets libpq use its defaults (``~/.pgpass``).
        connect_timeout: seconds to wait for the connection (libpq ``connect_timeout``).
        policy: the stale policy (its limit for ``liquibase`` ages the Liquibase row).
        liquibase: look for a ``databasechangeloglock`` table too.
        deadline: seconds one operation may take in all (docs/remote.md, "Deadline").

    The monitor role needs ``pg_read_all_stats`` to see other roles' state; force needs
    ``pg_signal_backend`` (or membership of the holder's role).
    """

    scheme = "postgres"

    def __init__(
        self,
        host: str = "localhost",
        port: int = 5432,
        dbname: str = "postgres",
        *,
        user: str | None = None,
        password: str | None = None,
        connect_timeout: float = 5.0,
        policy: StalePolicy = DEFAULT_POLICY,
        liquibase: bool = True,
        deadline: float = DEFAULT_DEADLINE_S,
    ) -> None:
        super().__init__(f"postgres://{url_host(host)}:{port}/{dbname}", policy=policy,
                         deadline=deadline)
        self._kwargs: dict[str, Any] = {
            "host": host, "port": port, "dbname": dbname, "user": user, "password": password,
            "connect_timeout": max(1, round(connect_timeout)),
            "application_name": "lockwarden", "autocommit": True,
            # a half-open connection (a VPN drop, a resume on another network) must fail, not
            # block the poller for ever: server-side statement timeout, TCP keepalives
            "options": f"-c statement_timeout={max(1000, round(connect_timeout * 2000))}",
            "keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5,
            "keepalives_count": 2,
        }
        self.liquibase = liquibase
        self._conn: Any = None
        # LockRecord.host of an advisory lock: where its PID (a backend) runs, i.e. the server;
        # None (this host, as for lock files) for a unix socket directory
        self._server_host: str | None = None if host.startswith("/") else host

    def describe(self) -> str:
        """``postgres://host:port/db (advisory locks, Liquibase lock table)``."""
        what = "advisory locks" + (", Liquibase lock table" if self.liquibase else "")
        return f"{self.base_url} ({what})"

    def close(self) -> None:
        """Close the connection (a later call opens a new one)."""
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn = None

    def cut_connection(self) -> None:
        """Shut down libpq's socket (the deadline passed; core.remote.deadline): the
        blocked wait in the worker returns at once. Never raises."""
        conn = self._conn
        try:
            fd = conn.pgconn.socket if conn is not None and not conn.closed else -1
        except Exception:  # psycopg.OperationalError: no socket (any more)
            fd = -1
        self.sockets.cut((fd,) if fd >= 0 else ())

    # -- connection -----------------------------------------------------------------------

    def _connection(self) -> Any:
        _need_driver(self.base_url)
        if self._conn is not None and not self._conn.closed:
            return self._conn
        kw = {k: v for k, v in self._kwargs.items() if v is not None}
        try:
            self._conn = psycopg.connect(**kw)
        except psycopg.Error as exc:
            err = self._error(exc, "cannot connect to")
            if err.kind in (RemoteErrorKind.UNREACHABLE, RemoteErrorKind.AUTH_FAILED):
                err = self._database_missing(kw, err)
            raise err from exc
        return self._conn

    def _database_missing(self, kw: dict[str, Any], err: RemoteError) -> RemoteError:
        """A failed connection carries no SQLSTATE (libpq gives none for a FATAL at
        start-up), so "database does not exist" looked like a dead server. Ask the server:
        connect with the same credentials to its maintenance database and look the database
        up in ``pg_database``. Missing: ``no_database``; present: the role may not connect to
        it (``CONNECT`` privilege, pg_hba.conf): ``permission_denied``; the probe fails too:
        ``err`` as it was."""
        dbname = str(kw["dbname"])
        probe_kw = {**kw, "dbname": "template1" if dbname == "postgres" else "postgres",
                    "connect_timeout": min(2, int(kw.get("connect_timeout", 2)))}
        try:
            with psycopg.connect(**probe_kw) as probe:
                row = probe.execute("SELECT count(*) FROM pg_database WHERE datname = %(d)s",
                                    {"d": dbname}).fetchone()
        except psycopg.Error:
            return err
        if row is not None and row[0] == 0:
            return RemoteError(f"cannot connect to {self.base_url}: the server has no database "
                               f"{dbname!r}", kind=RemoteErrorKind.NO_DATABASE,
                               url=self.base_url, detail=err.detail)
        return RemoteError(f"cannot connect to {self.base_url}: the database exists, but this "
                           "role may not connect to it (CONNECT privilege or pg_hba.conf)",
                           kind=RemoteErrorKind.PERMISSION_DENIED, url=self.base_url,
                           detail=err.detail)

    def _error(self, exc: Exception, doing: str) -> RemoteError:
        """A :class:`RemoteError` for a psycopg error, kind chosen from data: the SQLSTATE, or
        for a failed connection libpq's ``needs_password``/``used_password`` flags (a failed
        connection carries no SQLSTATE)."""
        sqlstate = getattr(exc, "sqlstate", None)
        pgconn = getattr(exc, "pgconn", None)
        detail = str(exc).strip()
        if sqlstate == "42501":
            kind = RemoteErrorKind.PERMISSION_DENIED
        elif sqlstate in ("28P01", "28000") or (
                pgconn is not None and sqlstate is None
                and (pgconn.needs_password or pgconn.used_password)):
            kind = RemoteErrorKind.AUTH_FAILED
        elif sqlstate is None or isinstance(exc, psycopg.OperationalError):
            kind = RemoteErrorKind.UNREACHABLE
        else:
            kind = RemoteErrorKind.QUERY_FAILED
        if kind is not RemoteErrorKind.QUERY_FAILED:
            self.close()
        words = {
            RemoteErrorKind.AUTH_FAILED: "the server refused the credentials",
            RemoteErrorKind.UNREACHABLE: "no connection",
            RemoteErrorKind.PERMISSION_DENIED: "permission denied",
            RemoteErrorKind.QUERY_FAILED: "the server answered with an error",
        }[kind]
        return RemoteError(f"{doing} {self.base_url}: {words}: {detail}", kind=kind,
                           url=self.base_url, detail=detail, code=sqlstate)

    def _rows(self, sql: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        conn = self._connection()
        try:
            return list(conn.execute(sql, params).fetchall())
        except psycopg.Error as exc:
            raise self._error(exc, "query on") from exc

    # -- listing --------------------------------------------------------------------------

    @bounded("list")
    def list_locks(self) -> list[LockStatus]:
        """Every advisory lock of the database (one verdict per key, waiters counted) and the
        Liquibase lock row when it is locked (see the module docstring for the rules).

        Raises:
            RemoteError: ``no_driver``, ``unreachable``, ``auth_failed``, ``query_failed``.
        """
        rows = self._rows(LOCKS_SQL)
        groups: dict[tuple[int, int, int], list[tuple[Any, ...]]] = {}
        for row in rows:
            groups.setdefault((row[0], row[1], row[2]), []).append(row)
        out: list[LockStatus] = []
        for key, grp in groups.items():
            status = advisory_status(key, grp, path_of=self.path_of,
                                     server_host=self._server_host,
                                     dbname=self._kwargs["dbname"], policy=self.policy)
            if status is not None:
                out.append(status)
        if self.liquibase:
            out.extend(self._liquibase())
        return out

    def _liquibase(self) -> list[LockStatus]:
        exists = self._rows("SELECT to_regclass(%(t)s) IS NOT NULL", {"t": LIQUIBASE_TABLE})
        if not exists or not exists[0][0]:
            return []
        out: list[LockStatus] = []
        for row in self._liquibase_rows():
            out.append(liquibase_status(row, path_of=self.path_of, policy=self.policy))
        return out

    def _liquibase_rows(self) -> list[tuple[Any, ...]]:
        """Locked rows, each with the count of sessions from the IP its LOCKEDBY names (the
        query is run per distinct IP: usually one row)."""
        plain = self._rows(f"SELECT id, lockedby FROM {LIQUIBASE_TABLE} WHERE locked")
        ips = {lockedby_ip(r[1]) for r in plain}
        rows: dict[int, tuple[Any, ...]] = {}
        for ip in ips:
            for r in self._rows(LIQUIBASE_SQL, {"ip": ip}):
                if lockedby_ip(r[3]) == ip:
                    rows[r[0]] = r
        return [rows[k] for k in sorted(rows)]

    # -- release --------------------------------------------------------------------------

    @bounded("release")
    def release(
        self, lock_key: str, seen_token: str, *, force: bool = False, reason: str | None = None
    ) -> ReleaseOutcome:
        """Release the advisory lock or Liquibase row ``lock_key`` while it still carries
        ``seen_token`` (see the module docstring). Advisory locks are never stale, so they
        need ``force`` (``pg_terminate_backend``); a Liquibase row without force only when
        stale. Audited in the per-user log (``force_release``/``release``, or
        ``release_refused``).

        Raises:
            RemoteError: ``refused``, ``changed``, ``permission_denied`` (force needs
                ``pg_signal_backend``), ``bad_key``, connection kinds.
        """
        key = self.key_of(lock_key)
        path = self.path_of(key)
        current = {s.path: s for s in self.list_locks()}.get(path)
        if key.startswith("liquibase/"):
            return self._release_liquibase(key, path, current, seen_token, force, reason)
        parsed = parse_advisory_key(key)
        if parsed is None:
            raise RemoteError(f"{path}: not an advisory lock or Liquibase key",
                              kind=RemoteErrorKind.BAD_KEY, url=path)
        if current is None:
            return self._gone(path, seen_token, force, reason, ADVISORY)
        if not force:
            self.refuse_unforced(current)
        return self._terminate(path, parsed, current, seen_token, reason)

    def _gone(self, path: str, token: str, force: bool, reason: str | None, fmt: str
              ) -> ReleaseOutcome:
        op = "force_release" if force else "release"
        audit_remote(path, op, result="gone", details={"token": token, "reason": reason,
                                                       "note": "already released"}, format=fmt)
        return ReleaseOutcome(path, token, False, "gone", 0.0)

    def _changed(self, path: str, current: LockStatus, token: str, op: str,
                 reason: str | None) -> RemoteError:
        fmt = current.record.format if current.record else None
        audit_remote(path, op, result="changed", details={
            "token": token, "reason": reason, "holder": current.to_dict(),
            "note": "the lock carries another token than the one seen: nothing was changed"},
            format=fmt)
        return RemoteError(f"{path} changed hands since it was seen: nothing was released",
                           kind=RemoteErrorKind.CHANGED, url=path, status=current)

    def _terminate(self, path: str, key: tuple[int, int, int], current: LockStatus,
                   token: str, reason: str | None) -> ReleaseOutcome:
        seen = parse_holders(token)
        if seen is None:
            raise RemoteError(f"{path}: {token!r} is not an advisory lock token",
                              kind=RemoteErrorKind.BAD_KEY, url=path)
        rec = current.record
        if rec is None or parse_holders(rec.token or "") != seen:
            raise self._changed(path, current, token, "force_release", reason)
        classid, objid, sub = key
        t0 = time.monotonic()
        ended: list[int] = []
        try:
            for pid, start in seen:
                for row in self._rows(_TERMINATE_SQL, {"pid": pid, "start": start,
                                                       "classid": classid, "objid": objid,
                                                       "sub": sub}):
                    if row[1]:
                        ended.append(row[0])
        except RemoteError as exc:
            audit_remote(path, "force_release", result="error", details={
                "token": token, "reason": reason, "holder": current.to_dict(),
                "error": exc.kind.value, "code": exc.code, "detail": exc.detail}, format=ADVISORY)
            if exc.kind is RemoteErrorKind.PERMISSION_DENIED:
                raise RemoteError(
                    f"{path}: permission denied to end the holder's session: the monitoring "
                    "role needs pg_signal_backend (or membership of the holder's role); "
                    "nothing was changed", kind=exc.kind, url=path, detail=exc.detail,
                    code=exc.code, status=current) from exc
            raise
        confirmed = self._wait_gone(ended, key)
        seconds = time.monotonic() - t0
        details = {"token": token, "reason": reason, "displaced": current.to_dict(),
                   "terminated": ended, "confirmed": confirmed, "seconds": round(seconds, 6),
                   "note": "pg_terminate_backend ends the whole session: its open transaction "
                           "rolls back"}
        result = "ok" if ended else "gone"
        audit_remote(path, "force_release", result=result, details=details, format=ADVISORY)
        return ReleaseOutcome(path, token, bool(ended), "terminated" if ended else "gone",
                              seconds, details)

    def _wait_gone(self, pids: list[int], key: tuple[int, int, int]) -> bool:
        """True once ``pg_locks`` shows none of ``pids`` holding ``key`` (polled: PostgreSQL
        has no event for it), False after :data:`CONFIRM_TIMEOUT` seconds."""
        if not pids:
            return True
        deadline = time.monotonic() + CONFIRM_TIMEOUT
        params = {"pids": pids, "classid": key[0], "objid": key[1], "sub": key[2]}
        pause = 0.0005
        while True:
            if not self._rows(_STILL_HELD_SQL, params)[0][0]:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 0.02)

    def _release_liquibase(self, key: str, path: str, current: LockStatus | None, token: str,
                           force: bool, reason: str | None) -> ReleaseOutcome:
        op = "force_release" if force else "release"
        try:
            ident = int(key.split("/", 1)[1])
            granted_iso, lockedby = token.split("|", 1)
            granted = datetime.fromisoformat(granted_iso) if granted_iso else None
        except (ValueError, IndexError):
            raise RemoteError(f"{path}: {token!r} is not a Liquibase lock token",
                              kind=RemoteErrorKind.BAD_KEY, url=path) from None
        if current is None:
            return self._gone(path, token, force, reason, LIQUIBASE)
        if current.record is None or current.record.token != token:
            raise self._changed(path, current, token, op, reason)
        if not force:
            self.refuse_unforced(current)
        t0 = time.monotonic()
        conn = self._connection()
        try:
            cur = conn.execute(
                f"UPDATE {LIQUIBASE_TABLE} SET locked = FALSE, lockgranted = NULL, "
                "lockedby = NULL WHERE id = %(id)s AND locked "
                "AND lockedby IS NOT DISTINCT FROM %(by)s "
                "AND lockgranted IS NOT DISTINCT FROM %(granted)s",
                {"id": ident, "by": lockedby or None, "granted": granted})
            count = cur.rowcount
        except psycopg.Error as exc:
            err = self._error(exc, "update on")
            audit_remote(path, op, result="error", details={
                "token": token, "reason": reason, "error": err.kind.value, "code": err.code,
                "detail": err.detail}, format=LIQUIBASE)
            raise err from exc
        seconds = time.monotonic() - t0
        if count != 1:
            now = {s.path: s for s in self.list_locks()}.get(path)
            if now is None:
                return self._gone(path, token, force, reason, LIQUIBASE)
            raise self._changed(path, now, token, op, reason)
        details = {"token": token, "reason": reason, "displaced": current.to_dict(),
                   "seconds": round(seconds, 6)}
        audit_remote(path, op, result="ok", details=details, format=LIQUIBASE)
        return ReleaseOutcome(path, token, True, "reset", seconds, details)


__all__ = ["ADVISORY", "LIQUIBASE", "PostgresSource", "State", "advisory_key",
           "liquibase_token", "parse_advisory_key", "parse_holders"]
