"""Holders' exits across hosts (docs/fleet.md, "Bounds"; docs/performance.md, "Holders'
exits"): a holder SIGKILLed on "host B" -> its lock's stale line on "host A", beside a bare
NOTIFY round trip measured in the same run. Prints figures; asserts nothing (docs/DESIGN.md,
"Testing"). Target: p95 <= 300 ms over 100 kills.

    .venv/bin/python tests/benchmarks/bench_fleet_exits.py [--kills 100] [--interval 2]

A private PostgreSQL (tests/support/servers.py) with the fleet set up as its owner does it;
hosts are UTS namespaces (``unshare -u``, as root) as in tests/remote/test_fleet_watch.py:

- **host B**: ``lockwarden agent`` (this worktree's code) watching a temp directory, publishing
  every ``--interval`` s and at once after each change set of its watcher (the holders' exits
  arrive by pidfd);
- **host A**: ``lockwarden watch DIR --json --no-history`` on the same directory with the same
  ``[fleet]`` -- the reader that follows NOTIFY (core/cli/watch_fleet.py: LISTEN, then read
  the reports and re-judge) -- printing a ``changed`` line when B's report makes the lock
  stale.

For each kill a ``sleep`` holder is started and a lock naming it on host B is written as
Lockwarden writes one (``host``, ``start``, ``token``: stale as soon as its holder is proven
dead, as in tests/benchmarks/bench_holder_exits.py); once A's stream shows it held by B's report
(``fleet_report``, alive), the holder is SIGKILLed: latency = from just before ``kill()`` to the
moment A's stale line is read. Beside it, in the same loop: a bare NOTIFY round trip (psycopg,
``pg_notify`` on one connection, ``notifies()`` on another that LISTENs).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from core.fleet.setup import init  # noqa: E402
from core.formats import sema  # noqa: E402
from tests.support.latency import summary_ms  # noqa: E402
from tests.support.servers import PG_PASSWORD, start_pg  # noqa: E402

ENV = dict(os.environ, PYTHONPATH=str(ROOT), LOCKWARDEN_FLEET_PW=PG_PASSWORD)
CHANNEL = "lockwarden_fleet"


def on_host(host: str, *argv: str) -> list[str]:
    """``argv`` in a UTS namespace of its own whose host name is ``host``."""
    return ["unshare", "-u", "sh", "-c", 'hostname "$0" && exec "$@"', host, *argv]


def write_lock(path: str, pid: int, host: str) -> None:
    """A sema lock naming ``pid`` on ``host``, as Lockwarden writes one, published with
    ``link()``."""
    rec = sema.make_record(path, pid=pid, timestamp=datetime.now(UTC), tag="bench", host=host,
                           start=psutil.Process(pid).create_time(), token="ab" * 16)
    tmp = path + ".partial"
    with open(tmp, "wb") as f:
        f.write(sema.serialize(rec))
    os.link(tmp, path)
    os.unlink(tmp)


class Stream:
    """A's ``watch --json`` lines, read on a thread of their own, each with its arrival."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.lines: queue.Queue[tuple[float, dict[str, Any]] | None] = queue.Queue()
        assert proc.stdout is not None
        out = proc.stdout

        def read() -> None:
            for line in out:
                self.lines.put((time.monotonic(), json.loads(line)))
            self.lines.put(None)
        threading.Thread(target=read, daemon=True).start()

    def until(self, what: str, cond: Any, timeout: float = 30.0) -> tuple[float, dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                got = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise SystemExit(f"no {what} within {timeout:g} s") from None
            if got is None:
                raise SystemExit(f"A's watch ended before {what}")
            if cond(got[1]):
                return got


def _codes(line: dict[str, Any]) -> list[str]:
    return [str(r.get("code")) for r in line.get("reasons", [])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--interval", type=float, default=2.0,
                    help="[fleet] interval of both hosts, seconds (the default's)")
    args = ap.parse_args()
    if os.geteuid() != 0 or not shutil.which("unshare"):
        raise SystemExit("hosts are simulated with UTS namespaces: run as root (unshare -u)")
    import psycopg

    pg = start_pg()
    d = tempfile.mkdtemp(prefix="lw-fleet-exits-")
    procs: list[subprocess.Popen[bytes]] = []
    try:
        dsn = f"postgresql://lw@127.0.0.1:{pg.port}/postgres"
        admin = psycopg.connect(dsn, password=PG_PASSWORD, autocommit=True)
        init(admin, bind={"fleet-a": "lw", "fleet-b": "lw"})
        shared = os.path.join(d, "shared")
        os.mkdir(shared)
        cfg = os.path.join(d, "fleet.toml")
        with open(cfg, "w", encoding="utf-8") as f:
            f.write(f'[[watch]]\npath = "{shared}"\n\n[fleet]\ndsn = "{dsn}"\n'
                    f'password_env = "LOCKWARDEN_FLEET_PW"\ninterval = {args.interval}\n'
                    "silent_after = 600\n")
        agent = subprocess.Popen(on_host("fleet-b", sys.executable, "-m", "core", "agent",
                                         "--config", cfg), cwd=ROOT, env=ENV,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(agent)
        watch = subprocess.Popen(on_host("fleet-a", sys.executable, "-m", "core", "watch",
                                         shared, "--config", cfg, "--json", "--no-history"),
                                 cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL)
        procs.append(watch)
        stream = Stream(watch)
        stream.until("ready", lambda ln: ln.get("event") == "ready")
        print(f"fleet exits: {args.kills} kills, [fleet] interval {args.interval:g} s, "
              f"PostgreSQL on 127.0.0.1, load {os.getloadavg()[0]:.2f}")

        sender = psycopg.connect(dsn, password=PG_PASSWORD, autocommit=True)
        listener = psycopg.connect(dsn, password=PG_PASSWORD, autocommit=True)
        listener.execute("LISTEN lw_bench_anchor")
        rtt: list[float] = []
        across: list[float] = []
        by_report = 0
        for i in range(args.kills):
            t = time.perf_counter()
            sender.execute("SELECT pg_notify('lw_bench_anchor', 'x')")
            for _n in listener.notifies(timeout=5, stop_after=1):
                pass
            rtt.append((time.perf_counter() - t) * 1000)

            holder = subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL)
            path = os.path.join(shared, f"k{i:04d}.lock")
            write_lock(path, holder.pid, "fleet-b")
            stream.until(f"lock {i} held by B's report", lambda ln, p=path: ln.get("path") == p
                         and ln.get("liveness") == "alive" and "fleet_report" in _codes(ln))
            t0 = time.monotonic()
            os.kill(holder.pid, signal.SIGKILL)
            t1, line = stream.until(f"lock {i} stale on A", lambda ln, p=path: ln.get("path")
                                    == p and ln.get("state") == "stale")
            across.append((t1 - t0) * 1000)
            by_report += any(r.get("code") == "fleet_report" and r.get("liveness") == "dead"
                             for r in line.get("reasons", []))  # B's report, not A's own
            holder.wait()
            os.unlink(path)
            stream.until(f"lock {i} removed", lambda ln, p=path: ln.get("event") == "removed"
                         and ln.get("path") == p)
        print(f"holder SIGKILLed on host B -> its stale line in host A's watch --json ("
              f"{by_report} of {args.kills} stale by B's report: fleet_report, dead)")
        print(f"  anchor: bare NOTIFY round trip (psycopg)     {summary_ms(rtt)}")
        print(f"  across hosts: B's exit -> A's stale line     {summary_ms(across)}  "
              "[target p95 <= 300 ms]")
        sender.close()
        listener.close()
        admin.close()
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(d, ignore_errors=True)
        pg.stop()


if __name__ == "__main__":
    main()
