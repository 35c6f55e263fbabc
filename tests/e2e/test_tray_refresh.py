"""The tray icon must follow the table while locks keep changing (found by the end-to-end run).

``app/tray.py`` coalesces count changes with a 250 ms single-shot timer, connected as
``countsChanged -> QTimer.start``. ``start()`` on a running timer restarts it, so as long as
some lock changes at least every 250 ms (a busy build directory) the tray is never refreshed:
in the live workload the table showed a killed holder stale 0.7 s after the kill and the tray
only 2.7 s or later. This test reproduces it deterministically offscreen: the model's batches
arrive every 50 ms (what ``LockTableModel.apply`` emits for each batch of a busy directory)
while a real stale lock appears in a watched directory.
"""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from core import config as cfgmod
from core.record import State
from tests.support.cli import dead_pid

pytestmark = pytest.mark.slow  # end to end: real GUIs, shells and workloads, seconds each

DEAD_LOCK = (
    "pid={pid}\ntimestamp={ts}\ntag=crashed\nhost={host}\nstart={ts}.000000\n"
    "token=0123456789abcdef0123456789abcdef\n"
)


@pytest.fixture
def app_with_tray(qtbot: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A :class:`app.application.LockwardenApp` with a tray controller (offscreen) watching
    ``tmp_path/locks``."""
    from app.application import LockwardenApp

    for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    locks = tmp_path / "locks"
    locks.mkdir()
    cfg_path = tmp_path / "cfg" / "config.toml"
    cfgmod.save(cfgmod.Config(watches=[cfgmod.WatchSpec(path=str(locks))],
                              notifications=cfgmod.NotificationSettings(paused=True)),
                str(cfg_path))
    qapp = QApplication.instance()
    assert isinstance(qapp, QApplication)
    lw = LockwardenApp(qapp, config_path=str(cfg_path), use_tray=True)
    lw.start(show_window=False)
    yield lw
    lw.finish_quit(release=False)
    lw.dispose()


def test_tray_follows_the_table_under_churn(app_with_tray: Any, qtbot: Any) -> None:
    lw = app_with_tray
    assert lw.tray is not None
    qtbot.waitUntil(lambda: lw.tray.state == "free", timeout=10_000)
    churn = QTimer()
    churn.timeout.connect(lw.model.countsChanged.emit)
    churn.start(50)
    try:
        locks = Path(lw.config.watches[0].path)
        (locks / "crashed.lock").write_text(DEAD_LOCK.format(
            pid=dead_pid(), ts=int(time.time()), host=socket.gethostname()))
        qtbot.waitUntil(lambda: lw.model.counts()[State.STALE] == 1, timeout=10_000)
        t_table = time.monotonic()
        # the table has it; the tray gets 2 s (8 refresh intervals) to follow
        qtbot.waitUntil(lambda: lw.tray.state == "stale" or time.monotonic() - t_table > 2.0,
                        timeout=10_000)
        assert lw.tray.state == "stale" and lw.tray.badge == 1
    finally:
        churn.stop()
