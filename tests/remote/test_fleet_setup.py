"""docs/fleet.md's set-up, run as written against the distribution's PostgreSQL (15 here: since
15, PUBLIC has no ``CREATE`` on schema ``public``, so nothing may rely on it): the script of
"Set-up" creates the roles and the database as the server's administrator, and the owner runs
``lockwarden fleet init``; then two hosts publish with their own roles through real ``lockwarden
agent`` processes, a viewer lists both, neither publishing role can write the other's rows or
publish as the other, and neither owns a table."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.servers import PG_PASSWORD, PgServer

pytestmark = pytest.mark.slow  # real lock servers (started once a session) and processes

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (pip install psycopg)")

ROOT = Path(__file__).resolve().parents[2]
FLEET_DOC = ROOT / "docs" / "fleet.md"
ROLES = ("lw_build7", "lw_build8", "lw_viewer", "lw_owner")
PASSWORDS = {f"LW_{r.removeprefix('lw_').upper()}_PASSWORD": f"pw-{r}" for r in ROLES}


def setup_script() -> str:
    """The first ``sh`` block of docs/fleet.md's "Set-up" section, as written."""
    text = FLEET_DOC.read_text(encoding="utf-8")
    section = text.split("\n## Set-up\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```sh\n(.*?)```", section, re.S)
    assert found, "docs/fleet.md's Set-up has no sh block"
    return found.group(1)


def _admin(pg: PgServer, dbname: str = "postgres") -> Any:
    return psycopg.connect(**pg.conninfo(dbname=dbname), autocommit=True)


def _clean(pg: PgServer) -> None:
    with _admin(pg) as conn:
        conn.execute("DROP DATABASE IF EXISTS lockwarden WITH (FORCE)")
        for role in ROLES:
            conn.execute(f"DROP ROLE IF EXISTS {role}")


