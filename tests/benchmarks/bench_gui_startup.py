"""Start to tray icon visible: launches ``python -m app --minimized`` (from source) on a
private Xvfb display with trayer as the tray host, and measures from the launch until the
app reports its tray icon visible and embedded (``LOCKWARDEN_STARTUP_REPORT``). Target
<= 1.5 s. Prints each run and the median. Needs Xvfb and trayer (Debian packages)."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
RUNS = 5


def main() -> int:
    xvfb, trayer = shutil.which("Xvfb"), shutil.which("trayer")
    if not xvfb or not trayer:
        print("skipped: Xvfb and trayer are needed")
        return 0
    from core import config as cfgmod

    n = next(n for n in range(260, 360) if not Path(f"/tmp/.X11-unix/X{n}").exists()
             and not Path(f"/tmp/.X{n}-lock").exists())
    display = f":{n}"
    tmp = Path(tempfile.mkdtemp(prefix="lockwarden-bench-start-"))
    procs = [subprocess.Popen([xvfb, display, "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        while not Path(f"/tmp/.X11-unix/X{n}").exists():
            time.sleep(0.05)
        env = dict(os.environ, DISPLAY=display, QT_QPA_PLATFORM="xcb", PYTHONPATH=str(ROOT),
                   XDG_CONFIG_HOME=str(tmp / "xdg"), XDG_STATE_HOME=str(tmp / "xdg"))
        procs.append(subprocess.Popen([trayer, "--edge", "top", "--align", "right",
                                       "--widthtype", "request", "--height", "28"], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1.0)
        locks = tmp / "locks"
        locks.mkdir()
        stamp = int(time.time())
        for i in range(20):  # foreign sema locks, as a shell script would leave them
            (locks / f"job{i}.lock").write_text(f"pid={os.getpid()}\ntimestamp={stamp}\n")
        cfg = tmp / "config.toml"
        cfgmod.save(cfgmod.Config(watches=[cfgmod.WatchSpec(path=str(locks))]), str(cfg))
        times: list[float] = []
        for run in range(RUNS):
            report = tmp / f"report{run}"
            renv = dict(env, LOCKWARDEN_STARTUP_REPORT=str(report))
            t0 = time.time()
            errlog = tmp / f"stderr{run}"
            with open(errlog, "wb") as err:
                p = subprocess.Popen([sys.executable, "-X", "faulthandler", "-m", "app",
                                      "--config", str(cfg), "--minimized"], env=renv,
                                     stdout=subprocess.DEVNULL, stderr=err)
            deadline = time.monotonic() + 30
            while not report.exists() or not report.read_text().strip():
                if time.monotonic() > deadline or p.poll() is not None:
                    print(f"run {run}: no tray icon (exit {p.poll()})")
                    break
                time.sleep(0.01)
            else:
                visible_at = float(report.read_text().split()[0])
                times.append(visible_at - t0)
                print(f"run {run}: tray icon visible {visible_at - t0:.3f} s after launch")
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.send_signal(6)  # SIGABRT: faulthandler prints where it hangs
                p.wait(10)
                print(f"run {run}: did not quit on SIGTERM within 10 s:")
                print(errlog.read_text()[-3000:])
        if times:
            print(f"start to tray icon visible: median {statistics.median(times):.3f} s, "
                  f"best {min(times):.3f} s over {len(times)} runs (target <= 1.5 s)")
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(5)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
