"""GUI under load: N locks in the table (10,000 by default; ``--rows 100000`` for the large
case), then 1,000 lock changes per second for 10 s, fed from a worker thread through the same
path the watcher uses (WatchBridge.push -> queued signal -> model.apply), with the main window
shown and sorted by age.

Prints the longest GUI event-loop stall during the first fill and under load (targets <= 50 ms
at 10,000 rows, <= 100 ms at 100,000), the fill time and RSS at the end. Anchor of the same
run, printed beside: the longest gap of the same 5 ms probe timer over 2 s of an idle event
loop with the window shown and empty (the machine's own scheduling jitter, the floor of every
stall figure). Asserts nothing (docs/DESIGN.md "Testing").

``--sort 0`` sorts by state instead (the window's default: every change of state then moves its
row, the proxy's re-sort path).

Run: ``.venv/bin/python tests/benchmarks/bench_gui_throughput.py [--rows N] [--sort COL]``
(offscreen Qt)."""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import psutil
from PySide6.QtCore import QElapsedTimer, QEventLoop, Qt, QTimer
from PySide6.QtWidgets import QApplication

from core.codes import Code
from core.reasons import Reason
from core.record import Liveness, LockRecord, LockStatus, State

RATE = 1_000  # changes per second
SECONDS = 10.0
BATCH_EVERY = 0.01  # the feeder pushes every 10 ms
LONG_GAPS: list[tuple[float, float]] = []
"""(perf_counter at its end, ms) of every probe gap over 25 ms, for a profiler to look at."""


def make(i: int, variant: int, now: datetime) -> LockStatus:
    path = f"/bench/dir{i % 50}/lock-{i:05d}.lock"
    state = (State.HELD, State.STALE, State.EXPIRED, State.HELD)[variant % 4]
    live = (Liveness.ALIVE, Liveness.DEAD, Liveness.ALIVE, Liveness.REMOTE)[variant % 4]
    rec = LockRecord(path=path, format="sema", pid=1000 + i, host="bench",
                     acquired_at=now - timedelta(seconds=i % 7200), tag=f"job {i} v{variant}",
                     raw=f"pid={1000 + i}\n")
    return LockStatus(path=path, state=state, liveness=live, record=rec, checked_at=now,
                      reasons=(Reason.of(Code.HELD_FOR, age_s=float(i % 7200)),))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000, help="locks in the table (10000)")
    ap.add_argument("--seconds", type=float, default=SECONDS, help="seconds of changes (10)")
    ap.add_argument("--sort", type=int, default=7, help="column sorted by (7: age; 0: state)")
    args = ap.parse_args()
    rows: int = args.rows
    seconds: float = args.seconds
    qapp = QApplication([sys.argv[0]])
    from app.application import LockwardenApp
    from core import config as cfgmod

    tmp = tempfile.mkdtemp(prefix="lockwarden-bench-")
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)  # the config and the GUI's state
    cfg = str(Path(tmp) / "config.toml")
    cfgmod.save(cfgmod.Config(watches=[cfgmod.WatchSpec(path="/bench")]), cfg)
    lw = LockwardenApp(qapp, config_path=cfg, use_tray=False)
    lw.window.show()
    lw.window.table.sortByColumn(args.sort, Qt.SortOrder.AscendingOrder)
    now = datetime.now(UTC)

    # event-loop stall probe: a 5 ms timer; the longest gap between its ticks minus 5 ms
    gaps: list[float] = []
    clock = QElapsedTimer()
    clock.start()
    last = [clock.nsecsElapsed()]

    def probe() -> None:
        t = clock.nsecsElapsed()
        gap = (t - last[0]) / 1e6
        gaps.append(gap)
        last[0] = t
        if gap > 25:
            LONG_GAPS.append((time.perf_counter(), gap))

    timer = QTimer()
    timer.setTimerType(Qt.TimerType.PreciseTimer)
    timer.timeout.connect(probe)
    timer.start(5)

    def spin_until(pred: object, timeout: float) -> None:
        end = time.monotonic() + timeout
        while not pred() and time.monotonic() < end:  # type: ignore[operator]
            loop = QEventLoop()
            QTimer.singleShot(20, loop.quit)
            loop.exec()

    # anchor: the probe over an idle loop (window shown, empty)
    spin_until(lambda: False, 2.0)
    idle_stall = max(gaps) - 5 if gaps else 0.0
    gaps.clear()
    statuses = [make(i, 0, now) for i in range(rows)]
    last[0] = clock.nsecsElapsed()
    t0 = time.perf_counter()
    threading.Thread(target=lambda: lw.inventory.push((s.path, s) for s in statuses)).start()
    spin_until(lambda: lw.model.rowCount() == rows, 60)
    fill = time.perf_counter() - t0
    fill_stall = max(gaps) - 5 if gaps else 0.0

    # precompute the changes so the feeder measures the GUI, not object construction (and
    # before the probe restarts: building them used to count as an ~80 ms stall)
    total = int(RATE * seconds)
    changes = [make((k * 7919) % rows, 1 + k % 4, now) for k in range(total)]
    gaps.clear()
    last[0] = clock.nsecsElapsed()
    per_batch = int(RATE * BATCH_EVERY)
    done = threading.Event()

    def feed() -> None:
        start = time.perf_counter()
        for b in range(0, total, per_batch):
            target = start + (b / RATE)
            delay = target - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            lw.inventory.push((s.path, s) for s in changes[b:b + per_batch])
        done.set()

    t1 = time.perf_counter()
    threading.Thread(target=feed, daemon=True).start()
    spin_until(done.is_set, seconds * 3)
    spin_until(lambda: False, 0.5)  # drain
    elapsed = time.perf_counter() - t1
    load_stall = max(gaps) - 5 if gaps else 0.0
    gaps_sorted = sorted(gaps)
    p99 = gaps_sorted[int(len(gaps_sorted) * 0.99)] - 5 if gaps_sorted else 0.0
    rss = psutil.Process().memory_info().rss / 2**20
    counts = lw.model.counts()
    print(f"rows: {lw.model.rowCount()}  (stale {counts[State.STALE]}, "
          f"expired {counts[State.EXPIRED]}, held {counts[State.HELD]})")
    print(f"initial fill of {rows} rows: {fill * 1000:.0f} ms, longest stall {fill_stall:.0f} ms")
    print(f"{total} changes in {elapsed:.1f} s ({total / elapsed:.0f}/s), "
          f"sorted by {'age' if args.sort == 7 else f'column {args.sort}'}, window shown")
    print(f"longest GUI event-loop stall under load: {load_stall:.1f} ms "
          f"(target <= 100 ms); p99 stall {p99:.1f} ms")
    print(f"RSS at the end: {rss:.0f} MiB")
    print(f"anchor, same run: idle event loop's longest probe gap over 2 s: {idle_stall:.1f} ms; "
          f"load average {os.getloadavg()[0]:.2f}")
    lw.finish_quit(release=False)
    lw.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
