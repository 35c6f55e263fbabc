"""The PostgreSQL backend against a real server (initdb + pg_ctl on a temp directory), with
locks taken by real clients (psycopg sessions, psql): listing holder and waiters, a killed or
terminated holder, token-checked force release that wakes a real waiter, the Liquibase row,
errors as data (docs/remote.md, "PostgreSQL")."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (pip install psycopg)")

from core import audit  # noqa: E402
from core.reasons import Code  # noqa: E402
from core.record import Liveness, State  # noqa: E402
from core.remote import RemoteError, RemoteErrorKind  # noqa: E402
from core.remote.postgres.backend import (  # noqa: E402
    PostgresSource,
    advisory_key,
    parse_advisory_key,
)
from tests.support.servers import PG_PASSWORD, PgServer, free_port  # noqa: E402

pytestmark = pytest.mark.slow  # real lock servers (started once a session) and processes


def connect(pg: PgServer, app: str = "test", **kw: Any) -> Any:
    return psycopg.connect(**pg.conninfo(application_name=app, **kw), autocommit=True)


@pytest.fixture
def src(pg_server: PgServer) -> Iterator[PostgresSource]:
    s = PostgresSource(pg_server.sockdir, pg_server.port, "postgres", user="lw")
    yield s
    s.close()


@pytest.fixture
def sessions(pg_server: PgServer) -> Iterator[list[Any]]:
    """Connections a test opens; closed (their locks released) after it."""
    opened: list[Any] = []
    yield opened
    for c in opened:
        c.close()


def by_path(source: PostgresSource) -> dict[str, Any]:
    return {s.path: s for s in source.list_locks()}


def codes(status: Any) -> list[Code]:
    return [r.code for r in status.reasons]


def wait_until(cond: Any, what: str, timeout: float = 5.0) -> None:
    """Poll ``cond`` (PostgreSQL has no event for lock changes: docs/remote.md)."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.002)


def test_advisory_locks_are_listed_with_their_session(src, pg_server, sessions) -> None:
    h = connect(pg_server, "nightly-report")
    sessions.append(h)
    pid = h.info.backend_pid
    h.execute("SELECT pg_advisory_lock(42), pg_advisory_lock(-5), "
              "pg_advisory_lock_shared(7, -99)")
    locks = by_path(src)
    st = locks[src.path_of("advisory/42")]
    assert src.path_of("advisory/42") == (
        f"postgres://{pg_server.sockdir.replace('/', '%2F')}:{pg_server.port}/postgres"
        "#advisory/42")
    assert st.state is State.HELD and st.liveness is Liveness.ALIVE
    assert st.record.pid == pid and st.record.tag == "nightly-report"
    assert st.record.host is None  # the backend runs on the server: here, over a local socket
    assert st.record.token.startswith(f"{pid}@")
    assert st.record.metadata["holders"][0]["user"] == "lw"
    assert codes(st)[0] is Code.PG_SESSION and st.reasons[0].get("state") == "idle"
    assert codes(st)[-1] is Code.AGE_UNKNOWN  # PostgreSQL does not record when
    assert src.path_of("advisory/-5") in locks and src.path_of("advisory/7:-99") in locks
    assert locks[src.path_of("advisory/7:-99")].record.metadata["mode"] == "ShareLock"


def test_keys_round_trip() -> None:
    for key in ("advisory/0", "advisory/42", "advisory/-5", f"advisory/{2**63 - 1}",
                f"advisory/{-(2**63)}", "advisory/7:-99", "advisory/-1:0"):
        parsed = parse_advisory_key(key)
        assert parsed is not None and advisory_key(*parsed) == key
    assert parse_advisory_key("advisory/x") is None
    assert parse_advisory_key(f"advisory/{2**63}") is None


