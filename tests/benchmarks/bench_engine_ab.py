"""Before/after of the uncontended acquire+release cycle on a noisy machine: this tree and
another export of the code (``--before DIR``, e.g. ``git archive <commit> | tar -x -C DIR``)
each run in a persistent process, their rounds interleaved (ABBA), beside filelock and
flufl.lock measured in the same processes. Prints the median and the minimum of the rounds
(µs per cycle); asserts nothing.

    .venv/bin/python tests/benchmarks/bench_engine_ab.py --before /tmp/base [--rounds 25]

Contenders per process: ``default`` (``Lock.acquire(blocking=False)`` + ``release()``, audited),
``audit_off`` (the engine's audit calls replaced by a no-op), ``filelock`` and ``flufl``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import os, sys, tempfile, time
from datetime import timedelta
sys.path.insert(0, sys.argv[1])
cycles = int(sys.argv[2])
d = tempfile.mkdtemp(prefix="lw-ab-")
os.environ["XDG_STATE_HOME"] = os.path.join(d, "state")   # chain heads: private
import core.engine.lock as engine
import filelock
from flufl.lock import Lock as Flufl
lk = engine.Lock(os.path.join(d, "on.lock"), tag="bench")
lk_off = engine.Lock(os.path.join(d, "off.lock"), tag="bench")
fl = filelock.FileLock(os.path.join(d, "fl.lock"))
ff = Flufl(os.path.join(d, "ff.lock"), lifetime=timedelta(seconds=60))
audit = engine._audit
def default():
    lk.acquire(blocking=False); lk.release()
def audit_off():
    engine._audit = lambda *a, **k: None
    try:
        lk_off.acquire(blocking=False); lk_off.release()
    finally:
        engine._audit = audit
fns = {"default": default, "audit_off": audit_off,
       "filelock": lambda: (fl.acquire(), fl.release()), "flufl": lambda: (ff.lock(), ff.unlock())}
for fn in fns.values():
    for _ in range(30):
        fn()
print("ready", flush=True)
for line in sys.stdin:
    fn = fns[line.strip()]
    t0 = time.perf_counter()
    for _ in range(cycles):
        fn()
    print((time.perf_counter() - t0) / cycles * 1e6, flush=True)
"""

NAMES = ("default", "audit_off", "filelock", "flufl")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True, help="directory holding the other code's core/")
    ap.add_argument("--rounds", type=int, default=25)
    ap.add_argument("--cycles", type=int, default=200)
    args = ap.parse_args()
    roots = {"before": str(Path(args.before).resolve()), "after": str(ROOT)}
    procs = {
        k: subprocess.Popen([sys.executable, "-c", CHILD, r, str(args.cycles)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for k, r in roots.items()
    }  # fmt: skip
    res: dict[tuple[str, str], list[float]] = {(k, n): [] for k in roots for n in NAMES}
    try:
        for p in procs.values():
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        for r in range(args.rounds):
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for n in NAMES:
                for k in order:
                    p = procs[k]
                    assert p.stdin is not None and p.stdout is not None
                    p.stdin.write(n + "\n")
                    p.stdin.flush()
                    res[(k, n)].append(float(p.stdout.readline()))
    finally:
        for p in procs.values():
            if p.stdin is not None:
                p.stdin.close()
            p.wait()
    print(f"acquire+release, {args.rounds} interleaved rounds x {args.cycles} cycles, "
          f"load {os.getloadavg()[0]:.2f}; us per cycle: median (min)")
    for n in NAMES:
        cols = "  ".join(f"{k}: {statistics.median(res[(k, n)]):7.1f} ({min(res[(k, n)]):7.1f})"
                         for k in roots)
        print(f"  {n:10s} {cols}")


if __name__ == "__main__":
    main()
