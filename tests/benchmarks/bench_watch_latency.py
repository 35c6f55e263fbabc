"""Watcher latency: time from creating a lock file to the ``on_change`` callback that reports
it, over N files created one after another (each waits for its callback). Prints p50/p95/max.
Asserts nothing about speed (docs/DESIGN.md "Testing"). Target: p95 <= 50 ms.

    .venv/bin/python tests/benchmarks/bench_watch_latency.py [--files 500] [--dir DIR]

The debounce (core.watch.watcher.DEBOUNCE, 20 ms) is part of the figure: it is what lets a writer
finish the file before it is read.
"""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.config import WatchSpec  # noqa: E402
from core.watch.watcher import DEBOUNCE, ChangeSet, Watcher  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=500)
    ap.add_argument("--dir", help="parent directory for the temp lock directory")
    args = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="lw-bench-latency-", dir=args.dir))
    got: queue.Queue[tuple[float, ChangeSet]] = queue.Queue()
    w = Watcher([WatchSpec(str(d))], lambda cs: got.put((time.perf_counter(), cs)))
    w.start()
    text = f"pid={os.getpid()}\ntimestamp={int(time.time())}\ntag=bench\n"
    lat: list[float] = []
    try:
        for i in range(args.files):
            path = str(d / f"l{i:05d}.lock")
            t0 = time.perf_counter()
            with open(path, "w") as f:
                f.write(text)
            while True:
                t1, cs = got.get(timeout=30)
                if any(s.path == path for s in cs.added):
                    lat.append((t1 - t0) * 1000)
                    break
    finally:
        w.close()
        shutil.rmtree(d, ignore_errors=True)
    lat.sort()
    p95 = lat[max(0, int(len(lat) * 0.95) - 1)]
    print(f"create-to-callback latency over {len(lat)} files in {d.parent} "
          f"(debounce {DEBOUNCE * 1000:.0f} ms): p50 {statistics.median(lat):.1f} ms, "
          f"p95 {p95:.1f} ms, max {lat[-1]:.1f} ms  [target p95 <= 50 ms]")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
