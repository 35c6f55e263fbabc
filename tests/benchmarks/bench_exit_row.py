"""A holder's death in the app (docs/watching.md, "Holders' exits"; docs/gui.md, "Tray"): prints
figures beside the kernel's own floor measured in the same run; asserts nothing
(docs/DESIGN.md, "Testing"). Target (docs/performance.md, "Holders' exits"): a holder
SIGKILLed -> its table row stale and the tray icon changed, p95 <= 50 ms over 100 kills.

    QT_QPA_PLATFORM=offscreen .venv/bin/python tests/benchmarks/bench_exit_row.py
        [--holders 100] [--kills 100] [--gap 0.3] [--no-cli] [--window]

The real app (:class:`app.application.LockwardenApp`, offscreen, with its tray and a private
configuration and XDG directories) watches a temp directory of ``--holders`` locks, each taken
by ``lockwarden try PATH --pid PID`` for a ``sleep`` holder (stale as soon as its holder is
proven dead). The holders are SIGKILLed one at a time, ``--gap`` seconds of idle event loop
between two kills (the tray refreshes at most every 250 ms: a kill closer than that to the
last refresh waits for the rest of it). For each kill, from just before ``kill()``
(``time.perf_counter_ns``):

- **core**: the watcher's change set saying the lock stale reaches the app (the
  :class:`app.bridges.watch_bridge.WatchBridge`'s change listener, on the watcher's thread);
- **row**: the table model's ``dataChanged`` for the row, its status stale (GUI thread);
- **tray**: the tray icon's tooltip set with the new stale count (the icon is set just
  before it, in the same refresh; ``QSystemTrayIcon.setToolTip`` hooked on the instance);
- **watch --json** (unless ``--no-cli``): the stale line of a ``python -m core watch DIR --json
  --no-history`` watching the same directory in the same run (a second watcher: both judge
  every death, on 2 CPUs).

Beside them, in the same loop: the **floor**, a bare ``poll()`` on a pidfd of another
``sleep`` from just before ``kill()`` to the wake-up. ``--window`` shows the main window
(offscreen) too: the view then repaints the row in the same GUI thread.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
TMP = tempfile.mkdtemp(prefix="lw-exit-row-")
atexit.register(shutil.rmtree, TMP, ignore_errors=True)
for _var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
    os.environ[_var] = os.path.join(TMP, _var.lower())  # the app's and the CLI's, private
ENV = dict(os.environ, PYTHONPATH=str(ROOT))

from PySide6.QtCore import QEventLoop, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from core.record import State  # noqa: E402
from core.watch.watcher import ChangeSet  # noqa: E402
from tests.support.latency import pidfd_floor_once, summary_ms  # noqa: E402


def sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL)


def floor_once() -> float:
    """ms from just before SIGKILL to a bare ``poll()`` on the victim's pidfd waking up."""
    return pidfd_floor_once(sleeper)


def take_locks(d: str, n: int) -> list[tuple[str, subprocess.Popen[bytes]]]:
    """``n`` ``sleep`` holders, each holding ``d/hNNNN.lock`` through ``lockwarden try --pid``
    (four CLIs at a time)."""
    held: list[tuple[str, subprocess.Popen[bytes]]] = []
    for first in range(0, n, 4):
        batch = []
        for i in range(first, min(n, first + 4)):
            h = sleeper()
            path = os.path.join(d, f"h{i:04d}.lock")
            held.append((path, h))
            batch.append(subprocess.Popen(
                [sys.executable, "-m", "core", "try", path, "--pid", str(h.pid), "--tag", "bench"],
                cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE))
        for p in batch:
            _out, err = p.communicate()
            if p.returncode != 0:
                raise SystemExit(f"lockwarden try failed ({p.returncode}): {err.decode()}")
    return held


