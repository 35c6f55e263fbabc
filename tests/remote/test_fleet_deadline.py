"""A fleet database that completes the login and then answers one byte every 2 s (a proxy on
127.0.0.1 in front of the session's real PostgreSQL, tests/support/drip.py) hangs nothing
(docs/fleet.md, "Deadline"): ``status`` and ``list`` of a lock of another host give the local
verdict with one "judged without the fleet" line, ``list --fleet`` fails with the deadline
named, each after at most the fleet's deadline (10 s) more than the same command without a
fleet; the agent and ``watch`` stop within a second of SIGINT while a read or a publication
drips. A ``deadline`` in ``[fleet]`` is checked like every other key, and a password is refused
in a DSN's query (``?password=``) as in its user part."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.config import load
from tests.support.drip import DripProxy
from tests.support.fleet import drop_fleet, init_fleet
from tests.support.servers import PG_PASSWORD, PgServer

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (pip install psycopg)")

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "LOCKWARDEN_FLEET_PW": PG_PASSWORD}
DEADLINE = 10.0
"""The fleet's default deadline (s), which these tests keep."""


@pytest.fixture
def fleet_db(pg_server: PgServer) -> Iterator[PgServer]:
    """The session's server with the fleet set up (host ``fleet-here`` bound to ``lw``) and
    dropped after the test."""
    with psycopg.connect(**pg_server.conninfo(), autocommit=True) as conn:
        drop_fleet(conn)
        init_fleet(conn, {"fleet-here": "lw"})
    yield pg_server
    with psycopg.connect(**pg_server.conninfo(), autocommit=True) as conn:
        drop_fleet(conn)


def _config(path: Path, port: int | None, watched: Path | None = None) -> Path:
    text = f'[[watch]]\npath = "{watched}"\n\n' if watched else ""
    if port is not None:
        text += (f'[fleet]\ndsn = "postgresql://lw@127.0.0.1:{port}/postgres"\n'
                 'password_env = "LOCKWARDEN_FLEET_PW"\nhost = "fleet-here"\ninterval = 0.5\n')
    path.write_text(text)
    return path


def _lw(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """``python -m core ARGS`` and how long it took (s); the 120 s cap only stops a hang."""
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "core", *args], capture_output=True, text=True,
                         timeout=120, check=False, cwd=ROOT, env=ENV)
    return out, time.monotonic() - t0


def _other_hosts_lock(directory: Path) -> Path:
    directory.mkdir()
    lock = directory / "deploy.lock"
    lock.write_text(f"pid=4242\nhost=fleet-elsewhere\ntimestamp={int(time.time())}\n")
    return lock


@pytest.mark.slow
def test_status_list_and_list_fleet_end_at_the_deadline_with_the_local_verdict(
        fleet_db: PgServer, tmp_path: Path) -> None:
    lock = _other_hosts_lock(tmp_path / "shared")
    plain = _config(tmp_path / "plain.toml", None)
    with DripProxy(fleet_db.port, drip_after=b"lockwarden_hosts") as proxy:
        cfg = _config(tmp_path / "drip.toml", proxy.port)
        figures: dict[str, tuple[float, float]] = {}

        for name, argv in (("status", ["status", str(lock), "--json"]),
                           ("list", ["list", str(lock.parent), "--json"])):
            base, base_s = _lw(*argv, "--config", str(plain))
            out, took = _lw(*argv, "--config", str(cfg))
            figures[name] = (base_s, took)
            assert out.returncode == base.returncode, out.stderr
            line = [ln for ln in out.stderr.splitlines() if "fleet" in ln]
            assert line == [f"lockwarden: judged without the fleet: fleet database "
                            f"postgresql://lw@127.0.0.1:{proxy.port}/postgres: no complete "
                            f"answer within {DEADLINE:g} s (the fleet's deadline): the "
                            "connection was cut"], out.stderr
            verdict: Any = json.loads(out.stdout)
            verdict = verdict if isinstance(verdict, dict) else verdict[0]
            assert (verdict["state"], verdict["liveness"]) == ("held", "remote")  # local
            assert took - base_s <= DEADLINE + 2.0, (name, figures)  # 12 s in all beyond start-up

        out, took = _lw("list", "--fleet", "--json", "--config", str(cfg))
        figures["list --fleet"] = (0.0, took)
        assert out.returncode == 3 and out.stdout == ""
        assert out.stderr.strip().endswith(f"no complete answer within {DEADLINE:g} s (the "
                                           "fleet's deadline): the connection was cut")
        assert took <= DEADLINE + 3.0, figures
        print("dripping fleet: (without a fleet s, with it s):", figures)


