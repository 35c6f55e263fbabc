"""The serious one a new user met (docs/gui.md, "Watched directories and the locks the app
holds"): change the watched directories while the app holds a lock. The real app runs on a real
X server (Xvfb) with a real system tray (trayer) and is driven with real key and mouse events
(QTest on the real windows): Ctrl+N and typing acquire a lock, Ctrl+, opens Settings where the
directory is retyped, OK applies it; the lock must stay held, listed and releasable, and "Release
all" at quit must remove it. Steps are reported as ``STEP name detail`` lines."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core import config as cfgmod
from tests.support.cli import ROOT

pytestmark = pytest.mark.slow  # end to end: real GUIs, shells and workloads, seconds each

DRIVE = r'''
import os, sys, time
from PySide6.QtCore import QEventLoop, Qt, QTimer
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QDialogButtonBox, QMessageBox, QSystemTrayIcon

cfg, dir_a, dir_b = sys.argv[1], sys.argv[2], sys.argv[3]
app = QApplication([sys.argv[0]])

def step(name, detail=""):
    print("STEP", name, str(detail).replace("\n", " | "), flush=True)

def wait_until(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        loop = QEventLoop()
        QTimer.singleShot(30, loop.quit)
        loop.exec()
    return bool(pred())

def fail(why):
    step("FAIL", why)
    sys.exit(1)

if not wait_until(QSystemTrayIcon.isSystemTrayAvailable, 15):
    fail("no system tray")
from app.application import LockwardenApp
lw = LockwardenApp(app, config_path=cfg)
w = lw.window
lost = []
lw.actions.lost.connect(lambda path, replaced: lost.append(path))
lw.start(show_window=True)
if not wait_until(lambda: lw.inventory.initial_done and w.isActiveWindow(), 20):
    w.activateWindow()
    wait_until(w.isActiveWindow, 5)
step("shown", w.windowTitle())

# acquire through the Acquire dialog, by keyboard
QTest.keyClick(w, Qt.Key.Key_N, Qt.KeyboardModifier.ControlModifier)
if not wait_until(lambda: lw.ops.dialogs and lw.ops.dialogs[-1].isVisible(), 10):
    fail("no acquire dialog")
dlg = lw.ops.dialogs[-1]
step("dialog", dlg.windowTitle())
QTest.keyClick(dlg.name, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
QTest.keyClicks(dlg.name, "mine.lock")
QTest.keyClick(dlg.name, Qt.Key.Key_Return)
path = os.path.join(dir_a, "mine.lock")
if not wait_until(lambda: lw.actions.holds(path) and lw.model.status_of(path) is not None, 20):
    fail(f"not acquired: {os.listdir(dir_a)}")
step("acquired", open(path).read().splitlines()[0])

# Settings: retype the watched directory, OK (no window manager gives the focus back)
w.activateWindow()
wait_until(w.isActiveWindow, 5)
QTest.keyClick(w, Qt.Key.Key_Comma, Qt.KeyboardModifier.ControlModifier)
if not wait_until(lambda: lw.ops.dialogs and lw.ops.dialogs[-1].windowTitle()
                  == "Lockwarden settings", 10):
    fail(f"no settings dialog: {[(d.windowTitle(), d.isVisible()) for d in lw.ops.dialogs]} "
         f"active={QApplication.activeWindow()}")
s = lw.ops.dialogs[-1]
s.list.setCurrentRow(0)
QTest.mouseClick(s.path, Qt.MouseButton.LeftButton)
QTest.keyClick(s.path, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
QTest.keyClicks(s.path, dir_b)
QTest.keyClick(s.path, Qt.Key.Key_Tab)  # editingFinished stores the edit
ok = s.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Ok)
QTest.mouseClick(ok, Qt.MouseButton.LeftButton)
if not wait_until(lambda: [d.path for d in lw.inventory.dirs] == [dir_b], 20):
    fail(f"watch list not changed: {[d.path for d in lw.inventory.dirs]}")
step("watching", [d.path for d in lw.inventory.dirs])
seen = []  # paths of the inventory's updates: the engine's word on the kept lock arrives
lw.inventory.updated.connect(lambda ups: seen.extend(p for p, _ in ups))
lw.inventory.check_kept()  # as its 3 s timer would
if not wait_until(lambda: path in seen, 10):
    fail("the kept lock was not re-inspected")
st = lw.model.status_of(path)
step("still", f"held={lw.actions.holds(path)} listed={st is not None} "
              f"state={st.state.value if st else None} lost={lost}")
if not w.select_path(path):
    fail("not selectable")
step("release-enabled", w.act_release.isEnabled())
step("detail", w.detail.values["State"].text())

# quit: the question, answered with a real click on "Release all"
def answer():
    box = QApplication.activeModalWidget()
    if isinstance(box, QMessageBox):
        step("asked", box.text())
        rel = next(b for b in box.buttons() if b.text() == "Release all")
        QTest.mouseClick(rel, Qt.MouseButton.LeftButton)
    else:
        QTimer.singleShot(50, answer)
QTimer.singleShot(50, answer)
lw.request_quit()
wait_until(lambda: lw.quitting, 20)
step("quit", f"exists={os.path.exists(path)}")
'''


def test_changing_watched_directories_keeps_and_releases_held_locks(
        xtray: str, tmp_path: Path) -> None:
    dir_a, dir_b = tmp_path / "a", tmp_path / "b"
    dir_a.mkdir()
    dir_b.mkdir()
    cfg_path = tmp_path / "cfg" / "config.toml"
    cfgmod.save(cfgmod.Config(watches=[cfgmod.WatchSpec(path=str(dir_a))]), str(cfg_path))
    (tmp_path / "run").mkdir(mode=0o700)
    env = dict(os.environ, PYTHONPATH=str(ROOT), DISPLAY=xtray, QT_QPA_PLATFORM="xcb",
               XDG_CONFIG_HOME=str(tmp_path / "xdg"), XDG_STATE_HOME=str(tmp_path / "xdg"),
               XDG_RUNTIME_DIR=str(tmp_path / "run"))
    out = subprocess.run([sys.executable, "-c", DRIVE, str(cfg_path), str(dir_a), str(dir_b)],
                         env=env, capture_output=True, text=True, timeout=120)
    steps = {}
    for line in out.stdout.splitlines():
        if line.startswith("STEP "):
            _, name, *rest = line.split(" ", 2)
            steps[name] = rest[0] if rest else ""
    assert "FAIL" not in steps, (steps, out.stderr[-2000:])
    assert steps["dialog"] == "Acquire lock"
    assert steps["acquired"].startswith("pid=")
    assert steps["watching"] == f"['{dir_b}']"
    assert steps["still"] == "held=True listed=True state=held lost=[]"
    assert steps["release-enabled"] == "True"
    assert "outside the watched directories" in steps["detail"]
    assert "mine.lock" in steps["asked"]
    assert steps["quit"] == "exists=False"
    assert not (dir_a / "mine.lock").exists()
