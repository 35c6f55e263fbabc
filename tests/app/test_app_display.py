"""Before Qt starts, the GUI tells a missing or unreachable display apart and says so in one
line (app/startup/display.py; docs/gui.md, "Start"). Real processes; the reachable display is a real
Xvfb."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.startup.display import problem

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11/Wayland")


def _gui(**env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    return subprocess.run([sys.executable, "-m", "app"], env={**base, **env,
                          "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60)


def _free_display() -> str:
    n = 90
    while os.path.exists(f"/tmp/.X11-unix/X{n}") or os.path.exists(f"/tmp/.X{n}-lock"):
        n += 1
    return f":{n}"


def test_a_display_with_no_x_server_is_one_clear_line() -> None:
    display = _free_display()
    out = _gui(DISPLAY=display)
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and f"cannot reach the X display '{display}'" in lines[0]
    assert "xcb-cursor" not in out.stderr and "Aborted" not in out.stderr


def test_no_display_at_all_is_one_clear_line() -> None:
    out = _gui()
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        out.stderr.strip()] and "DISPLAY and WAYLAND_DISPLAY are not set" in out.stderr
    assert "lockwarden list DIR" in out.stderr


@pytest.fixture
def xvfb() -> Iterator[str]:
    exe = shutil.which("Xvfb")
    if exe is None:
        pytest.skip("Xvfb is not installed (CI installs it)")
    r, w = os.pipe()
    proc = subprocess.Popen([exe, "-displayfd", str(w), "-nolisten", "tcp", "-screen", "0",
                             "320x200x24"], pass_fds=(w,), stderr=subprocess.DEVNULL)
    os.close(w)
    with os.fdopen(r) as f:
        number = f.readline().strip()  # written once the server accepts connections
    try:
        yield f":{number}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_running_x_server_is_fine(xvfb: str) -> None:
    assert problem({"DISPLAY": xvfb}) is None
    assert problem({"DISPLAY": xvfb + ".0"}) is None
    assert problem({"QT_QPA_PLATFORM": "offscreen"}) is None
    assert "not of the form" in (problem({"DISPLAY": "garbage"}) or "")


def test_a_display_name_the_resolver_cannot_encode_is_one_line() -> None:
    assert "not a host name" in (problem({"DISPLAY": "a" * 70 + ":0"}) or "")
    assert "too large" in (problem({"DISPLAY": "host:99999999999999999999"}) or "")
