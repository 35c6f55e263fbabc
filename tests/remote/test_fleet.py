"""The fleet (docs/fleet.md) against a real PostgreSQL: hosts are processes in UTS namespaces of
their own (``unshare -u``, their own host names) sharing one directory, as on NFS.

- a holder on host B is SIGKILLed: host A judges its lock stale within 5 s (without the fleet:
  ``held`` until the stale age, 3,600 s);
- B's agent stops: A says B is silent and falls back to the age/TTL rules;
- ``list --fleet`` shows every host's locks with their publisher;
- a publishing role cannot write another host's rows, nor publish a host name not bound to it
  (row-level security; docs/fleet.md, "Trust");
- the database stopped and started again: publishing fails with a clear error, the local
  watcher never stops, and the next publication catches up.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.config.model import FleetSpec
from core.fleet.judge import judge_with_fleet
from core.fleet.schema import CHANNEL
from core.fleet.store import FleetError, Publisher, connect, read_snapshot
from core.record import State
from core.verdicts.inspect import inspect
from tests.support.fleet import drop_fleet, init_fleet
from tests.support.servers import PG_PASSWORD, PgServer, start_pg

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "LOCKWARDEN_FLEET_PW": PG_PASSWORD}

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or os.geteuid() != 0 or shutil.which("unshare") is None,
    reason="hosts are simulated with UTS namespaces (unshare -u, as root)")

HOLDER = ("import core, sys, time; core.Lock(sys.argv[1], tag='on b').acquire(); "
          "print('held', flush=True); time.sleep(600)")


def _dsn(pg: PgServer, user: str = "lw") -> str:
    return f"postgresql://{user}@127.0.0.1:{pg.port}/postgres"


def _config(path: Path, pg: PgServer, watched: Path, *, silent_after: float = 3.0) -> Path:
    path.write_text(f'[[watch]]\npath = "{watched}"\n\n[fleet]\ndsn = "{_dsn(pg)}"\n'
                    f'password_env = "LOCKWARDEN_FLEET_PW"\ninterval = 0.5\n'
                    f"silent_after = {silent_after}\n")
    return path


def _on_host(host: str, *argv: str) -> list[str]:
    return ["unshare", "-u", "sh", "-c", 'hostname "$0" && exec "$@"', host, *argv]


def _status(host: str, lock: Path, cfg: Path) -> dict[str, Any]:
    out = subprocess.run(_on_host(host, sys.executable, "-m", "core", "status", str(lock),
                                  "--config", str(cfg), "--json"),
                         capture_output=True, text=True, env=ENV, timeout=60, check=False)
    assert out.returncode in (0, 1), out.stderr
    return dict(json.loads(out.stdout))


def _codes(status: dict[str, Any]) -> list[str]:
    return [r["code"] for r in status["reasons"]]


HOSTS = {"fleet-a": "lw", "fleet-b": "lw"}
"""The host names of these tests, bound to the session server's superuser (docs/fleet.md,
"Set-up")."""


@pytest.fixture
def fresh_db(pg_server: PgServer) -> Iterator[PgServer]:
    """The session's server with the fleet set up afresh (``fleet init``, :data:`HOSTS`
    bound) and dropped after the test."""
    import psycopg

    with psycopg.connect(**pg_server.conninfo(), autocommit=True) as conn:
        drop_fleet(conn)
        init_fleet(conn, HOSTS)
    yield pg_server
    with psycopg.connect(**pg_server.conninfo(), autocommit=True) as conn:
        drop_fleet(conn)


class Procs:
    """Processes started by a test, SIGKILLed at its end."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, argv: list[str]) -> subprocess.Popen[str]:
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=ENV)
        self.procs.append(p)
        return p

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.communicate(timeout=30)


@pytest.fixture
def procs() -> Iterator[Procs]:
    p = Procs()
    yield p
    p.close()


