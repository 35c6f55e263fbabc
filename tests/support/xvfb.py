"""A private X server with a system tray for the tray tests: Xvfb on a free display and trayer
as the tray host (Debian: ``xvfb trayer``; packaging/linux-sysdeps.sh installs them). The
``xtray`` fixture of tests/conftest.py starts one per session."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def free_display() -> int:
    """A display number from 91 up that no X server uses (no lock file, no socket)."""
    for n in range(91, 140):
        if not Path(f"/tmp/.X{n}-lock").exists() and not Path(f"/tmp/.X11-unix/X{n}").exists():
            return n
    raise RuntimeError("no free X display number")


def tray_display() -> Iterator[str]:
    """Start Xvfb (1280x800x24, no TCP) and trayer on it, yield its ``DISPLAY`` (``":N"``),
    stop both after. Skips without Xvfb or trayer; fails when Xvfb does not start in 15 s."""
    xvfb, trayer = shutil.which("Xvfb"), shutil.which("trayer")
    if not xvfb or not trayer:
        pytest.skip("Xvfb and trayer are needed for tray tests (Debian: xvfb trayer)")
    n = free_display()
    display = f":{n}"
    x = subprocess.Popen([xvfb, display, "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sock = Path(f"/tmp/.X11-unix/X{n}")
    deadline = time.monotonic() + 15
    while not sock.exists() and time.monotonic() < deadline and x.poll() is None:
        time.sleep(0.05)
    if not sock.exists():
        x.kill()
        pytest.fail(f"Xvfb did not start on {display}")
    env = dict(os.environ, DISPLAY=display)
    t = subprocess.Popen([trayer, "--edge", "top", "--align", "right", "--widthtype", "request",
                          "--height", "32", "--transparent", "false", "--tint", "0x303030",
                          "--SetDockType", "true"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield display
    finally:
        for p in (t, x):
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
