"""The fleet's "Done when" faults (docs/fleet.md, "Faults" and "Set-up") against a real
PostgreSQL:

- a real ``lockwarden agent`` across the database stopped and started again: it says so once
  when publishing starts failing and once when it is back, its watcher goes on meanwhile, and
  its first publication after the restart republishes everything -- locks added, changed and
  removed while the database was away -- in the rows and in ``list --fleet --json``;
- a publishing role cannot write another host's rows by any statement (not only through the
  publisher): locks, PIDs, the heartbeat, the pre-encoded listing, nor the owner column; nor
  claim a host name nobody bound, nor bind one, nor date its heartbeat in the future.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.fleet import (
    FLEET_ENV,
    Procs,
    dsn,
    init_fleet,
    make_role,
    pg_ctl,
)
from tests.support.servers import PG_PASSWORD, PgServer, start_pg

pytestmark = pytest.mark.slow  # real lock servers (started once a session) and processes

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (pip install psycopg)")


def _lock(path: Path, pid: int) -> None:
    path.write_text(f"pid={pid}\ntimestamp={int(time.time())}\n")


def _rows(pg: PgServer, host: str) -> dict[str, int | None]:
    """``{path: pid}`` of the host's published locks."""
    with psycopg.connect(**pg.conninfo(), autocommit=True) as conn:
        return {path: pid for path, pid in conn.execute(
            "SELECT path, pid FROM lockwarden_locks WHERE host = %s", (host,)).fetchall()}


def _until_rows(pg: PgServer, host: str, want: dict[str, int | None], agent: Any) -> None:
    """Wait for the host's rows to be ``want``, each NOTIFY of the agent a look."""
    from core.fleet.schema import CHANNEL

    with psycopg.connect(**pg.conninfo(), autocommit=True) as conn:
        conn.execute(f"LISTEN {CHANNEL}")
        deadline = time.monotonic() + 30
        while True:
            have = conn.execute("SELECT to_regclass('lockwarden_locks') IS NOT NULL"
                                ).fetchone()
            if have and have[0] and _rows(pg, host) == want:
                return
            assert time.monotonic() < deadline, (_rows(pg, host), want)
            assert agent.poll() is None, agent.communicate()
            for _n in conn.notifies(timeout=1.0, stop_after=1):
                pass


def test_the_agent_across_a_database_restart_republishes_everything(
        fleet_procs: Procs, tmp_path: Path) -> None:
    pg = start_pg()
    try:
        with psycopg.connect(**pg.conninfo(), autocommit=True) as admin:
            init_fleet(admin, {"fleet-agent": "lw"})
        watched = tmp_path / "locks"
        watched.mkdir()
        cfg = tmp_path / "agent.toml"
        cfg.write_text(f'[[watch]]\npath = "{watched}"\n\n[fleet]\ndsn = "{dsn(pg)}"\n'
                       'password_env = "LOCKWARDEN_FLEET_PW"\nhost = "fleet-agent"\n'
                       "interval = 0.5\n")
        one, two, gone = watched / "one.lock", watched / "two.lock", watched / "gone.lock"
        _lock(one, 4001)
        _lock(gone, 4002)
        agent = fleet_procs.start([sys.executable, "-m", "core", "agent", "--config", str(cfg)])
        stderr: queue.Queue[str] = queue.Queue()
        assert agent.stderr is not None
        err = agent.stderr

        def read() -> None:
            for line in err:
                stderr.put(line)
        threading.Thread(target=read, daemon=True).start()
        _until_rows(pg, "fleet-agent", {str(one): 4001, str(gone): 4002}, agent)

        pg_ctl(pg, "-m", "immediate", "-w", "stop")
        failing = stderr.get(timeout=20)
        while "publishing" in failing:  # the start-up note
            failing = stderr.get(timeout=20)
        assert "retrying" in failing and PG_PASSWORD not in failing, failing
        _lock(two, 4003)  # while the database is away: added, changed, removed
        _lock(one, 4004)
        gone.unlink()
        time.sleep(2.0)  # several failing heartbeats pass: nothing to wait on but the clock

        opts = f"-k {pg.sockdir} -p {pg.port} -c listen_addresses=127.0.0.1 -c fsync=off"
        pg_ctl(pg, "-l", os.path.join(pg.sockdir, "pg.log"), "-w", "-o", opts, "start")
        back = stderr.get(timeout=30)
        assert "is back" in back, back  # said once failing, once back: nothing in between
        _until_rows(pg, "fleet-agent", {str(one): 4004, str(two): 4003}, agent)

        out = subprocess.run([sys.executable, "-m", "core", "list", "--fleet", "--config",
                              str(cfg), "--json"], capture_output=True, text=True, env=FLEET_ENV,
                             timeout=60, check=False)
        assert out.returncode == 0, out.stderr
        assert [(r["host_published"], r["path"], r["pid"]) for r in json.loads(out.stdout)
                ] == [("fleet-agent", str(one), 4004), ("fleet-agent", str(two), 4003)]
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(30) == 0
        assert stderr.empty() or "retrying" not in stderr.get_nowait()
    finally:
        pg.stop()


