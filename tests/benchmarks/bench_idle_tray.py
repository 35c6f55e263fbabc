"""The idle tray app: RSS and CPU of ``python -m app --minimized`` (tray icon only, no window)
over 60 s with the default watches (a fresh configuration) while /tmp is busy, under a real X
server (Xvfb) with a real tray host (trayer), as tests/app/test_tray_xvfb.py runs it.

Targets (docs/performance.md "Idle tray"): <= 80 MB RSS, <= 0.2 % of one core. Printed beside
them, anchors of the same run measured the same way: a bare PySide6 tray icon (QApplication +
QSystemTrayIcon with one icon and a menu: the floor any Qt tray app pays) and the same
interpreter sleeping. Also printed: wake-ups (context switches of all threads per second).
Asserts nothing (docs/DESIGN.md "Testing").

    .venv/bin/python tests/benchmarks/bench_idle_tray.py [--seconds 60] [--churn 50]

``--churn N``: a helper creates, writes and deletes N files a second in /tmp (names
``lockwarden-bench-churn-*.tmp``, none a lock), the "busy /tmp" of a build machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]

BARE_TRAY = r"""
import sys
from PySide6.QtGui import QIcon, QPixmap, QColor
from PySide6.QtWidgets import QApplication, QMenu, QSystemTrayIcon
app = QApplication([sys.argv[0]])
app.setQuitOnLastWindowClosed(False)
pm = QPixmap(22, 22); pm.fill(QColor("#3a7"))
icon = QSystemTrayIcon(QIcon(pm)); menu = QMenu(); menu.addAction("Quit", app.quit)
icon.setContextMenu(menu); icon.show()
print("ready", flush=True)
sys.exit(app.exec())
"""

SLEEPER = "import time; print('ready', flush=True); time.sleep(3600)"

CHURN = r"""
import os, sys, time
rate = float(sys.argv[1]); i = 0; start = time.monotonic()
while True:
    p = f"/tmp/lockwarden-bench-churn-{os.getpid()}-{i % 64}.tmp"
    with open(p, "w") as f:
        f.write("x" * 100)
    if i % 2:
        os.unlink(p)
    i += 1
    delay = start + i / rate - time.monotonic()
    if delay > 0:
        time.sleep(delay)
