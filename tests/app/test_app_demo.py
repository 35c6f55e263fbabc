"""Demo mode: helper processes show every lock state within 30 s; quitting cleans up."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from pathlib import Path

import psutil
import pytest
from PySide6.QtWidgets import QApplication

from core.record import State

WANTED = {State.HELD, State.STALE, State.EXPIRED, State.WRITING, State.UNREADABLE}


@pytest.mark.slow
def test_demo_shows_every_state_and_cleans_up(qtbot, tmp_path, monkeypatch):
    from app.application import LockwardenApp
    from app.startup.demo import Demo

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    demo = Demo(base=str(tmp_path))
    demo.start()
    qapp = QApplication.instance()
    assert isinstance(qapp, QApplication)
    lw = LockwardenApp(qapp, config_path=demo.config_path, demo=demo, use_tray=False)
    seen: set[State] = set()
    formats: set[str] = set()

    def record(trans) -> None:
        for _old, new in trans:
            if new is not None:
                seen.add(new.state)
                if new.record is not None:
                    formats.add(new.record.format)

    lw.model.transitions.connect(record)
    lw.start(show_window=True)
    try:
        qtbot.waitUntil(lambda: seen >= WANTED, timeout=40000)
        assert {"sema", "task-mcp", "af-ledger", "pidfile"} <= formats
        stale = [s for s in lw.model.statuses() if s.state is State.STALE]
        assert any(s.path.endswith("deploy.lock") for s in stale)
        helpers = [p.pid for p in demo.procs]
        # the demo says what it is; the helper that crashed was reaped, not left a zombie
        assert lw.window.windowTitle() == "Lockwarden — Demo"
        assert lw.window.banner.isVisible() and demo.dir in lw.window.banner.text()
        qtbot.waitUntil(lambda: not [c for c in psutil.Process().children()
                                     if c.status() == psutil.STATUS_ZOMBIE], timeout=10000)
    finally:
        lw.finish_quit(release=True)
        lw.dispose()
    assert not Path(demo.root).exists()
    for pid in helpers:
        assert not psutil.pid_exists(pid)