def test_a_killed_psql_holder_disappears(src, pg_server) -> None:
    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("psql is not installed")
    proc = subprocess.Popen(
        [psql, "-X", "-At", "-h", pg_server.sockdir, "-p", str(pg_server.port), "-U", "lw",
         "-d", "postgres"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("SELECT pg_advisory_lock(77), 'locked';\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip().endswith("locked")
    st = by_path(src)[src.path_of("advisory/77")]
    assert st.state is State.HELD and st.record.tag == "psql"
    proc.kill()
    proc.wait()
    proc.stdin.close()
    proc.stdout.close()
    wait_until(lambda: src.path_of("advisory/77") not in by_path(src),
               "the killed holder's lock is still listed")


def test_a_terminated_session_takes_its_locks_along(src, pg_server, sessions) -> None:
    h = connect(pg_server, "doomed")
    sessions.append(h)
    h.execute("SELECT pg_advisory_lock(78)")
    with connect(pg_server, "admin") as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (h.info.backend_pid,))
    wait_until(lambda: src.path_of("advisory/78") not in by_path(src), "still listed")


def test_force_release_wakes_a_real_waiter(src, pg_server, sessions, own_audit_log,
                                           capsys) -> None:
    holder, waiter = connect(pg_server, "deployer"), connect(pg_server, "second")
    sessions += [holder, waiter]
    holder.execute("SELECT pg_advisory_lock(4242)")
    granted = threading.Event()
    granted_at: list[float] = []

    def wait() -> None:
        waiter.execute("SELECT pg_advisory_lock(4242)")
        granted_at.append(time.monotonic())
        granted.set()

    th = threading.Thread(target=wait, daemon=True)
    th.start()
    path = src.path_of("advisory/4242")
    wait_until(lambda: by_path(src)[path].record.metadata["waiters"] == 1, "no waiter seen")
    st = by_path(src)[path]
    assert Code.WAITERS in codes(st) and st.record.pid == holder.info.backend_pid
    with pytest.raises(RemoteError) as err:  # a live session's lock: force only
        src.release(path, st.record.token)
    assert err.value.kind is RemoteErrorKind.REFUSED
    t0 = time.monotonic()
    out = src.release(path, st.record.token, force=True, reason="deploy hung")
    assert granted.wait(5), "the waiter was never granted the lock"
    took = granted_at[0] - t0
    th.join(5)
    assert out.released and out.action == "terminated"
    assert out.details["terminated"] == [holder.info.backend_pid] and out.details["confirmed"]
    now = by_path(src)[path]
    assert now.record.pid == waiter.info.backend_pid
    with pytest.raises(psycopg.OperationalError):  # the holder's next statement fails
        holder.execute("SELECT 1")
    ops = [(e.operation, e.result) for e in audit.read(str(own_audit_log))]
    assert ops == [("release_refused", "refused"), ("force_release", "ok")]
    with capsys.disabled():
        print(f"\npg force release -> blocked pg_advisory_lock returned {took * 1e3:.2f} ms "
              "after release() was called (it reads pg_locks first); terminate + pg_locks "
              f"confirmation {out.seconds * 1e3:.2f} ms")


def test_an_old_token_never_ends_the_new_holder(src, pg_server, sessions) -> None:
    a, b = connect(pg_server, "first"), connect(pg_server, "second")
    sessions += [a, b]
    a.execute("SELECT pg_advisory_lock(900)")
    path = src.path_of("advisory/900")
    seen = by_path(src)[path].record.token
    a.execute("SELECT pg_advisory_unlock(900)")
    b.execute("SELECT pg_advisory_lock(900)")
    with pytest.raises(RemoteError) as err:
        src.release(path, seen, force=True)
    assert err.value.kind is RemoteErrorKind.CHANGED
    assert by_path(src)[path].record.pid == b.info.backend_pid
    assert a.execute("SELECT 1").fetchone() == (1,)  # nobody was terminated
    b.execute("SELECT pg_advisory_unlock(900)")
    out = src.release(path, seen, force=True)
    assert out.released is False and out.action == "gone"


def test_force_without_pg_signal_backend_says_so(src, pg_server, sessions) -> None:
    with connect(pg_server, "setup") as admin:
        admin.execute("DROP ROLE IF EXISTS mon")
        admin.execute("CREATE ROLE mon LOGIN PASSWORD 'mon' IN ROLE pg_read_all_stats")
    h = connect(pg_server, "precious")
    sessions.append(h)
    h.execute("SELECT pg_advisory_lock(901)")
    with PostgresSource("127.0.0.1", pg_server.port, "postgres", user="mon",
                        password="mon") as mon:
        st = by_path(mon)[mon.path_of("advisory/901")]
        assert st.record.pid == h.info.backend_pid and st.record.host == "127.0.0.1"
        with pytest.raises(RemoteError) as err:
            mon.release(st.path, st.record.token, force=True)
    assert err.value.kind is RemoteErrorKind.PERMISSION_DENIED and err.value.code == "42501"
    assert "pg_signal_backend" in str(err.value)
    assert h.execute("SELECT 1").fetchone() == (1,)


def test_wrong_password_and_unreachable_server_are_clear_errors(pg_server) -> None:
    for password in ("wrong", None):
        with pytest.raises(RemoteError) as err:
            PostgresSource("127.0.0.1", pg_server.port, "postgres", user="lw",
                           password=password).list_locks()
        assert err.value.kind is RemoteErrorKind.AUTH_FAILED, password
    ok = PostgresSource("127.0.0.1", pg_server.port, "postgres", user="lw", password=PG_PASSWORD)
    assert isinstance(ok.list_locks(), list)
    ok.close()
    with pytest.raises(RemoteError) as err:
        PostgresSource("127.0.0.1", free_port(), "postgres", user="lw", password="x",
                       connect_timeout=2).list_locks()
    assert err.value.kind is RemoteErrorKind.UNREACHABLE and err.value.detail


@pytest.fixture
def liquibase_db(pg_server: PgServer) -> Iterator[PostgresSource]:
    """A database with Liquibase's lock table (as Liquibase creates it, unquoted names)."""
    with connect(pg_server, "setup") as admin:
        admin.execute("DROP DATABASE IF EXISTS lq")
        admin.execute("CREATE DATABASE lq")
    with connect(pg_server, "setup", dbname="lq") as c:
        c.execute("CREATE TABLE DATABASECHANGELOGLOCK (ID INTEGER NOT NULL PRIMARY KEY, "
                  "LOCKED BOOLEAN NOT NULL, LOCKGRANTED TIMESTAMP, LOCKEDBY VARCHAR(255))")
        c.execute("INSERT INTO DATABASECHANGELOGLOCK VALUES (1, FALSE, NULL, NULL)")
    s = PostgresSource(pg_server.sockdir, pg_server.port, "lq", user="lw")
    yield s
    s.close()


def _lock_row(pg: PgServer, ago: timedelta, by: str) -> None:
    with connect(pg, "liquibase", dbname="lq") as c:
        c.execute("UPDATE databasechangeloglock SET locked = TRUE, "
                  "lockgranted = now()::timestamp - %s, lockedby = %s WHERE id = 1", (ago, by))


def test_liquibase_row_left_by_a_dead_deploy_is_stale(liquibase_db, pg_server) -> None:
    src = liquibase_db
    assert not [s for s in src.list_locks() if "liquibase" in s.path]  # unlocked: nothing
    _lock_row(pg_server, timedelta(hours=3), "buildhost (10.9.8.7)")
    st = by_path(src)[src.path_of("liquibase/1")]
    assert st.state is State.STALE and st.record.format == "liquibase"
    assert st.record.host == "buildhost" and st.record.holder == "buildhost (10.9.8.7)"
    assert codes(st) == [Code.NO_SESSION_FROM_CLIENT, Code.OLDER_THAN_STALE_AFTER]
    assert 3 * 3600 - 60 < st.age_s < 3 * 3600 + 60
    out = src.release(st.path, st.record.token, reason="deploy crashed")  # stale: no force
    assert out.released and out.action == "reset"
    with connect(pg_server, "check", dbname="lq") as c:
        assert c.execute("SELECT locked, lockedby FROM databasechangeloglock").fetchone() == (
            False, None)


def test_liquibase_row_taken_again_is_not_reset(liquibase_db, pg_server) -> None:
    src = liquibase_db
    _lock_row(pg_server, timedelta(hours=3), "buildhost (10.9.8.7)")
    seen = by_path(src)[src.path_of("liquibase/1")].record.token
    _lock_row(pg_server, timedelta(seconds=1), "otherhost (10.9.8.8)")
    with pytest.raises(RemoteError) as err:
        src.release(src.path_of("liquibase/1"), seen, force=True)
    assert err.value.kind is RemoteErrorKind.CHANGED
    with connect(pg_server, "check", dbname="lq") as c:
        assert c.execute("SELECT locked, lockedby FROM databasechangeloglock").fetchone() == (
            True, "otherhost (10.9.8.8)")


def test_liquibase_row_whose_client_is_connected_is_held(liquibase_db, pg_server,
                                                         sessions) -> None:
    tcp = connect(pg_server, "liquibase-run", host="127.0.0.1", password=PG_PASSWORD)
    sessions.append(tcp)
    _lock_row(pg_server, timedelta(hours=3), "devbox (127.0.0.1)")
    st = by_path(liquibase_db)[liquibase_db.path_of("liquibase/1")]
    assert st.state is State.HELD and st.liveness is Liveness.ALIVE
    assert codes(st)[0] is Code.CLIENT_CONNECTED and st.reasons[0].get("sessions") == 1
    assert st.record.acquired_at < datetime.now(UTC) - timedelta(hours=2)


def test_flyway_and_rails_keys_are_named(src, pg_server, sessions) -> None:
    """The keys Flyway and Rails compute (docs/specs/distributed-locks.md, "Flyway", "Rails")
    are named in the lock's tag: Flyway's base plus Java's hashCode of
    ``flyway_schema_history``, Rails' MIGRATOR_SALT times the CRC-32 of the database name."""
    import zlib

    from core.remote.postgres.keys import FLYWAY_BASE, RAILS_MIGRATOR_SALT

    def java_hash(text: str) -> int:
        h = 0
        for ch in text:
            h = (31 * h + ord(ch)) & 0xFFFFFFFF
        return h - 2**32 if h >= 2**31 else h

    flyway = FLYWAY_BASE + java_hash("flyway_schema_history")
    rails = RAILS_MIGRATOR_SALT * zlib.crc32(b"postgres")
    h = connect(pg_server, "migrate")
    sessions.append(h)
    h.execute("SELECT pg_advisory_lock(%s), pg_advisory_lock(%s), pg_advisory_lock(1234)",
              (flyway, rails))
    found = by_path(src)
    tags = {p.rsplit("/", 1)[1]: s.record.tag for p, s in found.items()}
    assert tags[str(flyway)] == "Flyway migration (migrate)"
    assert tags[str(rails)] == "Rails migration (migrate)"
    assert tags["1234"] == "migrate"