@pytest.fixture
def documented(pg_server: PgServer, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The set-up script of docs/fleet.md run against the session's server (a ``lockwarden``
    on PATH that runs this checkout); yields the environment it ran with. Its database and
    roles are dropped around the test."""
    _clean(pg_server)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "lockwarden"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m core "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, **PASSWORDS, "PYTHONPATH": str(ROOT),
           "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "PGHOST": "127.0.0.1", "PGPORT": str(pg_server.port), "PGUSER": "lw",
           "PGPASSWORD": PG_PASSWORD}  # the server's administrator, for step 1
    out = subprocess.run(["sh", "-e"], input=setup_script(), capture_output=True, text=True,
                         env=env, timeout=120, check=False, cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "bound: build-7 -> lw_build7" in out.stdout and "bound: build-8 -> lw_build8" \
        in out.stdout, out.stdout
    yield env
    _clean(pg_server)


def _config(tmp_path: Path, pg: PgServer, role: str, host: str | None,
            watched: Path | None) -> Path:
    cfg = tmp_path / f"{role}.toml"
    cfg.write_text((f'[[watch]]\npath = "{watched}"\n\n' if watched else "")
                   + f'[fleet]\ndsn = "postgresql://{role}@127.0.0.1:{pg.port}/lockwarden"\n'
                   'password_env = "LOCKWARDEN_FLEET_PASSWORD"\n'
                   + (f'host = "{host}"\n' if host else "") + "interval = 0.5\n")
    return cfg


def _as(pg: PgServer, role: str) -> Any:
    return psycopg.connect(host="127.0.0.1", port=pg.port, dbname="lockwarden", user=role,
                           password=f"pw-{role}", autocommit=True)


def test_the_documented_set_up_on_postgresql_15(documented: dict[str, str], pg_server: PgServer,
                                                tmp_path: Path) -> None:
    with _admin(pg_server, "lockwarden") as conn:
        assert conn.info.server_version >= 150000
        # what PostgreSQL 15 gives PUBLIC, and what the publishing roles got: no CREATE
        for role in ("lw_build7", "lw_build8", "lw_viewer"):
            assert conn.execute("SELECT has_schema_privilege(%s, 'public', 'CREATE')",
                                (role,)).fetchone() == (False,)
        tables = conn.execute("SELECT c.relname, pg_get_userbyid(c.relowner),"
                              " c.relforcerowsecurity FROM pg_class c JOIN pg_namespace n"
                              " ON n.oid = c.relnamespace WHERE n.nspname = 'public'"
                              " AND c.relkind = 'r' ORDER BY 1").fetchall()
    assert [t[0] for t in tables] == ["lockwarden_host_roles", "lockwarden_hosts",
                                      "lockwarden_locks", "lockwarden_pids",
                                      "lockwarden_schema"]
    assert {t[1] for t in tables} == {"lw_owner"}  # neither publishing role owns a table
    assert [t[0] for t in tables if t[2]] == ["lockwarden_hosts", "lockwarden_locks",
                                              "lockwarden_pids"]

    agents: list[subprocess.Popen[str]] = []
    try:
        for role, host in (("lw_build7", "build-7"), ("lw_build8", "build-8")):
            watched = tmp_path / host
            watched.mkdir()
            (watched / "deploy.lock").write_text(f"pid={os.getpid()}\n"
                                                 f"timestamp={int(time.time())}\n")
            cfg = _config(tmp_path, pg_server, role, host, watched)
            agents.append(subprocess.Popen(
                [sys.executable, "-m", "core", "agent", "--config", str(cfg)], text=True,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
                env={**documented, "LOCKWARDEN_FLEET_PASSWORD": f"pw-{role}"}))
        viewer = _config(tmp_path, pg_server, "lw_viewer", None, None)
        view_env = {**documented, "LOCKWARDEN_FLEET_PASSWORD": "pw-lw_viewer"}
        with _as(pg_server, "lw_viewer") as conn:  # both hosts have published
            conn.execute("LISTEN lockwarden_fleet")
            deadline = time.monotonic() + 60
            while conn.execute("SELECT count(*) FROM lockwarden_locks").fetchone() != (2,):
                assert time.monotonic() < deadline and all(a.poll() is None for a in agents), \
                    [a.communicate(timeout=5) for a in agents if a.poll() is not None]
                for _n in conn.notifies(timeout=1.0, stop_after=1):
                    pass
        listed = subprocess.run([sys.executable, "-m", "core", "list", "--fleet", "--config",
                                 str(viewer), "--json"], capture_output=True, text=True,
                                cwd=ROOT, env=view_env, timeout=60, check=False)
        assert listed.returncode == 0 and listed.stderr == "", listed.stderr
        assert [(r["host_published"], os.path.basename(r["path"]))
                for r in json.loads(listed.stdout)] == [("build-7", "deploy.lock"),
                                                        ("build-8", "deploy.lock")]

        with _as(pg_server, "lw_build7") as seven:  # build-7's role and build-8's rows
            for sql in ("UPDATE lockwarden_hosts SET heartbeat_at = now() WHERE host = 'build-8'",
                        "UPDATE lockwarden_locks SET state = 'stale' WHERE host = 'build-8'",
                        "DELETE FROM lockwarden_locks WHERE host = 'build-8'",
                        "UPDATE lockwarden_pids SET liveness = 'dead' WHERE host = 'build-8'",
                        "DELETE FROM lockwarden_hosts WHERE host = 'build-8'"):
                assert seven.execute(sql).rowcount == 0, sql
            for sql in ("INSERT INTO lockwarden_pids (host, pid, alive, liveness) VALUES"
                        " ('build-8', 1, false, 'dead')",
                        "INSERT INTO lockwarden_host_roles VALUES ('build-9', 'lw_build7')",
                        "CREATE TABLE lockwarden_mine (x int)"):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    seven.execute(sql)
        as_eight = subprocess.run(  # build-7's role publishing under build-8's name
            [sys.executable, "-c", "import sys; from core.config.model import FleetSpec; "
             "from core.fleet.store import FleetError, Publisher; "
             "p = Publisher(FleetSpec(sys.argv[1], password_env='LOCKWARDEN_FLEET_PASSWORD',"
             " host='build-8'))\ntry:\n    p.publish([])\nexcept FleetError as e:\n"
             "    print(e.kind)", f"postgresql://lw_build7@127.0.0.1:{pg_server.port}/lockwarden"],
            capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
            env={**documented, "LOCKWARDEN_FLEET_PASSWORD": "pw-lw_build7"})
        assert as_eight.stdout.strip() == "refused", as_eight.stderr
        with _as(pg_server, "lw_viewer") as conn:
            assert conn.execute("SELECT host, owner FROM lockwarden_hosts ORDER BY host"
                                ).fetchall() == [("build-7", "lw_build7"),
                                                 ("build-8", "lw_build8")]
    finally:
        for agent in agents:
            agent.send_signal(signal.SIGTERM)
        for agent in agents:
            try:
                assert agent.wait(30) == 0, agent.communicate(timeout=5)
            finally:
                if agent.poll() is None:
                    agent.kill()
                agent.communicate(timeout=30)
