"""History (docs/history.md): the recorder's CPU at 1,000 transitions/s, ``lockwarden
history`` on a lock with 100,000 transitions, and the timeline of a week. Prints figures;
asserts nothing about speed (docs/DESIGN.md "Testing").

    .venv/bin/python tests/benchmarks/bench_history.py [--seconds 10] [--rows 100000]

Targets: recording 1,000 transitions/s costs at most 5 % of a core (the recorder's thread plus
the watcher-side ``on_change``); ``history`` answers in at most 200 ms for 100,000 transitions
(the whole command, interpreter start-up included, output to /dev/null); a week's timeline
draws in at most 50 ms.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from core.history.model import Observation  # noqa: E402
from core.history.recorder import Recorder  # noqa: E402
from core.history.store import HistoryStore  # noqa: E402
from core.record import Liveness, LockRecord, LockStatus, State  # noqa: E402
from core.watch.inventory import ChangeSet  # noqa: E402


def statuses(n_locks: int) -> list[list[LockStatus]]:
    """Two verdicts per lock (holder A, holder B): alternating them is a transition each."""
    now = datetime.now(UTC)
    out: list[list[LockStatus]] = []
    for pid in (1000, 2000):
        out.append([LockStatus(path=f"/bench/{i}.lock", state=State.HELD,
                               liveness=Liveness.ALIVE, checked_at=now,
                               record=LockRecord(path=f"/bench/{i}.lock", format="sema",
                                                 pid=pid + i, host="bench", acquired_at=now))
                    for i in range(n_locks)])
    return out


def thread_cpu(native_id: int) -> float:
    for t in psutil.Process().threads():
        if t.id == native_id:
            return t.user_time + t.system_time
    return 0.0


def bench_recording(d: Path, seconds: float, rate: int) -> None:
    per_tick = rate // 100  # one change set every 10 ms
    a, b = statuses(per_tick)
    rec = Recorder(str(d / "rec.sqlite3"), keep_s=None)
    rec.start()
    assert rec._thread is not None and rec._thread.native_id is not None
    native = rec._thread.native_id
    rec.flush()
    cpu0, feed = thread_cpu(native), 0.0
    start = time.monotonic()
    ticks = int(seconds * 100)
    for k in range(ticks):
        due = start + k / 100
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        c0 = time.thread_time()
        rec.on_change(ChangeSet(changed=a if k % 2 == 0 else b))
        feed += time.thread_time() - c0
    rec.flush(60)
    wall = time.monotonic() - start
    cpu = thread_cpu(native) - cpu0
    rec.close()
    print(f"recording: {rec.written} transitions in {wall:.1f} s "
          f"({rec.written / wall:.0f}/s); recorder thread {100 * cpu / wall:.1f} % of a core, "
          f"on_change (watcher's thread) {100 * feed / wall:.1f} %; total "
          f"{100 * (cpu + feed) / wall:.1f} % (target <= 5 %)")


def bench_history_cli(d: Path, rows: int) -> None:
    data = d / "data"
    db = data / "lockwarden" / "history.sqlite3"
    store = HistoryStore(str(db))
    now = time.time() - rows
    for start in range(0, rows, 10_000):
        store.record([Observation("/bench/busy.lock", now + i, ("held", "free")[i % 2],
                                  pid=100 + i % 13 if i % 2 == 0 else None,
                                  ident=str(i) if i % 2 == 0 else "")
                      for i in range(start, min(rows, start + 10_000))])
    print(f"history: {store.count()} transitions of one lock, "
          f"{os.path.getsize(db) / 1e6:.1f} MB")
    store.close()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_DATA_HOME": str(data)}
    for extra in ((), ("--json",), ("--since", "1h")):
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "core", "history", "/bench/busy.lock",
                            *extra], env=env, stdout=subprocess.DEVNULL, check=True)
            times.append((time.perf_counter() - t0) * 1000)
        print(f"  lockwarden history {' '.join(extra) or '(text)':<12} median "
              f"{statistics.median(times):.0f} ms, best {min(times):.0f} ms (target <= 200 ms)")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    print(f"  (python -c pass: {(time.perf_counter() - t0) * 1000:.0f} ms)")


def bench_timeline(rows: int) -> None:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from app.history.timeline import TimelineWidget
    from core.history.model import Transition
    from core.history.spans import spans_of

    app = QApplication.instance() or QApplication([])
    now = time.time()
    week = 7 * 86400.0
    trs = [Transition(id=i, lock="/bench/busy.lock", t=now - week + i * week / rows,
                      state=("held", "stale", "free")[i % 3], event="seen", pid=100 + i % 9,
                      audit_id="x" if i % 50 == 0 else None) for i in range(rows)]
    spans = spans_of(trs, now - week, now)
    w = TimelineWidget()
    w.resize(1200, 80)
    w.show()
    w.set_data(spans, trs, now - week, now)
    times = []
    for _ in range(10):
        w.repaint()
        app.processEvents()
        times.append(w.last_paint_ms)
    print(f"timeline: a week, {rows} transitions: paint median {statistics.median(times):.1f} "
          f"ms, worst {max(times):.1f} ms (target <= 50 ms)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=int, default=1000, help="transitions per second")
    ap.add_argument("--rows", type=int, default=100_000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="lockwarden-bench-history-") as tmp:
        d = Path(tmp)
        bench_recording(d, args.seconds, args.rate)
        bench_history_cli(d, args.rows)
        bench_timeline(args.rows)


if __name__ == "__main__":
    main()
