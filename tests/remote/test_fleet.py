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
from pathlib import Path
from typing import Any

import pytest

from core.config.model import FleetSpec
from core.fleet.judge import judge_with_fleet
from core.fleet.schema import CHANNEL
from core.fleet.store import FleetError, Publisher, connect, read_snapshot
from core.record import State
from core.verdicts.inspect import inspect
from tests.support.fleet import (
    FLEET_ENV,
    HOLDER,
    Procs,
    dsn,
    fleet_config,
    init_fleet,
    make_role,
    on_host,
    pg_ctl,
)
from tests.support.servers import PG_PASSWORD, PgServer, start_pg

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux") or os.geteuid() != 0
                       or shutil.which("unshare") is None,
                       reason="hosts are simulated with UTS namespaces (unshare -u, as root)"),
]


def _status(host: str, lock: Path, cfg: Path) -> dict[str, Any]:
    out = subprocess.run(on_host(host, sys.executable, "-m", "core", "status", str(lock),
                                  "--config", str(cfg), "--json"),
                         capture_output=True, text=True, env=FLEET_ENV, timeout=60, check=False)
    assert out.returncode in (0, 1), out.stderr
    return dict(json.loads(out.stdout))


def _codes(status: dict[str, Any]) -> list[str]:
    return [r["code"] for r in status["reasons"]]


def _wait_notify(conn: Any, host: str, timeout: float) -> None:
    """Block until a NOTIFY of ``host`` arrives on ``conn`` (which LISTENs)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for n in conn.notifies(timeout=max(0.05, deadline - time.monotonic()), stop_after=1):
            if n.payload == host:
                return
    raise AssertionError(f"no NOTIFY from {host} within {timeout} s")


def test_a_holder_killed_on_host_b_is_stale_on_host_a_within_5_s(
        fresh_db: PgServer, fleet_procs: Procs, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    lock = shared / "deploy.lock"
    cfg_a = fleet_config(tmp_path / "a.toml", fresh_db, shared)
    cfg_b = fleet_config(tmp_path / "b.toml", fresh_db, shared)
    import psycopg

    listener = psycopg.connect(**fresh_db.conninfo(), autocommit=True)
    try:
        agent_b = fleet_procs.start(on_host("fleet-b", sys.executable, "-m", "core", "agent",
                                       "--config", str(cfg_b)))
        holder = fleet_procs.start(on_host("fleet-b", sys.executable, "-c", HOLDER, str(lock)))
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
        out = subprocess.run(on_host("fleet-a", sys.executable, "-m", "core", "list",
                                      "--fleet", "--config", str(cfg_a), "--json"),
                             capture_output=True, text=True, env=FLEET_ENV, timeout=60, check=False)
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


def test_without_a_fleet_the_same_lock_stays_held(tmp_path: Path, fleet_procs: Procs) -> None:
    """The baseline the fleet improves on: a dead holder of another host is not knowable."""
    lock = tmp_path / "x.lock"
    holder = fleet_procs.start(on_host("fleet-b", sys.executable, "-c", HOLDER, str(lock)))
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait(10)
    st = inspect(str(lock))
    assert st.state is State.HELD and st.liveness.value == "remote"


def test_a_publishing_role_cannot_write_another_hosts_rows(
        fresh_db: PgServer, monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    admin = psycopg.connect(**fresh_db.conninfo(), autocommit=True)
    try:
        make_role(admin, "lw_pub_a")
        make_role(admin, "lw_pub_b")
        init_fleet(admin, {"a": "lw_pub_a", "b": "lw_pub_b"})
        monkeypatch.setenv("LOCKWARDEN_FLEET_PW", PG_PASSWORD)
        spec_a = FleetSpec(dsn(fresh_db, "lw_pub_a"), password_env="LOCKWARDEN_FLEET_PW", host="a")
        pub_a = Publisher(spec_a)
        pub_a.publish([])
        pub_a.close()
        spec_b_as_a = FleetSpec(dsn(fresh_db, "lw_pub_b"), password_env="LOCKWARDEN_FLEET_PW",
                                host="a")
        pub_b = Publisher(spec_b_as_a)
        with pytest.raises(FleetError) as err:
            pub_b.publish([])
        assert err.value.kind == "refused" and "fleet init --bind a=ROLE" in str(err.value)
        pub_b.close()
        # nor a host name nobody bound -- the first to come does not get it
        spec_c = FleetSpec(dsn(fresh_db, "lw_pub_b"), password_env="LOCKWARDEN_FLEET_PW",
                           host="c")
        pub_c = Publisher(spec_c)
        with pytest.raises(FleetError) as err:
            pub_c.publish([])
        assert err.value.kind == "refused"
        pub_c.close()
        with admin.cursor() as cur:
            cur.execute("SELECT host, owner FROM lockwarden_hosts ORDER BY host")
            assert cur.fetchall() == [("a", "lw_pub_a")]
        spec_b = FleetSpec(dsn(fresh_db, "lw_pub_b"), password_env="LOCKWARDEN_FLEET_PW", host="b")
        pub = Publisher(spec_b)
        pub.publish([])  # its own host: fine
        pub.close()
    finally:
        for name in ("lw_pub_a", "lw_pub_b"):
            admin.execute("DROP OWNED BY " + name)
            admin.execute("DROP ROLE IF EXISTS " + name)
        admin.close()


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
        spec = FleetSpec(dsn(pg), password_env="LOCKWARDEN_FLEET_PW", host="fleet-db-test")
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
            pg_ctl(pg, "-m", "immediate", "-w", "stop")
            (watched / "two.lock").write_text(f"pid={os.getpid()}\ntimestamp={int(time.time())}\n")
            assert added["two.lock"].wait(10)  # the local monitor goes on without the database
            with pytest.raises(FleetError) as err:
                pub.publish(w.snapshot())
            assert err.value.kind == "unreachable" and "lw-secret" not in str(err.value)
            assert {os.path.basename(s.path) for s in w.snapshot()} == {"one.lock", "two.lock"}
            opts = (f"-k {pg.sockdir} -p {pg.port} -c listen_addresses=127.0.0.1 -c fsync=off")
            pg_ctl(pg, "-l", os.path.join(pg.sockdir, "pg.log"), "-w", "-o", opts, "start")
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
