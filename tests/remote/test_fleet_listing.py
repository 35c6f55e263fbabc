"""``lockwarden list --fleet`` against a real PostgreSQL (docs/fleet.md, "Bounds"): the JSON
that the database assembles from each host's pre-encoded locks is every published verdict plus
its host's fields, for paths that JSON must escape too; hosts whose locks are gone drop out;
a version-1 database is migrated with its rows (trusted once their host name is bound); and the
command imports no verdict machinery.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.config.model import FleetSpec
from core.fleet.schema import MIGRATIONS, migrate
from core.fleet.store import Publisher
from core.record import LockStatus
from core.verdicts.inspect import inspect
from tests.support.fleet import (
    FLEET_ENV,
    drop_fleet,
    dsn,
    init_fleet,
)
from tests.support.servers import PG_PASSWORD, PgServer

pytestmark = pytest.mark.slow  # real lock servers (started once a session) and processes

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (pip install psycopg)")

TRICKY = ['plain.lock', 'quote".lock', 'back\\slash.lock', 'tab\there.lock',
          'new\nline.lock', 'ünïcødé €.lock', 'ctl\x01.lock']


@pytest.fixture
def db(pg_server: PgServer) -> Iterator[Any]:
    """An admin connection to the session's server, the fleet tables dropped around the test."""
    conn = psycopg.connect(**pg_server.conninfo(), autocommit=True)
    drop_fleet(conn)
    yield conn
    drop_fleet(conn)
    conn.close()


def _locks(directory: Path, names: list[str]) -> list[LockStatus]:
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for name in names:
        path = directory / name
        path.write_text(f"pid={os.getpid()}\ntimestamp={int(time.time())}\n")
        out.append(inspect(str(path)))
    return out


def _publish(pg: PgServer, host: str, statuses: list[LockStatus],
             monkeypatch: pytest.MonkeyPatch) -> Publisher:
    monkeypatch.setenv("LOCKWARDEN_FLEET_PW", PG_PASSWORD)
    with psycopg.connect(**pg.conninfo(), autocommit=True) as admin:  # as the owner does
        init_fleet(admin, {host: "lw"})
    pub = Publisher(FleetSpec(dsn(pg), password_env="LOCKWARDEN_FLEET_PW", host=host),
                    boot_id="test")
    pub.publish(statuses)
    return pub


def _cli(pg: PgServer, tmp_path: Path, *argv: str, code: str = ""
         ) -> subprocess.CompletedProcess[str]:
    cfg = tmp_path / "fleet.toml"
    cfg.write_text(f'[fleet]\ndsn = "{dsn(pg)}"\npassword_env = "LOCKWARDEN_FLEET_PW"\n'
                   "silent_after = 600\n")
    run = code or "import sys; from core.cli.main import main; sys.exit(main(sys.argv[1:]))"
    out = subprocess.run([sys.executable, "-c", run, "list", "--fleet", "--config", str(cfg),
                          *argv], capture_output=True, text=True, env=FLEET_ENV, timeout=60,
                         check=False)
    assert out.returncode == 0, out.stderr
    return out


def _expected(host: str, s: LockStatus) -> dict[str, Any]:
    d = json.loads(json.dumps(s.to_dict(), default=str))
    d.pop("age_s", None)
    d.pop("reasons", None)
    return {**d, "host_published": host, "host_silent": False}


