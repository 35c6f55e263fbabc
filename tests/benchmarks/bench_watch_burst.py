"""Watcher burst: N lock files created as fast as possible by another process; time until
every one was delivered to ``on_change``, and in how many change sets. Prints figures; asserts
nothing (docs/DESIGN.md "Testing"). Target: all delivered within 1 s.

    .venv/bin/python tests/benchmarks/bench_watch_burst.py [--files 1000] [--dir DIR]

Printed: how long the creating process took, the time from its first file to the last
delivery, and the delivery lag after its last file (the part the watcher adds).
"""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.config import WatchSpec  # noqa: E402
from core.watch.watcher import ChangeSet, Watcher  # noqa: E402

CREATOR = r"""
import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
text = f"pid={os.getpid()}\ntimestamp={int(time.time())}\ntag=burst\n"
sys.stdin.readline()
t0 = time.time()
for i in range(n):
    with open(os.path.join(d, f"b{i:05d}.lock"), "w") as f:
        f.write(text)
print(t0, time.time(), flush=True)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--dir", help="parent directory for the temp lock directory")
    args = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="lw-bench-burst-", dir=args.dir))
    got: queue.Queue[tuple[float, ChangeSet]] = queue.Queue()
    w = Watcher([WatchSpec(str(d))], lambda cs: got.put((time.time(), cs)))
    w.start()
    creator = subprocess.Popen([sys.executable, "-c", CREATOR, str(d), str(args.files)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert creator.stdin is not None and creator.stdout is not None
        creator.stdin.write("go\n")
        creator.stdin.flush()
        seen: set[str] = set()
        sets = 0
        last = 0.0
        while len(seen) < args.files:
            t, cs = got.get(timeout=60)
            sets += 1
            seen.update(s.path for s in cs.added)
            last = t
        start, end = (float(x) for x in creator.stdout.readline().split())
        creator.wait(timeout=30)
    finally:
        w.close()
        if creator.poll() is None:
            creator.kill()
        shutil.rmtree(d, ignore_errors=True)
    print(f"burst of {args.files} files in {d.parent}: creating took {end - start:.3f} s; "
          f"all delivered {last - start:.3f} s after the first create, "
          f"{(last - end) * 1000:.0f} ms after the last, in {sets} change sets  "
          "[target: all within 1 s]")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
