"""The frozen app (``dist/lockwarden/``, built by ``make package``): bundle size, archive size,
start to tray icon visible (target <= 2 s) and idle RSS, on a private Xvfb display with trayer
as the tray host.

Start to visible: from ``Popen`` of ``dist/lockwarden/lockwarden --config CFG --minimized``
until the app reports its tray icon visible and embedded (``LOCKWARDEN_STARTUP_REPORT``, wall
clock). The same is measured for the source tree (``python -m app``) for comparison. Idle RSS:
the frozen process's resident set (psutil, MB = 10^6 bytes) 5 s after the icon became visible,
watching one directory with 20 foreign locks.

Usage: ``python tests/benchmarks/bench_package.py [--build]`` (``--build`` first runs
``packaging/build.py`` and prints how long it took). Prints figures; asserts nothing. Without a
bundle or without Xvfb/trayer it says so and measures what it can.
"""

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
DIST = ROOT / "dist"
BUNDLE = DIST / "lockwarden"
EXE = BUNDLE / "lockwarden"
RUNS = 5
IDLE_WAIT = 5.0


def tree_mb(path: Path) -> float:
    """Size in MB of the regular files under ``path`` (symlinks not counted)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            p = Path(dirpath) / name
            if not p.is_symlink():
                total += p.stat().st_size
    return total / 1e6


def start_to_tray(cmd: list[str], env: dict[str, str], tmp: Path, label: str,
                  measure_rss: bool) -> tuple[list[float], list[float]]:
    """Launch ``cmd`` RUNS times; return (seconds to visible, idle RSS MB) per good run."""
    import psutil

    times: list[float] = []
    rss: list[float] = []
    for run in range(RUNS):
        report = tmp / f"report-{label}-{run}"
        renv = dict(env, LOCKWARDEN_STARTUP_REPORT=str(report))
        t0 = time.time()
        p = subprocess.Popen(cmd, env=renv, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        ok = True
        while not report.exists() or not report.read_text().strip():
            if time.monotonic() > deadline or p.poll() is not None:
                print(f"{label} run {run}: no tray icon (exit {p.poll()})")
                ok = False
                break
            time.sleep(0.01)
        if ok:
            visible_at = float(report.read_text().split()[0])
            times.append(visible_at - t0)
            line = f"{label} run {run}: tray icon visible {visible_at - t0:.3f} s after launch"
            if measure_rss and run == 0:
                time.sleep(IDLE_WAIT)
                proc = psutil.Process(p.pid)
                mem = proc.memory_info().rss + sum(
                    c.memory_info().rss for c in proc.children(recursive=True))
                rss.append(mem / 1e6)
                line += f", idle RSS {mem / 1e6:.1f} MB after {IDLE_WAIT:.0f} s"
            print(line, flush=True)
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)
    return times, rss


def main() -> int:
    if "--build" in sys.argv[1:]:
        t0 = time.monotonic()
        rc = subprocess.call([sys.executable, str(ROOT / "packaging" / "build.py")])
        print(f"build: {time.monotonic() - t0:.0f} s (exit {rc})")
        if rc != 0:
            return rc
    if EXE.is_file():
        print(f"bundle dist/lockwarden: {tree_mb(BUNDLE):.1f} MB (target <= 80 MB)")
        for archive in sorted(DIST.glob("lockwarden-*.tar.gz")):
            print(f"archive {archive.name}: {archive.stat().st_size / 1e6:.1f} MB")
    else:
        print("no frozen bundle: run 'make package' first (measuring the source tree only)")
    xvfb, trayer = shutil.which("Xvfb"), shutil.which("trayer")
    if not xvfb or not trayer:
        print("start to tray: skipped (Xvfb and trayer are needed)")
        return 0
    from core import config as cfgmod

    n = next(n for n in range(360, 460) if not Path(f"/tmp/.X11-unix/X{n}").exists()
             and not Path(f"/tmp/.X{n}-lock").exists())
    display = f":{n}"
    tmp = Path(tempfile.mkdtemp(prefix="lockwarden-bench-package-"))
    procs = [subprocess.Popen([xvfb, display, "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        deadline = time.monotonic() + 15
        while not Path(f"/tmp/.X11-unix/X{n}").exists():
            if time.monotonic() > deadline:
                print("Xvfb did not start")
                return 1
            time.sleep(0.05)
        env = dict(os.environ, DISPLAY=display, QT_QPA_PLATFORM="xcb",
                   XDG_CONFIG_HOME=str(tmp / "xdg"), XDG_STATE_HOME=str(tmp / "xdg"),
                   XDG_CACHE_HOME=str(tmp / "xdg"), XDG_DATA_HOME=str(tmp / "xdg"))
        procs.append(subprocess.Popen([trayer, "--edge", "top", "--align", "right",
                                       "--widthtype", "request", "--height", "28"], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1.0)  # trayer claims the tray selection
        locks = tmp / "locks"
        locks.mkdir()
        stamp = int(time.time())
        for i in range(20):  # foreign sema locks, as a shell script would leave them
            (locks / f"job{i}.lock").write_text(f"pid={os.getpid()}\ntimestamp={stamp}\n")
        cfg = tmp / "config.toml"
        cfgmod.save(cfgmod.Config(watches=[cfgmod.WatchSpec(path=str(locks))]), str(cfg))
        args = ["--config", str(cfg), "--minimized"]
        if EXE.is_file():
            frozen, rss = start_to_tray([str(EXE), *args], env, tmp, "frozen", True)
            if frozen:
                print(f"frozen: start to tray icon visible: median "
                      f"{statistics.median(frozen):.3f} s, best {min(frozen):.3f} s over "
                      f"{len(frozen)} runs (target <= 2 s)")
            if rss:
                print(f"frozen: idle RSS {rss[0]:.1f} MB")
        source, _ = start_to_tray([sys.executable, "-m", "app", *args],
                                  dict(env, PYTHONPATH=str(ROOT)), tmp, "source", False)
        if source:
            print(f"source: start to tray icon visible: median "
                  f"{statistics.median(source):.3f} s over {len(source)} runs")
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
