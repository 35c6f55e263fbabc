"""``watch --json`` latency under a steady stream: time from a file change to the line that
reports it, read from the watching process's stdout. Prints p50/p95/max in ms per rate, beside
an anchor measured in the same run; asserts nothing (docs/DESIGN.md "Testing").
Target (docs/performance.md): p95 <= 20 ms at 100 and 1,000 files/s.

    .venv/bin/python tests/benchmarks/bench_watch_stream.py [--seconds 3] [--dir DIR]

Each run gets a fresh directory and a fresh watching process (started, then fed once its
``ready`` line is out). The writer (this process) creates lock files at a steady rate, each
``open``/``write``/``close`` like most tools (``IN_CLOSE_WRITE``); ``t0`` is read just before
the ``open``. A reader thread reads the watcher's stdout and stamps each ``added`` line.

Contenders, each a separate process printing one JSON line per new file:
- ``lockwarden watch --json`` (``python -m core watch DIR --json``, this worktree's code).
- ``inotify floor``: a 20-line ``inotify_simple`` loop that prints ``{"path": ...}`` on each
  ``IN_CLOSE_WRITE``/``IN_MOVED_TO``, reading nothing (what any watcher in Python costs at
  least: kernel event, wake-up, one line through a pipe).
- ``lockwarden watch``, files made by ``link()`` (how Lockwarden's own ``acquire`` publishes:
  only ``IN_CREATE``, no close after writing, so the 20 ms debounce applies).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FLOOR = r"""
import json, os, sys, inotify_simple
d = sys.argv[1]
ino = inotify_simple.INotify()
F = inotify_simple.flags
ino.add_watch(d, F.CLOSE_WRITE | F.MOVED_TO)
print(json.dumps({"event": "ready"}), flush=True)
while True:
    for ev in ino.read():
        if ev.name.endswith(".lock"):
            print(json.dumps({"event": "added", "path": os.path.join(d, ev.name)}), flush=True)
"""

TEXT = "pid={pid}\ntimestamp={ts}\ntag=stream\n"


def _start(kind: str, d: str) -> subprocess.Popen[bytes]:
    if kind == "floor":
        cmd = [sys.executable, "-c", FLOOR, d]
    else:
        cmd = [sys.executable, "-m", "core", "watch", d, "--json"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    assert p.stdout is not None
    while True:
        line = p.stdout.readline()
        if not line:
            raise SystemExit(f"{kind}: exited before it was ready")
        if json.loads(line).get("event") == "ready":
            return p


def _write(path: str, how: str) -> None:
    text = TEXT.format(pid=os.getpid(), ts=int(time.time())).encode()
    if how == "close":
        with open(path, "wb") as f:
            f.write(text)
        return
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
    with open(tmp, "wb") as f:
        f.write(text)
    os.link(tmp, path)
    os.unlink(tmp)


def run(kind: str, how: str, rate: int, seconds: float, parent: str | None) -> list[float]:
    """Latencies (ms) of ``rate * seconds`` files created at ``rate`` per second."""
    d = tempfile.mkdtemp(prefix="lw-stream-", dir=parent)
    p = _start(kind, d)
    t0s: dict[str, float] = {}
    got: dict[str, float] = {}
    n = int(rate * seconds)
    done = threading.Event()

    def reader() -> None:
        assert p.stdout is not None
        for line in p.stdout:
            t1 = time.monotonic()
            obj = json.loads(line)
            if obj.get("event") == "added":
                got.setdefault(obj["path"], t1)
                if len(got) >= n:
                    break
        done.set()

    threading.Thread(target=reader, daemon=True).start()
    try:
        start = time.monotonic() + 0.05
        for i in range(n):
            at = start + i / rate
            pause = at - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            path = os.path.join(d, f"s{i:06d}.lock")
            t0s[path] = time.monotonic()
            _write(path, how)
        done.wait(10.0)
    finally:
        p.terminate()
        p.wait(5)
        shutil.rmtree(d, ignore_errors=True)
    missing = n - sum(1 for k in t0s if k in got)
    if missing:
        print(f"    ({kind}: {missing} of {n} files never reported within 10 s)")
    return [(got[k] - t0s[k]) * 1000 for k in t0s if k in got]


def _p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20)[-1] if len(xs) > 1 else xs[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--dir", help="parent directory for the temp lock directories")
    args = ap.parse_args()
    print(f"watch --json latency, file change -> printed line, {args.seconds:g} s per run, "
          f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    rows = [
        ("inotify floor (open/write/close)", "floor", "close"),
        ("lockwarden watch --json (open/write/close)", "lockwarden", "close"),
        ("lockwarden watch --json (link, IN_CREATE only)", "lockwarden", "link"),
    ]
    for rate in (100, 1000):
        for name, kind, how in rows:
            xs = sorted(run(kind, how, rate, args.seconds, args.dir))
            print(f"  {rate:5d}/s  {name:48s} p50 {statistics.median(xs):6.1f} ms  "
                  f"p95 {_p95(xs):6.1f} ms  max {xs[-1]:6.1f} ms  (n={len(xs)})")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