"""


def free_display() -> int:
    """A display number without an X server."""
    for n in range(141, 199):
        if not Path(f"/tmp/.X{n}-lock").exists() and not Path(f"/tmp/.X11-unix/X{n}").exists():
            return n
    raise RuntimeError("no free X display number")


def start_x() -> tuple[str, list[subprocess.Popen[bytes]]]:
    """Xvfb with trayer as the tray host; (DISPLAY, processes to stop)."""
    xvfb, trayer = shutil.which("Xvfb"), shutil.which("trayer")
    if not xvfb or not trayer:
        sys.exit("Xvfb and trayer are needed (Debian: xvfb trayer)")
    n = free_display()
    display = f":{n}"
    x = subprocess.Popen([xvfb, display, "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sock = Path(f"/tmp/.X11-unix/X{n}")
    deadline = time.monotonic() + 15
    while not sock.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    env = dict(os.environ, DISPLAY=display)
    t = subprocess.Popen([trayer, "--edge", "top", "--align", "right", "--widthtype", "request",
                          "--height", "32", "--SetDockType", "true"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # trayer takes the tray selection
    return display, [t, x]


def switches(p: psutil.Process) -> int:
    """Voluntary + involuntary context switches of every thread of ``p`` (wake-ups)."""
    total = 0
    for task in Path(f"/proc/{p.pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if line.endswith("ctxt_switches:") or "ctxt_switches:" in line:
                    total += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return total


def measure(p: psutil.Process, seconds: float) -> dict[str, float]:
    """CPU (% of one core), RSS (MiB, max and end), USS (MiB, end) and wake-ups per second
    of ``p`` over ``seconds``."""
    c0, s0, t0 = p.cpu_times(), switches(p), time.monotonic()
    rss_max = 0.0
    end = t0 + seconds
    while time.monotonic() < end:
        rss_max = max(rss_max, p.memory_info().rss / 2**20)
        time.sleep(1.0)
    c1, s1, t1 = p.cpu_times(), switches(p), time.monotonic()
    cpu = (c1.user + c1.system - c0.user - c0.system) / (t1 - t0) * 100
    full = p.memory_full_info()
    return {"cpu": cpu, "rss_max": rss_max, "rss": full.rss / 2**20, "uss": full.uss / 2**20,
            "wakeups": (s1 - s0) / (t1 - t0), "threads": p.num_threads()}


def run(cmd: list[str], env: dict[str, str], ready: Path | None, seconds: float,
        settle: float) -> dict[str, float]:
    """Start ``cmd``; wait until it is ready (``ready`` file written, else a "ready" line),
    let it settle, measure it, stop it."""
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    try:
        if ready is not None:
            deadline = time.monotonic() + 60
            while not ready.exists() and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.1)
            if not ready.exists():
                sys.exit(f"{cmd[-1]} did not start")
        else:
            assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(settle)
        return measure(psutil.Process(proc.pid), seconds)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def line(name: str, m: dict[str, float]) -> str:
    return (f"{name:<34} CPU {m['cpu']:5.2f} % of a core  RSS {m['rss']:5.1f} MiB "
            f"(max {m['rss_max']:5.1f}, USS {m['uss']:5.1f})  "
            f"wake-ups {m['wakeups']:6.1f}/s  threads {m['threads']:.0f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="measured seconds (60)")
    ap.add_argument("--settle", type=float, default=10.0,
                    help="seconds after start-up before measuring (10)")
    ap.add_argument("--churn", type=float, default=50.0, help="files/s written in /tmp (50)")
    args = ap.parse_args()
    display, xprocs = start_x()
    churn = subprocess.Popen([sys.executable, "-c", CHURN, str(args.churn)]) \
        if args.churn > 0 else None
    tmp = Path(tempfile.mkdtemp(prefix="lockwarden-bench-idle-"))
    try:
        (tmp / "run").mkdir(mode=0o700)
        env = dict(os.environ, DISPLAY=display, QT_QPA_PLATFORM="xcb",
                   PYTHONPATH=str(ROOT), XDG_CONFIG_HOME=str(tmp / "config"),
                   XDG_STATE_HOME=str(tmp / "state"), XDG_DATA_HOME=str(tmp / "data"),
                   XDG_CACHE_HOME=str(tmp / "cache"), XDG_RUNTIME_DIR=str(tmp / "run"))
        env.pop("LOCKWARDEN_CONFIG", None)
        report = tmp / "startup"
        app = run([sys.executable, "-m", "app", "--minimized"],
                  dict(env, LOCKWARDEN_STARTUP_REPORT=str(report)), report,
                  args.seconds, args.settle)
        bare = run([sys.executable, "-c", BARE_TRAY], env, None, args.seconds, args.settle)
        sleeper = run([sys.executable, "-c", SLEEPER], env, None, min(args.seconds, 10), 1)
    finally:
        if churn is not None:
            churn.terminate()
            churn.wait()
            for leftover in Path("/tmp").glob(f"lockwarden-bench-churn-{churn.pid}-*.tmp"):
                leftover.unlink(missing_ok=True)
        for xp in xprocs:
            xp.terminate()
            xp.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"idle tray over {args.seconds:.0f} s, default watches, /tmp churn "
          f"{args.churn:.0f} files/s; load average {os.getloadavg()[0]:.2f}")
    print(line("lockwarden tray (--minimized)", app) + "   targets <= 80 MB, <= 0.2 %")
    print(line("anchor: bare PySide6 tray icon", bare))
    print(line("anchor: python sleeping", sleeper))
    return 0


if __name__ == "__main__":
    sys.exit(main())
