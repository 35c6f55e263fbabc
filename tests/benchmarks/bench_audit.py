"""Audit log throughput: appends/s (one process, and N processes on one log), read and verify
lines/s. Prints figures; asserts nothing about speed (docs/DESIGN.md "Testing").

    .venv/bin/python tests/benchmarks/bench_audit.py [--appends 2000] [--procs 4]

Each append is a full entry: open, flock, read the last line backwards, one write(), fsync.
The raw floor printed beside it is open(O_APPEND) + write + fsync + close of a line of the same
size with no lock and no chain.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core import audit  # noqa: E402
from core.fsutil import AUDIT_LOG_NAME  # noqa: E402

CHILD = r"""
import sys
from core import audit
lock, n = sys.argv[1], int(sys.argv[2])
print("ready", flush=True)
sys.stdin.readline()
for i in range(n):
    audit.append(lock, "acquire", details={"i": i, "token": "0" * 32}, format="sema")
"""


def bench_single(d: Path, n: int) -> float:
    lock = str(d / "single.lock")
    t0 = time.perf_counter()
    for i in range(n):
        audit.append(lock, "acquire", details={"i": i, "token": "0" * 32}, format="sema")
    return n / (time.perf_counter() - t0)


def bench_raw_floor(d: Path, n: int) -> float:
    line = (d / AUDIT_LOG_NAME).read_bytes().split(b"\n", 1)[0] + b"\n"
    path = d / "raw.log"
    t0 = time.perf_counter()
    for _ in range(n):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, line)
        os.fsync(fd)
        os.close(fd)
    return n / (time.perf_counter() - t0)


def bench_procs(d: Path, procs: int, n: int) -> float:
    lock = str(d / "multi" / "m.lock")
    (d / "multi").mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ps = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, lock, str(n)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(procs)
    ]
    for p in ps:
        assert p.stdout is not None
        p.stdout.readline()
    t0 = time.perf_counter()
    for p in ps:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in ps:
        p.communicate()
    dt = time.perf_counter() - t0
    res = audit.verify(lock)
    print(f"  chain after {procs} processes: ok={res.ok} entries={res.entries}")
    return procs * n / dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--appends", type=int, default=2000)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lockwarden-bench-audit-") as tmp:
        d = Path(tmp)
        print(f"audit benchmark in {tmp} ({args.appends} appends)")
        # alternate rounds and take medians: fsync time on a shared disk is noisy
        audit.append(str(d / "single.lock"), "acquire")
        singles: list[float] = []
        floors: list[float] = []
        per_round = max(1, args.appends // args.rounds)
        for _ in range(args.rounds):
            singles.append(bench_single(d, per_round))
            floors.append(bench_raw_floor(d, per_round))
        single = statistics.median(singles)
        floor = statistics.median(floors)
        print(f"  append, 1 process:            {single:9.0f} appends/s (median of {args.rounds})")
        print(f"  raw floor (append+fsync):     {floor:9.0f} writes/s  ({floor / single:.2f}x)")
        per = max(1, args.appends // args.procs)
        multi = bench_procs(d, args.procs, per)
        print(f"  append, {args.procs} processes, one log: {multi:9.0f} appends/s total")
        log = str(d / AUDIT_LOG_NAME)
        t0 = time.perf_counter()
        entries = audit.read(log)
        t_read = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = audit.verify(log)
        t_verify = time.perf_counter() - t0
        print(f"  read:   {len(entries) / t_read:9.0f} lines/s")
        print(f"  verify: {res.entries / t_verify:9.0f} lines/s (ok={res.ok})")


if __name__ == "__main__":
    main()
