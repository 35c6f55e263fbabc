"""What one publishing role can make the fleet's viewers believe, against a real PostgreSQL
(docs/fleet.md, "Trust" and "Bounds"): nothing about a host name not bound to it.

- rows of host ``fleet-c`` written by another role than the one bound to ``fleet-c`` (a claim
  left from before host names were bound, or a binding changed since) are not trusted:
  ``status`` keeps the local verdict and says why (``fleet_host_untrusted``), and ``list
  --fleet`` leaves the host out in one line; once ``fleet-c``'s own role publishes, its report
  judges, and a verdict drawn from it never advises a forced release on its strength alone;
- a role cannot store a part of ``list --fleet`` of its own (the database's trigger builds it
  from verdicts its policies checked), nor a huge verdict, nor one claiming another publisher;
  where the database cannot vouch (its trigger turned off by a superuser), ``list --fleet``
  checks each host's part: invalid JSON, a lock claiming another publisher, a part over the cap
  are each one problem line, and the output stays valid JSON with the other hosts' locks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.config.model import FleetSpec
from core.fleet.store import Publisher
from core.verdicts.inspect import inspect
from tests.support.fleet import drop_fleet, init_fleet
from tests.support.servers import PG_PASSWORD, PgServer

pytestmark = pytest.mark.slow  # real lock servers (started once a session) and processes

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (pip install psycopg)")

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "LOCKWARDEN_FLEET_PW": PG_PASSWORD}
ROLES = ("lw_trust_b", "lw_trust_c")


def _dsn(pg: PgServer, user: str = "lw") -> str:
    return f"postgresql://{user}@127.0.0.1:{pg.port}/postgres"


@pytest.fixture
def admin(pg_server: PgServer) -> Iterator[Any]:
    """A superuser connection; roles lw_trust_b (bound to fleet-b) and lw_trust_c (bound to
    nothing yet) exist; the fleet is set up afresh and dropped after."""
    conn = psycopg.connect(**pg_server.conninfo(), autocommit=True)
    drop_fleet(conn)
    for role in ROLES:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
            conn.execute(f"DROP OWNED BY {role}")
        conn.execute(f"DROP ROLE IF EXISTS {role}")
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{PG_PASSWORD}'")
    init_fleet(conn, {"fleet-b": "lw_trust_b"}, viewers=("lw_trust_c",))
    yield conn
    drop_fleet(conn)
    for role in ROLES:
        conn.execute(f"DROP OWNED BY {role}")
        conn.execute(f"DROP ROLE IF EXISTS {role}")
    conn.close()


def _cfg(tmp_path: Path, pg: PgServer) -> Path:
    cfg = tmp_path / "viewer.toml"
    cfg.write_text(f'[fleet]\ndsn = "{_dsn(pg, "lw_trust_c")}"\n'
                   'password_env = "LOCKWARDEN_FLEET_PW"\nhost = "fleet-a"\n'
                   "silent_after = 600\n")
    return cfg


def _lw(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "core", *args], capture_output=True, text=True,
                          timeout=60, check=False, cwd=ROOT, env=ENV)


def _publisher(pg: PgServer, role: str, host: str, monkeypatch: pytest.MonkeyPatch
               ) -> Publisher:
    monkeypatch.setenv("LOCKWARDEN_FLEET_PW", PG_PASSWORD)
    return Publisher(FleetSpec(_dsn(pg, role), password_env="LOCKWARDEN_FLEET_PW", host=host))


def _codes(status: dict[str, Any]) -> list[str]:
    return [r["code"] for r in status["reasons"]]


def test_a_host_is_judged_only_by_its_own_roles_report(
        admin: Any, pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lock = tmp_path / "deploy.lock"  # written by Lockwarden on fleet-c: stale once its holder
    lock.write_text(f"pid=4242\nhost=fleet-c\ntimestamp={int(time.time())}\n"  # is dead
                    "token=0123456789abcdef0123456789abcdef\n")
    # fleet-c claimed by lw_trust_b before host names were bound: its row says PID 4242 is dead
    with admin.transaction():
        admin.execute("INSERT INTO lockwarden_hosts (host, interval_s, owner, heartbeat_at)"
                      " VALUES ('fleet-c', 2, 'lw_trust_b', now())")
        admin.execute("INSERT INTO lockwarden_pids (host, pid, alive, liveness, owner)"
                      " VALUES ('fleet-c', 4242, false, 'dead', 'lw_trust_b')")
        admin.execute("INSERT INTO lockwarden_locks (host, path, state, liveness, reasons,"
                      " verdict, owner) VALUES ('fleet-c', '/c.lock', 'stale', 'dead', '[]',"
                      " '{\"path\": \"/c.lock\", \"state\": \"stale\", \"liveness\":"
                      " \"dead\"}', 'lw_trust_b')")
        admin.execute("UPDATE lockwarden_hosts SET locks_json = NULL WHERE host = 'fleet-c'")
    cfg = _cfg(tmp_path, pg_server)
    out = _lw("status", str(lock), "--config", str(cfg), "--json")
    seen = json.loads(out.stdout)
    assert (seen["state"], seen["liveness"]) == ("held", "remote"), seen  # the local verdict
    untrusted = [r for r in seen["reasons"] if r["code"] == "fleet_host_untrusted"]
    assert untrusted == [{"code": "fleet_host_untrusted", "host": "fleet-c", "why": "unbound",
                          "text": untrusted[0]["text"]}]
    listed = _lw("list", "--fleet", "--config", str(cfg), "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []
    assert "'fleet-c' left out: no role is bound to this host name" in listed.stderr

    # the owner binds fleet-c to its own role: lw_trust_b's old rows are still not trusted
    init_fleet(admin, {"fleet-c": "lw_trust_c"})
    seen = json.loads(_lw("status", str(lock), "--config", str(cfg), "--json").stdout)
    assert seen["state"] == "held" and [r["why"] for r in seen["reasons"]
                                        if r["code"] == "fleet_host_untrusted"] == ["other_role"]
    # ... nor can lw_trust_b write them any more; fleet-c's own agent publishes (it is not
    # refused), and its rows replace the claim
    as_b = psycopg.connect(**pg_server.conninfo(user="lw_trust_b", password=PG_PASSWORD),
                           autocommit=True)
    try:
        assert as_b.execute("UPDATE lockwarden_hosts SET heartbeat_at = now()"
                            " WHERE host = 'fleet-c'").rowcount == 0
    finally:
        as_b.close()
    pub_c = _publisher(pg_server, "lw_trust_c", "fleet-c", monkeypatch)
    try:
        pub_c.publish([])  # fleet-c watches nothing: it reports no PID
        seen = json.loads(_lw("status", str(lock), "--config", str(cfg), "--json").stdout)
        assert "fleet_pid_unreported" in _codes(seen) and seen["state"] == "held"
        with admin.transaction():  # fleet-c reports its PID dead (as its agent would)
            admin.execute("SET LOCAL ROLE lw_trust_c")
            admin.execute("INSERT INTO lockwarden_pids (host, pid, alive, liveness)"
                          " VALUES ('fleet-c', 4242, false, 'dead')")
        seen = json.loads(_lw("status", str(lock), "--config", str(cfg), "--json").stdout)
        assert seen["state"] == "stale" and "fleet_report" in _codes(seen)
        human = _lw("status", str(lock), "--config", str(cfg)).stdout
        action = [ln for ln in human.splitlines() if ln.startswith("safe action:")]
        assert action and "confirm on host fleet-c first" in action[0], human
        assert "release" not in action[0].split("first")[0]
    finally:
        pub_c.close()


def _set_locks_json(admin: Any, host: str, text: str) -> None:
    """Store ``text`` as ``host``'s part with the trigger turned off (a superuser's or the
    owner's doing: no publishing role can), as a damaged or foreign database might hold it;
    the trigger stays off, so the database no longer vouches for the parts."""
    with admin.transaction():
        admin.execute("ALTER TABLE lockwarden_hosts DISABLE TRIGGER lockwarden_locks_json")
        admin.execute("UPDATE lockwarden_hosts SET locks_json = %s WHERE host = %s",
                      (text, host))


def test_list_fleet_leaves_a_bad_host_out_and_stays_valid_json(
        admin: Any, pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    init_fleet(admin, {"fleet-c": "lw_trust_c"})
    good = tmp_path / "good.lock"
    good.write_text(f"pid={os.getpid()}\ntimestamp={int(time.time())}\n")
    pub_b = _publisher(pg_server, "lw_trust_b", "fleet-b", monkeypatch)
    pub_c = _publisher(pg_server, "lw_trust_c", "fleet-c", monkeypatch)
    cfg = _cfg(tmp_path, pg_server)
    try:
        pub_b.publish([inspect(str(good))])
        pub_c.publish([inspect(str(good))])
        assert [r["host_published"] for r in json.loads(
            _lw("list", "--fleet", "--config", str(cfg), "--json").stdout)] == ["fleet-b",
                                                                                 "fleet-c"]
        # a role cannot store a part of its own, nor a huge verdict
        as_c = psycopg.connect(**pg_server.conninfo(user="lw_trust_c", password=PG_PASSWORD),
                               autocommit=True)
        try:
            as_c.execute("UPDATE lockwarden_hosts SET locks_json = 'garbage'"
                         " WHERE host = 'fleet-c'")  # the trigger builds it from the rows
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                as_c.execute("INSERT INTO lockwarden_locks (host, path, state, liveness,"
                             " reasons, verdict) VALUES ('fleet-c', '/big', 'held', 'alive',"
                             " '[]', jsonb_build_object('path', '/big', 'state', 'held',"
                             " 'liveness', 'alive', 'tag', repeat('x', 300000)))")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):  # another publisher
                as_c.execute("INSERT INTO lockwarden_locks (host, path, state, liveness,"
                             " reasons, verdict) VALUES ('fleet-c', '/x', 'held', 'alive',"
                             " '[]', '{\"path\": \"/x\", \"state\": \"held\", \"liveness\":"
                             " \"alive\", \"host_published\": \"fleet-b\"}')")
        finally:
            as_c.close()
        out = _lw("list", "--fleet", "--config", str(cfg), "--json")
        assert len(json.loads(out.stdout)) == 2 and out.stderr == ""

        part = ('{"path": "/x", "state": "held", "liveness": "alive", "host_published": '
                '"fleet-b"\x01')
        for bad, why in (('{"path": "/x", "state": \x01', "not valid JSON"),
                         ('{"path": "/x", "state": "held", "pid": NaN\x01', "not valid JSON"),
                         (part, "a field that the listing adds"),
                         ('{"path": "/x", "state": "held"\x01,{"path": "/y", "state": "held",'
                          ' "z": {"a": 1\x01}', "another host as its publisher"),
                         ('{"path": "/x", "state": "gone"\x01', "unknown state"),
                         ('{"path": "/x", "state": "held"' + " " * (9 << 20) + "\x01",
                          "more than the 8,388,608 a host may")):
            _set_locks_json(admin, "fleet-c", bad)
            for argv in (["--json"], []):
                out = _lw("list", "--fleet", "--config", str(cfg), *argv)
                assert out.returncode == 0, out.stderr
                if argv:
                    rows = json.loads(out.stdout)  # valid JSON, the good host's locks
                    assert [r["host_published"] for r in rows] == ["fleet-b"], (why, rows)
                    assert out.stderr.count("\n") == 1 and "'fleet-c' left out" in out.stderr
                    assert why in out.stderr, (why, out.stderr)
                else:  # the table reads the rows, which the policies keep sound
                    assert "fleet-c" in out.stdout and out.stderr == ""
        admin.execute("ALTER TABLE lockwarden_hosts ENABLE TRIGGER lockwarden_locks_json")
        pub_c.publish([])  # the trigger builds fleet-c's part again: vouched for, printed
        out = _lw("list", "--fleet", "--config", str(cfg), "--json")
        assert [r["host_published"] for r in json.loads(out.stdout)] == ["fleet-b"]
        assert out.stderr == ""
    finally:
        pub_b.close()
        pub_c.close()
