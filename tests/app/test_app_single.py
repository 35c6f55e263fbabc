"""The single-instance guard on POSIX (app/startup/single.py): a Unix socket of Python's own, no
QtNetwork loaded; a socket left by a crashed instance is taken over; a client that connects
and says nothing holds the first instance at most ``CONNECT_TIMEOUT_MS``."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.skipif(os.name != "posix", reason="POSIX sockets"),
              pytest.mark.usefixtures("qapp")]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    return run


def test_the_guard_loads_no_qtnetwork(runtime: Path) -> None:
    code = ("import sys; from PySide6.QtCore import QCoreApplication; "
            "q = QCoreApplication([]); from app.startup.single import SingleInstance, server_name; "
            "g = SingleInstance(server_name('/c.toml')); print(g.acquire(), "
            "'PySide6.QtNetwork' in sys.modules, oct(__import__('os').stat(g.name).st_mode "
            "& 0o777)); g.close()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), check=True)
    assert out.stdout.split() == ["True", "False", "0o600"]


def test_a_socket_left_by_a_crashed_instance_is_taken_over(runtime: Path, qtbot) -> None:
    from app.startup.single import SingleInstance, server_name

    name = server_name("/crashed.toml")
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(name)  # bound, never listening, then gone: the file stays
    dead.close()
    assert os.path.exists(name)
    guard = SingleInstance(name)
    try:
        assert guard.acquire() and guard.server is not None
        second = SingleInstance(name)
        with qtbot.waitSignal(guard.activated, timeout=5_000):
            assert not second.acquire()  # it asked the first one to show its window
    finally:
        guard.close()
    assert not os.path.exists(name)


@pytest.mark.slow
def test_a_silent_client_holds_the_first_instance_at_most_the_timeout(runtime: Path,
                                                                      qtbot) -> None:
    from app.startup.single import SingleInstance, server_name

    guard = SingleInstance(server_name("/silent.toml"))
    assert guard.acquire()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
            silent.connect(guard.name)
            guard._connection()  # what the notifier calls: reads, gives up, returns
        with qtbot.waitSignal(guard.activated, timeout=5_000):
            assert SingleInstance(guard.name).notify_running()
    finally:
        guard.close()