def test_a_publishing_role_can_write_no_row_of_another_host(
        fresh_db: PgServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from core.config.model import FleetSpec
    from core.fleet.store import Publisher
    from core.verdicts.inspect import inspect

    admin = psycopg.connect(**fresh_db.conninfo(), autocommit=True)
    try:
        make_role(admin, "lw_pub_a")
        make_role(admin, "lw_pub_b")
        init_fleet(admin, {"a": "lw_pub_a", "b": "lw_pub_b"})
        monkeypatch.setenv("LOCKWARDEN_FLEET_PW", PG_PASSWORD)
        lock = tmp_path / "a.lock"
        _lock(lock, os.getpid())
        pub_a = Publisher(FleetSpec(dsn(fresh_db, "lw_pub_a"),
                                    password_env="LOCKWARDEN_FLEET_PW", host="a"))
        pub_a.publish([inspect(str(lock))])
        pub_a.close()

        def state() -> list[Any]:
            return [admin.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall()
                    for t in ("lockwarden_hosts", "lockwarden_locks", "lockwarden_pids")]
        before = state()
        as_b = psycopg.connect(**fresh_db.conninfo(user="lw_pub_b", password=PG_PASSWORD),
                               autocommit=True)
        try:
            refused = [
                ("INSERT INTO lockwarden_locks (host, path, state, liveness, reasons, verdict)"
                 " VALUES ('a', '/forged', 'stale', 'dead', '[]', '{}')"),
                "INSERT INTO lockwarden_pids (host, pid, alive, liveness) VALUES ('a', 1, false,"
                " 'dead')",
                "INSERT INTO lockwarden_hosts (host, interval_s, owner) VALUES ('c', 2,"
                " 'lw_pub_a')",  # a row owned by someone else
                "INSERT INTO lockwarden_hosts (host, interval_s) VALUES ('c', 2)",  # unbound
                "INSERT INTO lockwarden_host_roles VALUES ('c', 'lw_pub_b')",  # owner's only
                "UPDATE lockwarden_host_roles SET role = 'lw_pub_b'",
            ]
            for sql in refused:
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    as_b.execute(sql)
            for sql in ("UPDATE lockwarden_locks SET state = 'stale' WHERE host = 'a'",
                        "DELETE FROM lockwarden_locks WHERE host = 'a'",
                        "UPDATE lockwarden_pids SET alive = false WHERE host = 'a'",
                        "DELETE FROM lockwarden_pids WHERE host = 'a'",
                        "UPDATE lockwarden_hosts SET locks_json = '', heartbeat_at = now()"
                        " - interval '1 day' WHERE host = 'a'",
                        "UPDATE lockwarden_hosts SET owner = 'lw_pub_b' WHERE host = 'a'",
                        "DELETE FROM lockwarden_hosts WHERE host = 'a'"):
                assert as_b.execute(sql).rowcount == 0, sql  # a's rows are not b's to see
            as_b.execute("INSERT INTO lockwarden_hosts (host, interval_s) VALUES ('b', 2)")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):  # nor to give away
                as_b.execute("UPDATE lockwarden_hosts SET owner = 'lw_pub_a' WHERE host = 'b'")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):  # never silent
                as_b.execute("UPDATE lockwarden_hosts SET heartbeat_at = now()"
                             " + interval '1 year' WHERE host = 'b'")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):  # not a JSON object
                as_b.execute("INSERT INTO lockwarden_locks (host, path, state, liveness,"
                             " reasons, verdict) VALUES ('b', '/x', 'held', 'alive', '[]',"
                             " '[1]')")
            owned = as_b.execute("SELECT count(*) FROM pg_tables WHERE tableowner ="
                                 " current_user").fetchone()
            assert owned == (0,)  # no publishing role owns a table
        finally:
            as_b.close()
        after = state()
        assert after[0][0] == before[0][0] and after[1:] == before[1:]  # a's rows untouched
        assert [h[0] for h in after[0]] == ["a", "b"]
    finally:
        for name in ("lw_pub_a", "lw_pub_b"):
            admin.execute("DROP OWNED BY " + name)
            admin.execute("DROP ROLE IF EXISTS " + name)
        admin.close()
