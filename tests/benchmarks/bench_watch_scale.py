"""Watcher at scale: 10,000 lock files in 100 directories. Prints the initial scan time
(``core.watch.scan.scan`` and ``Watcher.start``), then the watcher's idle CPU use over a period and
its RSS. Asserts nothing (docs/DESIGN.md "Testing"). Targets: scan <= 2 s, idle CPU <= 1% of one
core.

    .venv/bin/python tests/benchmarks/bench_watch_scale.py [--dirs 100] [--per-dir 100]
        [--seconds 60] [--dir DIR] [--recursive]

``--recursive`` watches the parent of the 100 directories with one recursive spec instead of
one spec per directory.

The locks are sema files, a third held by this process (alive), the rest by PIDs that do not
exist, so every liveness pass has PIDs to check. Idle CPU is this process's CPU time (all
threads: watcher, watchdog, liveness snapshots, rescans every 30 s) divided by wall time.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.config import WatchSpec  # noqa: E402
from core.watch.scan import scan  # noqa: E402
from core.watch.watcher import ChangeSet, Watcher  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dirs", type=int, default=100)
    ap.add_argument("--per-dir", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--dir", help="parent directory for the temp tree")
    ap.add_argument("--recursive", action="store_true",
                    help="one recursive spec for the whole tree instead of one per directory")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="lw-bench-scale-", dir=args.dir))
    me = psutil.Process()
    now = int(time.time())
    try:
        specs = []
        for i in range(args.dirs):
            d = root / f"d{i:03d}"
            d.mkdir()
            specs.append(WatchSpec(str(d)))
            for j in range(args.per_dir):
                pid = os.getpid() if j % 3 == 0 else 4_000_000 + j
                (d / f"l{j:04d}.lock").write_text(f"pid={pid}\ntimestamp={now}\ntag=t{j}\n")
        total = args.dirs * args.per_dir
        if args.recursive:
            specs = [WatchSpec(str(root), recursive=True)]
        rss0 = me.memory_info().rss

        t0 = time.perf_counter()
        statuses = scan(specs)
        t_scan = time.perf_counter() - t0
        assert len(statuses) == total, len(statuses)

        changes: list[ChangeSet] = []
        w = Watcher(specs, changes.append)
        t0 = time.perf_counter()
        w.start()
        t_start = time.perf_counter() - t0
        assert len(w.snapshot()) == total
        modes = {d.mode for d in w.dir_status()}
        how = "one recursive spec" if args.recursive else f"{len(specs)} specs"
        print(f"{total} locks in {args.dirs} directories ({root.parent}, {how}): "
              f"core.watch.scan.scan {t_scan:.2f} s, "
              f"Watcher.start (scan + watches) {t_start:.2f} s "
              "[target <= 2 s]; directory modes: " + ", ".join(sorted(modes)))

        time.sleep(3)  # let the first liveness pass settle before measuring
        cpu0 = sum(me.cpu_times()[:2])
        wall0 = time.perf_counter()
        load0 = os.getloadavg()[0]
        time.sleep(args.seconds)
        cpu = sum(me.cpu_times()[:2]) - cpu0
        wall = time.perf_counter() - wall0
        rss = me.memory_info().rss
        w.close()
        print(f"idle for {wall:.0f} s: CPU {cpu:.2f} s = {100 * cpu / wall:.2f}% of one core  "
              f"[target <= 1%]; RSS {rss / 2**20:.0f} MiB ({(rss - rss0) / 2**20:.0f} MiB "
              f"for the watcher's inventory and threads); {len(changes)} change sets while idle")
        print(f"load average: {load0:.2f} at the start, "
              f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end, "
              f"on {os.cpu_count()} CPUs")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
