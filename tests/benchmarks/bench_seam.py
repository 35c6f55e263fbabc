"""What the scheduling points (core/seam.py) cost the real path: an audited acquire+release
with nothing installed, beside the same cycle with every ``seam.step`` call made a C-level
no-op, and the count of steps a cycle announces. Target (docs/engine.md, "Every interleaving
checked"): the seam costs at most 5 % of an acquire+release. Prints figures; asserts nothing.

    .venv/bin/python tests/benchmarks/bench_seam.py [--cycles 400] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from core import seam  # noqa: E402
from core.engine.lock import Lock  # noqa: E402

MODULES_WITH_STEPS = ("core.engine.publish", "core.engine.takeover", "core.engine.entries",
                      "core.engine.remove", "core.engine.unheld", "core.engine.cleanup",
                      "core.kernel.pin", "core.fsutil", "core.verdicts.liveness",
                      "core.audit.appender")


def cycles(path: str, n: int) -> float:
    """Seconds per acquire+release, the median over ``n`` cycles timed in blocks of 20."""
    per: list[float] = []
    for _ in range(max(1, n // 20)):
        t0 = time.perf_counter()
        for _ in range(20):
            lk = Lock(path)
            lk.acquire(blocking=False)
            lk.release()
        per.append((time.perf_counter() - t0) / 20)
    return statistics.median(per)


class _Off:
    """A stand-in for the ``seam`` module whose ``step`` is a C function doing nothing
    (``max`` of two arguments): the cycle as if the calls were not in the code."""

    step = staticmethod(max)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lw-bench-seam-", dir="/dev/shm"
                                     if Path("/dev/shm").is_dir() else None) as d:
        path = str(Path(d) / "bench.lock")
        counted: list[str] = []
        seam.install(lambda kind, subject: counted.append(kind))
        lk = Lock(path)
        lk.acquire(blocking=False)
        lk.release()
        seam.install(None)
        steps = len(counted)
        t_call = min(_time_call() for _ in range(5))
        cycles(path, 100)  # warm
        mods = [sys.modules[m] for m in MODULES_WITH_STEPS if m in sys.modules]
        with_seam: list[float] = []
        without: list[float] = []
        for _ in range(args.rounds):
            with_seam.append(cycles(path, args.cycles))
            for m in mods:
                m.seam = _Off  # type: ignore[attr-defined]
            without.append(cycles(path, args.cycles))
            for m in mods:
                m.seam = seam  # type: ignore[attr-defined]
        a, b = statistics.median(with_seam), statistics.median(without)
        print(f"steps announced per acquire+release: {steps} "
              f"({', '.join(sorted(set(counted)))})")
        print(f"seam.step with no hook: {t_call * 1e9:.0f} ns a call; "
              f"{steps} calls = {steps * t_call * 1e6:.2f} us")
        print(f"acquire+release with the seam:       {a * 1e6:8.1f} us")
        print(f"acquire+release, steps made no-ops:  {b * 1e6:8.1f} us  (anchor, same run)")
        print(f"cost of the seam: {(a - b) / b * 100:+.1f} % measured, "
              f"{steps * t_call / b * 100:.2f} % from the calls' count  (target <= 5 %)")


def _time_call(n: int = 200_000) -> float:
    step = seam.step
    t0 = time.perf_counter()
    for _ in range(n):
        step("link", "x")
    return (time.perf_counter() - t0) / n


if __name__ == "__main__":
    main()
