"""The fleet at scale (docs/fleet.md): 50 hosts x 1,000 locks published to a private PostgreSQL;
``list --fleet`` (the database read and the whole command); a change on one host reaching
another host's view through LISTEN/NOTIFY, beside the anchor measured in the same run: a bare
NOTIFY round trip between two connections. Prints figures; asserts nothing about speed
(docs/DESIGN.md "Testing").

    .venv/bin/python tests/benchmarks/bench_fleet.py [--hosts 50] [--locks 1000] [--samples 50]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.codes import Code  # noqa: E402
from core.config.model import FleetSpec  # noqa: E402
from core.fleet.schema import CHANNEL  # noqa: E402
from core.fleet.setup import init  # noqa: E402
from core.fleet.store import Publisher, connect, read_snapshot  # noqa: E402
from core.reasons import Reason  # noqa: E402
from core.record import Evidence, Liveness, LockRecord, LockStatus, State  # noqa: E402
from tests.support.servers import PG_PASSWORD, start_pg  # noqa: E402


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def ms(values: list[float]) -> str:
    return (f"p50 {statistics.median(values) * 1e3:7.2f} ms  p95 {pct(values, 0.95) * 1e3:7.2f} ms"
            f"  (n={len(values)})")


def statuses(host: str, n: int, *, dead: int | None = None) -> list[LockStatus]:
    """``n`` locks of ``host``: sema locks written by Lockwarden, holders alive (``dead``: the
    index of one whose holder is dead)."""
    now = datetime.now(UTC)
    out = []
    for i in range(n):
        alive = i != dead
        rec = LockRecord(path=f"/shared/{host}/l{i}.lock", format="sema", pid=10_000 + i,
                         acquired_at=now, tag=f"job {i}", host=host,
                         token=f"{i:032x}", start=1_700_000_000.0 + i)
        liveness = Liveness.ALIVE if alive else Liveness.DEAD
        out.append(LockStatus(rec.path, State.HELD if alive else State.STALE, liveness=liveness,
                              reasons=(Reason.of(Code.HOLDER_ALIVE if alive else Code.HOLDER_DEAD,
                                                 pid=rec.pid),),
                              record=rec, checked_at=now,
                              evidence=Evidence(pid=rec.pid, process_start=rec.start)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hosts", type=int, default=50)
    ap.add_argument("--locks", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=50)
    args = ap.parse_args()
    import psycopg

    pg = start_pg()
    os.environ["LOCKWARDEN_FLEET_PW"] = PG_PASSWORD
    dsn = f"postgresql://lw@127.0.0.1:{pg.port}/postgres"
    try:
        admin = psycopg.connect(dsn, password=PG_PASSWORD, autocommit=True)
        init(admin, bind={f"host{h:02d}": "lw" for h in range(args.hosts)})
        print(f"fleet: {args.hosts} hosts x {args.locks} locks, PostgreSQL on 127.0.0.1, "
              f"load {os.getloadavg()[0]:.2f}")

        pubs = []
        t0 = time.perf_counter()
        per_host = []
        for h in range(args.hosts):
            spec = FleetSpec(dsn, password_env="LOCKWARDEN_FLEET_PW", host=f"host{h:02d}")
            pub = Publisher(spec, boot_id="bench")
            t = time.perf_counter()
            pub.publish(statuses(spec.host, args.locks))
            per_host.append(time.perf_counter() - t)
            pubs.append(pub)
        total = time.perf_counter() - t0
        print(f"  first publication (every row):  {total:6.2f} s for all hosts; per host "
              f"{ms(per_host)}")
        same = []
        for pub in pubs[:10]:
            t = time.perf_counter()
            pub.publish(statuses(pub.spec.host, args.locks))  # nothing changed: heartbeat
            same.append(time.perf_counter() - t)
        print(f"  heartbeat, nothing changed:     {ms(same)}  (diffing {args.locks} verdicts)")

        reads = []
        conn = connect(FleetSpec(dsn, password_env="LOCKWARDEN_FLEET_PW", host="reader"))
        for _ in range(10):
            t = time.perf_counter()
            snap = read_snapshot(conn, locks=True)
            reads.append(time.perf_counter() - t)
        print(f"  read every host's locks ({len(snap.locks)} rows): {ms(reads)}")
        with tempfile.TemporaryDirectory() as d:
            cfg = Path(d) / "c.toml"
            cfg.write_text(f'[fleet]\ndsn = "{dsn}"\npassword_env = "LOCKWARDEN_FLEET_PW"\n')
            # as installed: bytecode cached (a private prefix, warmed by the first run)
            env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
            env.update(PYTHONPATH=str(ROOT), PYTHONPYCACHEPREFIX=str(Path(d) / "pyc"))
            lw = [sys.executable, "-m", "core", "list", "--fleet", "--config", str(cfg)]
            floor = ("import psycopg, sys; c = psycopg.connect(sys.argv[1], password=sys.argv[2]);"
                     " r = c.execute('SELECT verdict::text FROM lockwarden_locks').fetchall()")
            # the same read as `list --fleet --json` with nothing of ours: the driver's floor
            same_read = ("import os, sys, tomllib; f = tomllib.load(open(sys.argv[1], 'rb'))"
                         "['fleet']; import psycopg; from psycopg.types.string import"
                         " ByteaBinaryLoader; c = psycopg.connect(f['dsn'], password=os.environ"
                         "[f['password_env']], autocommit=True); cur = c.cursor(binary=True);"
                         " cur.adapters.register_loader('text', ByteaBinaryLoader); cur.execute("
                         "'SELECT locks_json FROM lockwarden_hosts ORDER BY host');"
                         " [sys.stdout.buffer.write(r) for (r,) in cur.fetchall()]")
            runs: dict[str, list[str]] = {
                "lockwarden list --fleet --json": [*lw, "--json"],
                "lockwarden list --fleet (table)": lw,
                "anchor: python -c pass": [sys.executable, "-c", "pass"],
                "anchor: python -c 'import psycopg'": [sys.executable, "-c", "import psycopg"],
                "anchor: the same read in 1 line of psycopg": [sys.executable, "-c", same_read,
                                                                str(cfg)],
                "anchor: python psycopg connect + every verdict's row":
                    [sys.executable, "-c", floor, dsn, PG_PASSWORD],
            }
            psql = shutil.which("psql")
            if psql:
                runs["anchor: psql -c 'select 1'"] = [psql, dsn, "-c", "select 1"]
            times: dict[str, list[float]] = {name: [] for name in runs}
            for argv in runs.values():  # warm-up: bytecode, page cache
                subprocess.run(argv, check=True, env={**env, "PGPASSWORD": PG_PASSWORD},
                               stdout=subprocess.DEVNULL)
            for _ in range(7):
                for name, argv in runs.items():
                    t = time.perf_counter()
                    subprocess.run(argv, check=True, env={**env, "PGPASSWORD": PG_PASSWORD},
                                   stdout=subprocess.DEVNULL)
                    times[name].append(time.perf_counter() - t)
            one_line = statistics.median(times["anchor: the same read in 1 line of psycopg"])
            for name, values in times.items():
                ratio = statistics.median(values) / one_line
                target = (f"  [{ratio:.2f}x the 1-line psycopg read; target <= 1.15x]"
                          if name == "lockwarden list --fleet --json" else "")
                print(f"  {name + ':':54} {ms(values)}{target}")

        # change on host00 -> the reader sees it (NOTIFY, then a snapshot read)
        listener = psycopg.connect(dsn, password=PG_PASSWORD, autocommit=True)
        listener.execute(f"LISTEN {CHANNEL}")
        notify_rtt, change = [], []
        for i in range(args.samples):
            t = time.perf_counter()
            admin.execute("SELECT pg_notify(%s, %s)", (CHANNEL, "anchor"))
            for _n in listener.notifies(timeout=5, stop_after=1):
                pass
            notify_rtt.append(time.perf_counter() - t)
            t = time.perf_counter()
            pubs[0].publish(statuses(pubs[0].spec.host, args.locks, dead=i % args.locks))
            for _n in listener.notifies(timeout=5, stop_after=1):
                pass
            read_snapshot(listener)  # the reader's view: hosts and PIDs
            change.append(time.perf_counter() - t)
        print(f"  change on one host -> another's view: {ms(change)}  [target p95 <= 1 s]")
        print(f"  anchor: bare NOTIFY round trip:        {ms(notify_rtt)}")
        for pub in pubs:
            pub.close()
        conn.close()
        listener.close()
        admin.close()
    finally:
        pg.stop()


if __name__ == "__main__":
    main()
