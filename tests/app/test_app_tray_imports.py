"""A tray-only app holds no window (docs/performance.md "Idle tray"): started minimized with a
tray, it neither builds the main window nor imports the window's, the dialogs' or the History
pane's modules, the lock-server drivers or the fleet; the first show builds the window, which
then works like one built at start. Run in a fresh interpreter: the test process has imported
everything already."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from core import config as cfgmod

ROOT = Path(__file__).resolve().parents[2]

NOT_IN_AN_IDLE_TRAY = (
    "app.window", "app.dialogs", "app.actions.undo", "app.table.proxy", "app.history.view",
    "app.history.timeline", "app.table.detail", "app.table.view", "app.startup.demo",
    "core.remote.redis.backend", "core.remote.postgres.backend", "core.remote.etcd.backend",
    "redis", "psycopg",
    "core.fleet", "app.fleet.hosts_panel", "PySide6.QtSvgWidgets",
)
"""Modules (and their sub-modules) an idle tray must not have imported. ``app.fleet.bridge``
may be there (it hooks the inventory and imports stdlib, Qt core and ``core.record`` only): the
fleet's own modules and its driver load when ``[fleet]`` is configured."""

SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    from PySide6.QtCore import QEventLoop
    from PySide6.QtWidgets import QApplication
    qapp = QApplication([sys.argv[0]])
    from app.application import LockwardenApp
    lw = LockwardenApp(qapp, config_path=sys.argv[1], use_tray=True)
    lw.start(show_window=False)
    deadline = time.monotonic() + 20
    while not lw.inventory.initial_done and time.monotonic() < deadline:
        qapp.processEvents(QEventLoop.ProcessEventsFlag.WaitForMoreEvents, 100)
    idle = {"initial_done": lw.inventory.initial_done, "window_built": lw.window_built,
            "modules": sorted(sys.modules)}
    lw.show_window()
    qapp.processEvents()
    shown = {"visible": lw.window.isVisible(), "rows": lw.proxy.rowCount(),
             "history_dock": lw.history.dock.objectName(),
             "undo_in_menu": lw.undo.action in lw.undo.menu.actions()}
    lw.finish_quit(release=False)
    print(json.dumps({"idle": idle, "shown": shown}))
    """
)


@pytest.mark.slow
def test_an_idle_tray_holds_no_window_and_the_first_show_builds_it(tmp_path: Path,
                                                                  lockdir: Path) -> None:
    (lockdir / "deploy.lock").write_text("")  # one row for the window to show
    cfg = tmp_path / "cfg" / "config.toml"
    cfgmod.save(cfgmod.Config(watches=[cfgmod.WatchSpec(path=str(lockdir))]), str(cfg))
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT),
               **{v: str(tmp_path / v.lower()) for v in
                  ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME")})
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(cfg)], capture_output=True,
                         text=True, env=env, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    idle, shown = got["idle"], got["shown"]
    assert idle["initial_done"] and not idle["window_built"]
    held = [m for m in idle["modules"]
            if any(m == n or m.startswith(n + ".") for n in NOT_IN_AN_IDLE_TRAY)]
    assert held == []
    assert "app.tray" in idle["modules"]  # the probe did see the app's own modules
    assert shown == {"visible": True, "rows": 1, "history_dock": "history-dock",
                     "undo_in_menu": True}
