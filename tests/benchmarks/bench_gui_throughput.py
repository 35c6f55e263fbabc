"""GUI under load: 10,000 locks in the table, then 1,000 lock changes per second for 10 s,
fed from a worker thread through the same path the watcher uses (Inventory.push -> queued
signal -> model.apply), with the main window shown and sorted by age.

Prints the longest GUI event-loop stall (target <= 100 ms), the fill time and RSS at the end.
Run: ``.venv/bin/python tests/benchmarks/bench_gui_throughput.py`` (offscreen Qt)."""

from __future__ import annotations

import os
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

from core.reasons import Code, Reason
from core.record import Liveness, LockRecord, LockStatus, State

ROWS = 10_000
RATE = 1_000  # changes per second
SECONDS = 10.0
BATCH_EVERY = 0.01  # the feeder pushes every 10 ms


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
    qapp = QApplication([sys.argv[0]])
    from app.application import LockwardenApp
    from core import config as cfgmod

    tmp = tempfile.mkdtemp(prefix="lockwarden-bench-")
    cfg = str(Path(tmp) / "config.toml")
    cfgmod.save(cfgmod.Config(watches=[cfgmod.WatchSpec(path="/bench")]), cfg)
    lw = LockwardenApp(qapp, config_path=cfg, use_tray=False)
    lw.window.show()
    lw.window.table.sortByColumn(7, Qt.SortOrder.AscendingOrder)
    now = datetime.now(UTC)

    # event-loop stall probe: a 5 ms timer; the longest gap between its ticks minus 5 ms
    gaps: list[float] = []
    clock = QElapsedTimer()
    clock.start()
    last = [clock.nsecsElapsed()]

    def probe() -> None:
        t = clock.nsecsElapsed()
        gaps.append((t - last[0]) / 1e6)
        last[0] = t

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

    t0 = time.perf_counter()
    statuses = [make(i, 0, now) for i in range(ROWS)]
    threading.Thread(target=lambda: lw.inventory.push((s.path, s) for s in statuses)).start()
    spin_until(lambda: lw.model.rowCount() == ROWS, 60)
    fill = time.perf_counter() - t0
    fill_stall = max(gaps) - 5 if gaps else 0.0
    gaps.clear()
    last[0] = clock.nsecsElapsed()

    # precompute the changes so the feeder measures the GUI, not object construction
    total = int(RATE * SECONDS)
    changes = [make((k * 7919) % ROWS, 1 + k % 4, now) for k in range(total)]
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
    spin_until(done.is_set, SECONDS * 3)
    spin_until(lambda: False, 0.5)  # drain
    elapsed = time.perf_counter() - t1
    load_stall = max(gaps) - 5 if gaps else 0.0
    gaps_sorted = sorted(gaps)
    p99 = gaps_sorted[int(len(gaps_sorted) * 0.99)] - 5 if gaps_sorted else 0.0
    rss = psutil.Process().memory_info().rss / 2**20
    counts = lw.model.counts()
    print(f"rows: {lw.model.rowCount()}  (stale {counts[State.STALE]}, "
          f"expired {counts[State.EXPIRED]}, held {counts[State.HELD]})")
    print(f"initial fill of {ROWS} rows: {fill * 1000:.0f} ms, longest stall {fill_stall:.0f} ms")
    print(f"{total} changes in {elapsed:.1f} s ({total / elapsed:.0f}/s), "
          f"sorted by age, window shown")
    print(f"longest GUI event-loop stall under load: {load_stall:.1f} ms "
          f"(target <= 100 ms); p99 stall {p99:.1f} ms")
    print(f"RSS at the end: {rss:.0f} MiB")
    lw.finish_quit(release=False)
    lw.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
