"""Parse cost of ``/proc/locks`` (core.kernel.locks): 10 000 synthetic lines (flock, POSIX
whole-file and byte ranges, OFD with PID -1, some blocked waiters), parsed in full and filtered
first for 50 watched files. Then, on Linux, 100 real files (a child process holds lockf on half
of them) looked up both ways in the same run: ``kernel_holders(source="proc")`` (read
``/proc/locks`` + filter) next to ``source="getlk"`` (one ``F_GETLK`` per file, the fallback where
``/proc/locks`` is absent, core.kernel.getlk). Prints figures; asserts nothing about speed
(docs/DESIGN.md "Testing").

    .venv/bin/python tests/benchmarks/bench_proc_locks.py [--lines 10000] [--rounds 20]

For comparison, docs/specs/devtool-locks.md (§2.6, "Cost of polling") measured 39 ms for read +
full parse of 10 000 real flock lines with a dict per line, 19 ms filter-first, and 131 s for
``lslocks``.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core.kernel.locks import kernel_holders, locks_on, parse_proc_locks  # noqa: E402

HOLD_HALF = r"""
import fcntl, os, sys
fds = []
for path in sys.argv[1:]:
    fd = os.open(path, os.O_RDWR)
    fcntl.lockf(fd, fcntl.LOCK_EX)
    fds.append(fd)
print("ready", flush=True)
sys.stdin.read()
"""


def bench_watched(n: int, rounds: int) -> None:
    """``n`` real files, half lockf-held by a child: /proc/locks pass vs F_GETLK pass."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = [os.path.join(tmp, f"f{i}.lock") for i in range(n)]
        for p in paths:
            Path(p).write_text("")
        child = subprocess.Popen([sys.executable, "-c", HOLD_HALF, *paths[::2]],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None and child.stdout.readline() == "ready\n"
            print(f"{n} watched files, {len(paths[::2])} lockf-held by one child; "
                  f"{rounds} rounds, median (min)")
            for source in ("proc", "getlk"):
                med, low = timed(lambda s=source: kernel_holders(paths, source=s), rounds)
                held = len(kernel_holders(paths, source=source))
                print(f"  kernel_holders source={source:<6}: {med:7.2f} ms ({low:.2f})  "
                      f"{held} held")
        finally:
            child.kill()
            child.wait()


def synthetic(n: int, seed: int = 7) -> str:
    """``n`` lines shaped like Linux 6.x ``/proc/locks``."""
    rnd = random.Random(seed)
    lines = []
    for i in range(1, n + 1):
        ino = 2_000_000 + i
        pick = i % 10
        if pick < 5:
            line = f"{i}: FLOCK  ADVISORY  WRITE {rnd.randint(300, 99999)} fe:00:{ino} 0 EOF"
        elif pick < 7:
            line = f"{i}: POSIX  ADVISORY  READ {rnd.randint(300, 99999)} fe:00:{ino} 0 EOF"
        elif pick < 8:
            start = rnd.randint(0, 10_000)
            line = (f"{i}: POSIX  ADVISORY  WRITE {rnd.randint(300, 99999)} 103:02:{ino} "
                    f"{start} {start + 99}")
        elif pick < 9:
            line = f"{i}: OFDLCK ADVISORY  WRITE -1 fe:00:{ino} 0 EOF"
        else:
            pid = rnd.randint(300, 99999)
            line = f"{i - 1}: -> FLOCK  ADVISORY  WRITE {pid} fe:00:{ino - 1} 0 EOF"
        lines.append(line)
    return "\n".join(lines) + "\n"


def timed(fn: object, rounds: int) -> tuple[float, float]:
    assert callable(fn)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    text = synthetic(args.lines)
    keys = [(0xFE, 0, 2_000_000 + i) for i in range(1, args.lines + 1, args.lines // 50)]
    print(f"/proc/locks synthetic: {args.lines} lines, {len(text)} bytes; "
          f"{args.rounds} rounds, median (min)")
    med, low = timed(lambda: parse_proc_locks(text), args.rounds)
    n = len(parse_proc_locks(text))
    print(f"  full parse (typed records)   : {med:7.2f} ms ({low:.2f})  {n} holders")
    med, low = timed(lambda: parse_proc_locks(text, waiters=True), args.rounds)
    print(f"  full parse, waiters included : {med:7.2f} ms ({low:.2f})")
    med, low = timed(lambda: locks_on(text, keys), args.rounds)
    hits = sum(len(v) for v in locks_on(text, keys).values())
    print(f"  filter-first, {len(keys)} files      : {med:7.2f} ms ({low:.2f})  {hits} hits")
    try:
        med, low = timed(lambda: Path("/proc/locks").read_text(), args.rounds)
        print(f"  read this host's /proc/locks : {med:7.2f} ms ({low:.2f})")
    except OSError:
        pass
    if os.path.exists("/proc/locks"):
        bench_watched(100, args.rounds)


if __name__ == "__main__":
    main()
