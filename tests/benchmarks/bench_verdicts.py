"""Verdict costs: one psutil snapshot of all processes, a liveness check per lock (direct
look-up vs. snapshot), and ``inspect`` per lock file (read + parse + check + judge).
Prints figures; asserts nothing about speed (docs/DESIGN.md "Testing").

    .venv/bin/python tests/benchmarks/bench_verdicts.py [--locks 500] [--rounds 5]

The lock files are sema locks naming this process, a reaped child (dead) and a PID that does
not exist, written a minute before the snapshot (so a PID missing from it needs no second
look), in a temporary directory.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.record import LockRecord  # noqa: E402
from core.verdicts.inspect import inspect  # noqa: E402
from core.verdicts.liveness import check, snapshot  # noqa: E402


def timed(fn: Callable[[], object], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--locks", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    n, rounds = args.locks, args.rounds

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    pids = [os.getpid(), dead.pid, 4_000_000 + 1]
    now = datetime.now(UTC) - timedelta(minutes=1)
    records = [
        LockRecord(path=f"/l/{i}.lock", format="sema", pid=pids[i % 3], acquired_at=now)
        for i in range(n)
    ]

    snap_times = timed(snapshot, rounds)
    procs = snapshot()
    direct = timed(lambda: [check(r) for r in records], rounds)
    via_snap = timed(lambda: [check(r, procs=procs) for r in records], rounds)

    with tempfile.TemporaryDirectory() as d:
        paths = []
        for i, r in enumerate(records):
            p = os.path.join(d, f"{i}.lock")
            Path(p).write_text(f"pid={r.pid}\ntimestamp={int(now.timestamp())}\ntag=bench {i}\n")
            paths.append(p)
        insp = timed(lambda: [inspect(p, procs=procs) for p in paths], rounds)
        insp_direct = timed(lambda: [inspect(p) for p in paths], rounds)

    def per(ts: list[float]) -> str:
        med = statistics.median(ts)
        return f"{med * 1e3:8.2f} ms total, {med / n * 1e6:7.1f} us/lock"

    print(
        f"processes on this host: {len(procs)}; locks: {n}, written a minute ago "
        "(1/3 alive, 1/3 a reaped child, 1/3 a PID never used)"
    )
    print(f"snapshot() (one psutil pass):      {statistics.median(snap_times) * 1e3:8.2f} ms")
    print(f"check() direct look-ups:           {per(direct)}")
    print(f"check() with a snapshot:           {per(via_snap)}")
    print(f"inspect() with a snapshot:         {per(insp)}")
    print(f"inspect() direct look-ups:         {per(insp_direct)}")


if __name__ == "__main__":
    main()