def _wait_notify(conn: Any, host: str, timeout: float) -> None:
    """Block until a NOTIFY of ``host`` arrives on ``conn`` (which LISTENs)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for n in conn.notifies(timeout=max(0.05, deadline - time.monotonic()), stop_after=1):
            if n.payload == host:
                return
    raise AssertionError(f"no NOTIFY from {host} within {timeout} s")


def test_a_holder_killed_on_host_b_is_stale_on_host_a_within_5_s(
        fresh_db: PgServer, procs: Procs, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    lock = shared / "deploy.lock"
    cfg_a = _config(tmp_path / "a.toml", fresh_db, shared)
    cfg_b = _config(tmp_path / "b.toml", fresh_db, shared)
    import psycopg

    listener = psycopg.connect(**fresh_db.conninfo(), autocommit=True)
    try:
        agent_b = procs.start(_on_host("fleet-b", sys.executable, "-m", "core", "agent",
                                       "--config", str(cfg_b)))
        holder = procs.start(_on_host("fleet-b", sys.executable, "-c", HOLDER, str(lock)))
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert "host=fleet-b" in lock.read_text()
        listener.execute(f"LISTEN {CHANNEL}")
        snap_deadline = time.monotonic() + 30
        while True:  # B has published the holder's PID as alive
            snap = read_snapshot(listener)
            report = next((r for (h, _p), r in snap.pids.items() if h == "fleet-b"), None)
            if report is not None and report.liveness == "alive":
                break
            assert time.monotonic() < snap_deadline, snap
            _wait_notify(listener, "fleet-b", 10)

        held = _status("fleet-a", lock, cfg_a)
        # alive by B's report, or -- the "hosts" share one kernel here -- by the holder's pin
        assert held["state"] == "held" and held["liveness"] == "alive"
        assert {"fleet_report", "holder_pinned"} & set(_codes(held))

        killed = time.monotonic()
        holder.kill()
        holder.wait(10)
        while True:  # A's view after each of B's publications (judged here, no CLI start-up)
            _wait_notify(listener, "fleet-b", 10)
            seen = judge_with_fleet(inspect(str(lock)), read_snapshot(listener),
                                    silent_after=3.0)
            if seen.state is State.STALE:
                break
            assert time.monotonic() - killed < 20, seen
        took = time.monotonic() - killed
        assert took <= 5.0, f"host A saw the holder's death after {took:.2f} s"
        stale = _status("fleet-a", lock, cfg_a)  # and the command line on host A agrees
        assert stale["state"] == "stale" and stale["liveness"] == "dead"
        assert "fleet_report" in _codes(stale) and "ours_holder_dead" in _codes(stale)

        # list --fleet: B's lock, with its publisher
        out = subprocess.run(_on_host("fleet-a", sys.executable, "-m", "core", "list",
                                      "--fleet", "--config", str(cfg_a), "--json"),
                             capture_output=True, text=True, env=ENV, timeout=60, check=False)
        assert out.returncode == 0, out.stderr
        rows = json.loads(out.stdout)
        assert [(r["host_published"], r["path"], r["state"]) for r in rows] == [
            ("fleet-b", str(lock), "stale")]

        # B's agent stops: after the silence bound A says so and judges by age alone
        agent_b.send_signal(signal.SIGTERM)
        assert agent_b.wait(30) == 0, agent_b.communicate()
        silent_deadline = time.monotonic() + 20
        while True:
            silent = _status("fleet-a", lock, cfg_a)
            if "fleet_host_silent" in _codes(silent):
                break
            assert time.monotonic() < silent_deadline, silent
            time.sleep(0.5)  # silence is time passing: nothing to wait for but the clock
        assert silent["liveness"] == "remote" and silent["state"] == "held"  # 1 h rule
    finally:
        listener.close()


def test_without_a_fleet_the_same_lock_stays_held(tmp_path: Path, procs: Procs) -> None:
    """The baseline the fleet improves on: a dead holder of another host is not knowable."""
    lock = tmp_path / "x.lock"
    holder = procs.start(_on_host("fleet-b", sys.executable, "-c", HOLDER, str(lock)))
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait(10)
    st = inspect(str(lock))
    assert st.state is State.HELD and st.liveness.value == "remote"


def _role(conn: Any, name: str) -> None:
    """A login role ``name`` (password :data:`PG_PASSWORD`), created afresh; ``fleet init``
    grants it."""
    if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone():
        conn.execute(f"DROP OWNED BY {name}")
    conn.execute(f"DROP ROLE IF EXISTS {name}")
    conn.execute(f"CREATE ROLE {name} LOGIN PASSWORD '{PG_PASSWORD}'")


def test_a_publishing_role_cannot_write_another_hosts_rows(
        fresh_db: PgServer, monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    admin = psycopg.connect(**fresh_db.conninfo(), autocommit=True)
    try:
        _role(admin, "lw_pub_a")
        _role(admin, "lw_pub_b")
        init_fleet(admin, {"a": "lw_pub_a", "b": "lw_pub_b"})
        monkeypatch.setenv("LOCKWARDEN_FLEET_PW", PG_PASSWORD)
        spec_a = FleetSpec(_dsn(fresh_db, "lw_pub_a"), password_env="LOCKWARDEN_FLEET_PW", host="a")
        pub_a = Publisher(spec_a)
        pub_a.publish([])
        pub_a.close()
        spec_b_as_a = FleetSpec(_dsn(fresh_db, "lw_pub_b"), password_env="LOCKWARDEN_FLEET_PW",
                                host="a")
        pub_b = Publisher(spec_b_as_a)
        with pytest.raises(FleetError) as err:
            pub_b.publish([])
        assert err.value.kind == "refused" and "fleet init --bind a=ROLE" in str(err.value)
        pub_b.close()
        # nor a host name nobody bound -- the first to come does not get it
        spec_c = FleetSpec(_dsn(fresh_db, "lw_pub_b"), password_env="LOCKWARDEN_FLEET_PW",
                           host="c")
        pub_c = Publisher(spec_c)
        with pytest.raises(FleetError) as err:
            pub_c.publish([])
        assert err.value.kind == "refused"
        pub_c.close()
        with admin.cursor() as cur:
            cur.execute("SELECT host, owner FROM lockwarden_hosts ORDER BY host")
            assert cur.fetchall() == [("a", "lw_pub_a")]
        spec_b = FleetSpec(_dsn(fresh_db, "lw_pub_b"), password_env="LOCKWARDEN_FLEET_PW", host="b")
        pub = Publisher(spec_b)
        pub.publish([])  # its own host: fine
        pub.close()
    finally:
        for name in ("lw_pub_a", "lw_pub_b"):
            admin.execute("DROP OWNED BY " + name)
            admin.execute("DROP ROLE IF EXISTS " + name)
        admin.close()


def _pg_ctl(pg: PgServer, *args: str) -> None:
    subprocess.run([*pg.runas, pg.pg_ctl, "-D", pg.data, *args], capture_output=True,
                   timeout=120, check=True)


def test_the_database_stopped_and_started_again_loses_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from core.config.model import WatchSpec
    from core.watch.watcher import ChangeSet, Watcher

    pg = start_pg()
    added: dict[str, threading.Event] = {
        name: threading.Event() for name in ("one.lock", "two.lock")}

    def on_change(changes: ChangeSet) -> None:
        for st in changes.added:
            ev = added.get(os.path.basename(st.path))
            if ev is not None:
                ev.set()

    try:
        watched = tmp_path / "locks"
        watched.mkdir()
        monkeypatch.setenv("LOCKWARDEN_FLEET_PW", PG_PASSWORD)
        spec = FleetSpec(_dsn(pg), password_env="LOCKWARDEN_FLEET_PW", host="fleet-db-test")
        import psycopg

        with psycopg.connect(**pg.conninfo(), autocommit=True) as admin:
            init_fleet(admin, {"fleet-db-test": "lw"})
        w = Watcher([WatchSpec(str(watched))], on_change)
        w.start()
        pub = Publisher(spec)
        try:
            (watched / "one.lock").write_text(f"pid={os.getpid()}\ntimestamp={int(time.time())}\n")
            assert added["one.lock"].wait(10)
            assert pub.publish(w.snapshot()) >= 1
            _pg_ctl(pg, "-m", "immediate", "-w", "stop")
            (watched / "two.lock").write_text(f"pid={os.getpid()}\ntimestamp={int(time.time())}\n")
            assert added["two.lock"].wait(10)  # the local monitor goes on without the database
            with pytest.raises(FleetError) as err:
                pub.publish(w.snapshot())
            assert err.value.kind == "unreachable" and "lw-secret" not in str(err.value)
            assert {os.path.basename(s.path) for s in w.snapshot()} == {"one.lock", "two.lock"}
            opts = (f"-k {pg.sockdir} -p {pg.port} -c listen_addresses=127.0.0.1 -c fsync=off")
            _pg_ctl(pg, "-l", os.path.join(pg.sockdir, "pg.log"), "-w", "-o", opts, "start")
            pub.publish(w.snapshot())
            conn = connect(spec)
            try:
                snap = read_snapshot(conn, locks=True)
            finally:
                conn.close()
            assert sorted(os.path.basename(lk.path) for lk in snap.locks) == ["one.lock",
                                                                              "two.lock"]
        finally:
            pub.close()
            w.close()
    finally:
        pg.stop()