def test_list_fleet_json_is_every_published_verdict_with_its_host(
        pg_server: PgServer, db: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a = _locks(tmp_path / "a", TRICKY)
    b = _locks(tmp_path / "b", ["one.lock", "two.lock"])
    pubs = [_publish(pg_server, "host-b", b, monkeypatch),
            _publish(pg_server, "host-a", a, monkeypatch),
            _publish(pg_server, "host-empty", [], monkeypatch)]
    try:
        rows = json.loads(_cli(pg_server, tmp_path, "--json").stdout)
        for row in rows:
            assert 0 <= row.pop("heartbeat_age_s") < 600
        want = sorted([_expected("host-a", s) for s in a] + [_expected("host-b", s) for s in b],
                      key=lambda r: (r["host_published"].encode(), r["path"].encode()))
        assert rows == want
        assert {r["path"] for r in rows} >= {str(tmp_path / "a" / n) for n in TRICKY}
        table = _cli(pg_server, tmp_path).stdout.splitlines()  # one line a lock, escaped
        assert len(table) == 1 + len(a) + len(b)
        assert {line.rsplit("  ", 1)[-1] for line in table[1:len(a) + 1]} == {
            str(tmp_path / "a" / n).replace("\n", "\\n").replace("\t", "\\t")
            .replace("\x01", "\\x01") for n in TRICKY}

        # host-a's locks are all gone, one of host-b's changes: the listing follows at once
        pubs[1].publish([])
        (tmp_path / "b" / "two.lock").write_text("pid=1\ntimestamp=1\n")
        b2 = [b[0], inspect(str(tmp_path / "b" / "two.lock"))]
        pubs[0].publish(b2)
        rows = json.loads(_cli(pg_server, tmp_path, "--json").stdout)
        assert [(r["host_published"], r["path"], r["pid"]) for r in rows] == [
            ("host-b", s.path, s.record.pid if s.record else None) for s in b2]

        text = _cli(pg_server, tmp_path).stdout.splitlines()
        assert text[0].split() == ["HOST", "STATE", "PID", "LIVENESS", "HOLDER", "PATH"]
        assert [line.split()[0] for line in text[1:]] == ["host-b", "host-b"]
    finally:
        for pub in pubs:
            pub.close()


def test_a_version_1_database_is_migrated_with_its_rows(
        pg_server: PgServer, db: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with db.transaction():  # as a first-round publisher left it
        db.execute("CREATE TABLE lockwarden_schema (version integer NOT NULL)")
        db.execute(MIGRATIONS[0])
        db.execute("INSERT INTO lockwarden_schema VALUES (1)")
    statuses = _locks(tmp_path / "v1", ["old.lock"])
    db.execute("INSERT INTO lockwarden_hosts (host, interval_s) VALUES ('old-host', 2)")
    db.execute("INSERT INTO lockwarden_locks (host, path, state, liveness, reasons, verdict)"
               " VALUES ('old-host', %s, 'held', 'alive', '[]', %s::jsonb)",
               (statuses[0].path, json.dumps({"path": statuses[0].path, "state": "held"})))
    assert migrate(db) == len(MIGRATIONS) == 3
    # no host name is bound yet (the first publisher's claim is not carried over): left out
    out = _cli(pg_server, tmp_path, "--json")
    assert json.loads(out.stdout) == []
    assert "'old-host' left out: no role is bound to this host name" in out.stderr
    init_fleet(db, {"old-host": "lw"})  # the owner binds it: its rows are trusted again
    rows = json.loads(_cli(pg_server, tmp_path, "--json").stdout)
    assert [(r["host_published"], r["path"], r["state"]) for r in rows] == [
        ("old-host", statuses[0].path, "held")]


def test_list_fleet_imports_no_verdict_machinery(
        pg_server: PgServer, db: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Start-up is most of `list --fleet --json`'s time: it reads no lock file, so it imports
    neither the verdicts, nor the records, nor the lock servers' sources, nor psutil."""
    pub = _publish(pg_server, "host-a", _locks(tmp_path / "a", ["x.lock"]), monkeypatch)
    pub.close()
    code = ("import sys; from core.cli.main import main; rc = main(sys.argv[1:]); "
            "print(sorted(m for m in sys.modules if m.startswith(('core.verdicts', "
            "'core.remote', 'psutil', 'core.fleet.judge', 'core.record'))), file=sys.stderr);"
            " sys.exit(rc)")
    for argv in (["--json"], []):
        out = _cli(pg_server, tmp_path, *argv, code=code)
        assert out.stderr.strip().splitlines()[-1] == "[]", out.stderr


def test_a_snapshot_reads_only_the_pids_asked_for(
        pg_server: PgServer, db: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`watch`, `status` and `list` ask for the PIDs their locks name, not the whole fleet's."""
    from core.fleet.store import connect, read_snapshot

    here = socket.gethostname()
    lock = tmp_path / "mine.lock"
    lock.write_text(f"pid={os.getpid()}\nhost={here}\ntimestamp={int(time.time())}\n")
    pub = _publish(pg_server, here, [inspect(str(lock))], monkeypatch)
    pub.close()
    conn = connect(FleetSpec(dsn(pg_server), password_env="LOCKWARDEN_FLEET_PW"))
    try:
        assert set(read_snapshot(conn).pids) == {(here, os.getpid())}
        assert set(read_snapshot(conn, pids={os.getpid()}).pids) == {(here, os.getpid())}
        only_hosts = read_snapshot(conn, pids=())
        assert only_hosts.pids == {} and set(only_hosts.hosts) == {here}
        assert read_snapshot(conn, pids={os.getpid() + 1}).pids == {}
    finally:
        conn.close()


def test_before_any_host_published_the_fleet_is_empty_not_failing(
        pg_server: PgServer, db: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No tables yet (the first publisher creates them): nothing published, no error."""
    from core.fleet.store import connect, read_snapshot

    monkeypatch.setenv("LOCKWARDEN_FLEET_PW", PG_PASSWORD)
    assert _cli(pg_server, tmp_path, "--json").stdout == "[]\n"
    assert _cli(pg_server, tmp_path).stdout == "(no locks published; 0 host(s) in the fleet)\n"
    conn = connect(FleetSpec(dsn(pg_server), password_env="LOCKWARDEN_FLEET_PW"))
    try:
        snap = read_snapshot(conn, locks=True)
        assert (snap.hosts, snap.pids, snap.locks) == ({}, {}, [])
    finally:
        conn.close()