class CliLines:
    """``watch --json``'s stale lines: perf_counter_ns when each path's was read."""

    def __init__(self, d: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "core", "watch", d, "--json", "--no-history"], cwd=ROOT,
            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.cond = threading.Condition()
        self.ready = False
        self.stale: dict[str, int] = {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            t = time.perf_counter_ns()
            obj = json.loads(line)
            with self.cond:
                if obj.get("event") == "ready":
                    self.ready = True
                elif obj.get("event") == "changed" and obj.get("state") == "stale":
                    self.stale.setdefault(str(obj.get("path")), t)
                self.cond.notify_all()

    def wait(self, pred: Callable[[], bool], timeout: float = 30.0) -> bool:
        with self.cond:
            return self.cond.wait_for(pred, timeout)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(5)


def spin(seconds: float) -> None:
    """Run the Qt event loop for ``seconds``."""
    loop = QEventLoop()
    QTimer.singleShot(max(0, int(seconds * 1000)), loop.quit)
    loop.exec()


def spin_until(pred: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > end:
            return False
        spin(0.01)
    return True


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--holders", type=int, default=100, help="locks, one holder each (100)")
    ap.add_argument("--kills", type=int, default=100, help="holders killed, one at a time")
    ap.add_argument("--gap", type=float, default=0.3, help="s of idle event loop between kills")
    ap.add_argument("--no-cli", action="store_true", help="no watch --json beside the app")
    ap.add_argument("--window", action="store_true", help="show the main window (offscreen)")
    args = ap.parse_args()
    kills = min(args.kills, args.holders)
    print(f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs, kernel {os.uname().release}")
    qapp = QApplication([sys.argv[0]])
    from app.application import LockwardenApp
    from core import config as cfgmod

    d = os.path.join(TMP, "locks")
    os.mkdir(d)
    t = time.monotonic()
    held = take_locks(d, args.holders)
    print(f"{args.holders} locks taken by lockwarden try --pid in {time.monotonic() - t:.1f} s")
    cli = None if args.no_cli else CliLines(d)
    cfg = os.path.join(TMP, "config.toml")
    cfgmod.save(cfgmod.Config(watches=[cfgmod.WatchSpec(path=d)],
                              notifications=cfgmod.NotificationSettings(paused=True)), cfg)
    lw: Any = LockwardenApp(qapp, config_path=cfg, use_tray=True)
    try:
        lw.start(show_window=args.window)
        model, tray = lw.model, lw.tray
        assert tray is not None
        if not spin_until(lambda: lw.inventory.initial_done
                          and model.counts()[State.HELD] == args.holders, 60):
            raise SystemExit(f"the app did not list {args.holders} held locks: {model.counts()}")
        if cli is not None and not cli.wait(lambda: cli.ready):
            raise SystemExit("watch --json never said ready")
        spin(0.5)

        target: list[Any] = [None, 0]  # path, expected stale count
        t_core: dict[str, int] = {}
        t_row: dict[str, int] = {}
        t_tray: dict[str, int] = {}
        waiting = QEventLoop()

        def on_changes(cs: ChangeSet) -> None:  # the watcher's thread
            t = time.perf_counter_ns()
            for s in cs.changed:
                if s.state is State.STALE:
                    t_core.setdefault(s.path, t)

        def on_data(*_a: object) -> None:
            t = time.perf_counter_ns()
            path = target[0]
            if path is not None and path not in t_row:
                st = model.status_of(path)
                if st is not None and st.state is State.STALE:
                    t_row[path] = t
                    done()

        set_tip = tray.icon.setToolTip

        def on_tip(text: str) -> None:
            set_tip(text)
            t = time.perf_counter_ns()
            path = target[0]
            if path is not None and path not in t_tray and tray.badge == target[1]:
                t_tray[path] = t
                done()

        def done() -> None:
            path = target[0]
            if path in t_row and path in t_tray:
                waiting.quit()

        lw.inventory.change_listeners.append(on_changes)
        model.dataChanged.connect(on_data)
        tray.icon.setToolTip = on_tip
        floor: list[float] = []
        core_ms: list[float] = []
        row_ms: list[float] = []
        tray_ms: list[float] = []
        cli_ms: list[float] = []
        states: set[str] = set()
        for i, (path, holder) in enumerate(held[:kills]):
            spin(args.gap)
            floor.append(floor_once())
            target[:] = [path, i + 1]
            guard = QTimer()
            guard.setSingleShot(True)
            guard.timeout.connect(waiting.quit)
            guard.start(30_000)
            t0 = time.perf_counter_ns()
            os.kill(holder.pid, signal.SIGKILL)
            waiting.exec()
            guard.stop()
            if path not in t_row or path not in t_tray:
                raise SystemExit(f"kill {i}: no stale row or tray change within 30 s")
            holder.wait()
            states.add(tray.state)
            row_ms.append((t_row[path] - t0) / 1e6)
            tray_ms.append((t_tray[path] - t0) / 1e6)
            if path in t_core:
                core_ms.append((t_core[path] - t0) / 1e6)
            if cli is not None:
                if not cli.wait(lambda p=path: p in cli.stale):  # type: ignore[misc]
                    raise SystemExit(f"kill {i}: no watch --json stale line within 30 s")
                cli_ms.append((cli.stale[path] - t0) / 1e6)
        counts = model.counts()
        print(f"holder SIGKILLed -> the app ({kills} kills, {args.gap:g} s apart; "
              f"{args.holders} holders; window {'shown' if args.window else 'hidden'}; at the "
              f"end {counts[State.STALE]} stale, {counts[State.HELD]} held, tray {sorted(states)})")
        print(f"  floor: bare pidfd poll() wake-up               {summary_ms(floor)}")
        if cli is not None:
            print(f"  watch --json stale line (second watcher)       {summary_ms(cli_ms)}")
        print(f"  core: change set reaches the app's bridge      {summary_ms(core_ms)}")
        print(f"  row: model dataChanged, status stale           {summary_ms(row_ms)}")
        print(f"  tray: icon and tooltip set, new stale count    {summary_ms(tray_ms)}")
    finally:
        if cli is not None:
            cli.close()
        lw.finish_quit(release=False)
        lw.dispose()
        for _p, h in held:
            if h.poll() is None:
                h.kill()
            h.wait()
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
