"""``lockwarden watch`` with a ``[fleet]`` (docs/fleet.md, "Watching") against a real, private
PostgreSQL (it is stopped and started mid-run), hosts simulated by UTS namespaces as in
tests/remote/test_fleet.py: host A's watch stream shows a lock of host B turn stale within
5 s of B's holder being SIGKILLed, says B is silent when B's agent stops, prints one ``fleet``
line when the database goes away while local changes keep coming, and judges by B's reports
again when it is back.
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
    HOLDER,
    HOSTS,
    Procs,
    fleet_config,
    init_fleet,
    on_host,
    pg_ctl,
)
from tests.support.servers import PgServer, start_pg

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not sys.platform.startswith("linux") or os.geteuid() != 0,
        reason="hosts are simulated with UTS namespaces (unshare -u, as root)"),
]


class Stream:
    """The JSON lines of a running ``watch``, read on a thread of their own."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        assert proc.stdout is not None
        out = proc.stdout

        def read() -> None:
            for line in out:
                self.lines.put({**json.loads(line), "_at": time.monotonic()})
            self.lines.put(None)
        threading.Thread(target=read, daemon=True).start()

    def until(self, what: str, cond: Any, timeout: float) -> dict[str, Any]:
        """The first line for which ``cond`` holds, within ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {what} within {timeout} s; saw {self.seen}") from None
            assert line is not None, f"watch ended before {what}; saw {self.seen}"
            self.seen.append(line)
            if cond(line):
                return line


def _codes(line: dict[str, Any]) -> list[str]:
    return [r["code"] for r in line.get("reasons", [])]


def test_watch_on_host_a_follows_host_bs_reports_and_the_database_going_away(
        fleet_procs: Procs, tmp_path: Path) -> None:
    pg: PgServer = start_pg()
    try:
        shared = tmp_path / "shared"
        shared.mkdir()
        lock = shared / "deploy.lock"
        cfg_a = fleet_config(tmp_path / "a.toml", pg, shared)
        cfg_b = fleet_config(tmp_path / "b.toml", pg, shared)
        import psycopg

        with psycopg.connect(**pg.conninfo(), autocommit=True) as admin:  # the owner's set-up
            init_fleet(admin, HOSTS)
        # A watches first: no host has published yet -- that is an empty fleet, not a fault
        # (no `fleet` line)
        watch = fleet_procs.start(on_host("fleet-a", sys.executable, "-m", "core", "watch",
                                     str(shared), "--config", str(cfg_a), "--json",
                                     "--no-history"))
        stream = Stream(watch)
        stream.until("ready", lambda ln: ln.get("event") == "ready", 60)

        agent_argv = on_host("fleet-b", sys.executable, "-m", "core", "agent", "--config",
                              str(cfg_b))
        agent_b = fleet_procs.start(agent_argv)
        holder = fleet_procs.start(on_host("fleet-b", sys.executable, "-c", HOLDER, str(lock)))
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"

        def about_lock(cond: Any) -> Any:
            return lambda ln: ln.get("path") == str(lock) and cond(ln)

        # B's report on its holder reaches A (alive: by B's report, or -- one kernel here --
        # by the holder's pin, seen locally)
        killed = 0.0

        def stale_by_report(ln: dict[str, Any]) -> bool:
            return ln["state"] == "stale" and "fleet_report" in _codes(ln)

        deadline = time.monotonic() + 30
        while not killed:  # B's agent has published the PID
            with psycopg.connect(**pg.conninfo(), autocommit=True) as conn:
                row = conn.execute("SELECT to_regclass('lockwarden_pids') IS NOT NULL"
                                   ).fetchone()
                if row and row[0]:
                    row = conn.execute("SELECT EXISTS (SELECT 1 FROM lockwarden_pids WHERE"
                                       " host = 'fleet-b' AND alive)").fetchone()
            if row and row[0]:
                killed = time.monotonic()
                holder.kill()
                holder.wait(10)
                break
            assert time.monotonic() < deadline and agent_b.poll() is None
            time.sleep(0.1)  # the agent's first publication: nothing to wait on from here
        stale = stream.until("the lock stale by B's report", about_lock(stale_by_report), 20)
        took = stale["_at"] - killed
        assert took <= 5.0, f"A's watch showed the holder's death after {took:.2f} s: " + str(
            [(round(ln["_at"] - killed, 2), ln.get("event"), ln.get("state"), ln.get("liveness"),
              _codes(ln)) for ln in stream.seen])
        assert stale["event"] == "changed" and stale["liveness"] == "dead"
        assert [ln for ln in stream.seen if ln.get("event") == "fleet"] == []

        # B's agent stops: A's stream says B is silent and falls back to the age rules
        agent_b.send_signal(signal.SIGTERM)
        assert agent_b.wait(30) == 0, agent_b.communicate()
        silent = stream.until("B silent", about_lock(
            lambda ln: "fleet_host_silent" in _codes(ln)), 20)
        assert silent["state"] == "held" and silent["liveness"] == "remote"

        # the database goes away: one fleet line, and local changes still come
        pg_ctl(pg, "-m", "immediate", "-w", "stop")
        down = stream.until("the fleet line", lambda ln: ln.get("event") == "fleet", 20)
        assert down["state"] == "unavailable" and "lw-secret" not in down["message"]
        other = shared / "local.lock"
        other.write_text(f"pid={os.getpid()}\ntimestamp={int(time.time())}\n")
        stream.until("the local change", lambda ln: ln.get("event") == "added"
                     and ln.get("path") == str(other), 20)
        time.sleep(2.5)  # several retries pass: nothing to wait on but the clock
        other.unlink()
        stream.until("the local removal", lambda ln: ln.get("event") == "removed"
                     and ln.get("path") == str(other), 20)
        assert [ln for ln in stream.seen if ln.get("event") == "fleet"] == [down]

        # back: one line, and B's reports judge again once its agent publishes
        opts = f"-k {pg.sockdir} -p {pg.port} -c listen_addresses=127.0.0.1 -c fsync=off"
        pg_ctl(pg, "-l", os.path.join(pg.sockdir, "pg.log"), "-w", "-o", opts, "start")
        back = stream.until("the fleet back", lambda ln: ln.get("event") == "fleet", 20)
        assert back["state"] == "ok"
        fleet_procs.start(agent_argv)
        stream.until("the lock stale by B's report again", about_lock(stale_by_report), 30)

        watch.send_signal(signal.SIGINT)
        assert watch.wait(30) == 0, watch.communicate()
    finally:
        pg.stop()