def _stops_within_a_second(proc: subprocess.Popen[str], proxy: DripProxy) -> float:
    """SIGINT once ``proc``'s read or publication drips; seconds until it exited with 0."""
    assert proxy.dripping.wait(60), proc.communicate(timeout=5)
    time.sleep(0.5)  # well inside the dripping answer (one byte every 2 s): the clock only
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    rc = proc.wait(30)
    took = time.monotonic() - t0
    assert rc == 0, proc.communicate(timeout=5)
    return took


@pytest.mark.slow
def test_the_agent_and_watch_stop_within_a_second_of_sigint(
        fleet_db: PgServer, tmp_path: Path) -> None:
    watched = tmp_path / "watched"
    _other_hosts_lock(watched)
    took: dict[str, float] = {}
    watch = ["watch", str(watched), "--json", "--no-history"]
    for name, argv, drip_after, nth in (
            ("agent", ["agent"], b"INSERT INTO lockwarden_hosts", 1),
            ("watch (first read)", watch, b"FROM lockwarden_hosts", 1),
            ("watch (following)", watch, b"FROM lockwarden_hosts", 4)):
        with DripProxy(fleet_db.port, drip_after=drip_after, nth=nth) as proxy:
            cfg = _config(tmp_path / f"{name.split()[0]}.toml", proxy.port, watched)
            proc = subprocess.Popen([sys.executable, "-m", "core", *argv, "--config", str(cfg)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    cwd=ROOT, env=ENV)
            try:
                took[name] = _stops_within_a_second(proc, proxy)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate(timeout=30)
    print("stopped after SIGINT (s):", took)
    assert all(s <= 1.0 for s in took.values()), took


@pytest.mark.parametrize(("value", "ok"), [("3", True), ("0.5", True), ("0", False),
                                           ("-1", False), ("7200", False), ('"10"', False),
                                           ("nan", False), ("true", False)])
def test_a_deadline_in_fleet_is_checked(tmp_path: Path, value: str, ok: bool) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[fleet]\ndsn = "postgresql://lw@db.example/x"\ndeadline = {value}\n')
    config = load(str(cfg))
    assert config.fleet is not None
    problems = [w for w in config.warnings if "deadline" in str(w)]
    if ok:
        assert config.fleet.deadline == float(value) and problems == []
    else:
        assert config.fleet.deadline == DEADLINE and len(problems) == 1, config.warnings


@pytest.mark.parametrize("dsn", ["postgresql://lw@db.example/x?password=secret",
                                 "postgresql://lw@db.example/x?sslmode=require&pass%77ord=s",
                                 "postgresql://lw:secret@db.example/x"])
def test_a_password_in_the_dsn_is_refused_wherever_it_is(tmp_path: Path, dsn: str) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[fleet]\ndsn = "{dsn}"\n')
    config = load(str(cfg))
    assert config.fleet is None
    assert any("must not hold a password" in str(w) for w in config.warnings)
    assert not any("secret" in str(w) for w in config.warnings)


def test_a_lock_servers_dsn_with_a_password_parameter_is_refused_too(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[[postgres]]\ndsn = "postgresql://lw@db.example/x?password=secret"\n')
    config = load(str(cfg))
    assert config.servers == []
    assert any("must not hold a password" in str(w) for w in config.warnings)
    assert not any("secret" in str(w) for w in config.warnings)
