"""The tray icon on a real X server (Xvfb) with a real tray host (trayer).

Qt's platform cannot change inside one process once the tests chose ``offscreen``, so the
tray runs in a subprocess with ``QT_QPA_PLATFORM=xcb`` and reports each step on stdout; the
test drives the holder process and checks the steps and the files."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from core import audit
from core import config as cfgmod

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.tray]

HOLDER = (
    "import sys, time, core\n"
    "lock = core.Lock(sys.argv[1], tag='tray test')\n"
    "lock.acquire(blocking=False)\n"
    "print('ready', flush=True)\n"
    "time.sleep(600)\n"
)

# Runs in the subprocess: the app with a tray, steps printed as "STEP <name> <detail>".
TRAY_CHECK = r'''
import os, sys, time
from pathlib import Path
from PySide6.QtCore import QCoreApplication, QEventLoop, QTimer
from PySide6.QtWidgets import QApplication, QSystemTrayIcon

cfg, lock_path, killed_flag = sys.argv[1], sys.argv[2], sys.argv[3]
app = QApplication([sys.argv[0]])

def step(name, detail=""):
    print("STEP", name, detail, flush=True)

def wait_until(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        loop = QEventLoop()
        QTimer.singleShot(50, loop.quit)
        loop.exec()
    return bool(pred())

if not wait_until(QSystemTrayIcon.isSystemTrayAvailable, 15):
    step("FAIL", "no system tray")
    sys.exit(1)
step("available")
from app.application import LockwardenApp
lw = LockwardenApp(app, config_path=cfg)
assert lw.tray is not None
tray = lw.tray
notes, errors = [], []  # the test's own records of the app's signals
tray.notified.connect(lambda title, body, icon: notes.append((title, body)))
lw.ops.errorShown.connect(lambda title, text: errors.append((title, text)))
lw.start(show_window=False)
ok = wait_until(lambda: tray.icon.isVisible() and not tray.icon.geometry().isEmpty(), 20)
step("visible" if ok else "FAIL", f"{tray.icon.geometry().width()}x{tray.icon.geometry().height()}")
ok = wait_until(lambda: tray.state == "held", 20)
step("held" if ok else "FAIL", tray.state + " | " + tray.icon.toolTip().replace("\n", " | "))

def icon_image():
    return tray.icon.icon().pixmap(22, 22).toImage()

def screen_colors():
    g = tray.icon.geometry()
    img = app.primaryScreen().grabWindow(0, g.x(), g.y(), g.width(), g.height()).toImage()
    return len({img.pixel(x, y) for x in range(img.width()) for y in range(img.height())})

held_icon = icon_image()
wait_until(lambda: screen_colors() > 4, 10)
step("drawn", str(screen_colors()))
step("kill-now")
wait_until(lambda: os.path.exists(killed_flag), 30)
ok = wait_until(lambda: tray.state == "stale" and tray.badge == 1, 30)
step("stale" if ok else "FAIL", f"{tray.state} badge={tray.badge}")
step("icon-changed", str(icon_image() != held_icon))
step("notified", repr(notes))
tray.rebuild_menu()
name = os.path.basename(lock_path)
subs = [a.menu() for a in tray.menu.actions() if a.menu() is not None and name in a.text()]
step("menu", " | ".join(a.text() for a in tray.menu.actions()))
if not subs:
    step("FAIL", "lock not in menu")
    sys.exit(1)
acts = {a.text(): a for a in subs[0].actions()}
step("submenu", " | ".join(acts))
acts["Reclaim"].trigger()
dlg = lw.ops.dialogs[-1]
step("dialog", dlg.windowTitle())
dlg.accept()
ok = wait_until(lambda: f"pid={os.getpid()}" in Path(lock_path).read_text(), 10)
step("reclaimed" if ok else "FAIL", str(errors[-1] if errors else None))
ok = wait_until(lambda: tray.state == "held" and tray.badge == 0, 20)
step("held-again" if ok else "FAIL", tray.state)
lw.finish_quit(release=True)
step("released", str(not os.path.exists(lock_path)))
'''


def test_tray_icon_state_menu_and_reclaim(xtray, tmp_path, lockdir):
    lock = lockdir / "nightly.lock"
    cfg_path = tmp_path / "cfg" / "config.toml"
    cfgmod.save(cfgmod.Config(watches=[cfgmod.WatchSpec(path=str(lockdir))]), str(cfg_path))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], env=env,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
    killed = tmp_path / "killed"
    genv = dict(env, DISPLAY=xtray, QT_QPA_PLATFORM="xcb",
                XDG_CONFIG_HOME=str(tmp_path / "xdg"), XDG_STATE_HOME=str(tmp_path / "xdg"),
                XDG_RUNTIME_DIR=str(tmp_path / "run"))
    (tmp_path / "run").mkdir(mode=0o700)
    gui = subprocess.Popen([sys.executable, "-c", TRAY_CHECK, str(cfg_path), str(lock),
                            str(killed)], env=genv, stdout=subprocess.PIPE, text=True)
    steps: dict[str, str] = {}
    said: list[str] = []  # the app's own lines (a release that failed on the way out says why)
    try:
        assert gui.stdout is not None
        for line in gui.stdout:
            if not line.startswith("STEP "):
                said.append(line.rstrip("\n"))
                continue
            _, name, *rest = line.rstrip("\n").split(" ", 2)
            steps[name] = rest[0] if rest else ""
            assert name != "FAIL", f"tray check failed: {line} (steps so far: {steps})"
            if name == "kill-now":
                holder.send_signal(signal.SIGKILL)
                holder.wait()
                killed.touch()
        assert gui.wait(60) == 0
    finally:
        for p in (gui, holder):
            if p.poll() is None:
                p.kill()
            p.wait()
    assert "available" in steps and "visible" in steps
    assert "1 held" in steps["held"]
    assert steps["stale"].startswith("stale badge=1")
    assert int(steps["drawn"]) > 4  # the icon is really painted in trayer's window
    assert steps["icon-changed"] == "True"
    assert "nightly.lock is stale" in steps["notified"]
    assert "nightly.lock — stale" in steps["menu"]
    assert "Open Lockwarden" in steps["menu"] and "Quit" in steps["menu"]
    assert steps["submenu"].split(" | ")[:2] == ["Reclaim", "Force release…"]
    assert steps["dialog"] == "Reclaim lock"
    assert steps["reclaimed"] == "None"
    assert steps["released"] == "True", said
    ops = [e.operation for e in audit.read(str(lockdir))]
    assert ops[-2:] == ["reclaim", "release"]


BALLOON_CHECK = r'''
import sys, time
from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QApplication, QLabel, QSystemTrayIcon

app = QApplication([sys.argv[0]])
from app.style.icons import app_icon
from app.style.theme import apply_theme

def wait_until(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        loop = QEventLoop()
        QTimer.singleShot(50, loop.quit)
        loop.exec()
    return bool(pred())

print("THEME", apply_theme(app, "dark"), flush=True)
if not wait_until(QSystemTrayIcon.isSystemTrayAvailable, 15):
    print("FAIL no tray", flush=True)
    sys.exit(1)
icon = QSystemTrayIcon(app_icon())
icon.show()
wait_until(lambda: not icon.geometry().isEmpty(), 10)
icon.showMessage("Title here", "Body text line", QSystemTrayIcon.MessageIcon.Warning, 10000)

def tip():
    return [w for w in app.topLevelWidgets()
            if w.metaObject().className() == "QBalloonTip" and w.isVisible()]

if not wait_until(lambda: bool(tip()), 10):
    print("FAIL no balloon", flush=True)
    sys.exit(1)
balloon = tip()[0]
img = balloon.grab().toImage()
labels = [(lab.text(), lab.geometry()) for lab in balloon.findChildren(QLabel)]
print("LABELS", labels, flush=True)
for text, g in labels:
    if text in ("Title here", "Body text line"):
        lum = sorted(QColor(img.pixel(x, y)).lightnessF()
                     for x in range(g.x(), g.x() + g.width(), 2)
                     for y in range(g.y(), g.y() + g.height(), 2))
        bg = lum[len(lum) // 2]  # most of a label is background
        ink = lum[0] if bg > 0.5 else lum[-1]
        print("LABEL", repr(text), f"{bg:.2f}", f"{ink:.2f}", flush=True)
'''


def test_dark_theme_balloon_is_readable(xtray: str, tmp_path: Path) -> None:
    """A tray notification balloon in the dark theme: its text contrasts with its own
    (light) background (the review found white text on the balloon's pale yellow)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), DISPLAY=xtray, QT_QPA_PLATFORM="xcb",
               XDG_RUNTIME_DIR=str(tmp_path / "run"))
    (tmp_path / "run").mkdir(mode=0o700)
    out = subprocess.run([sys.executable, "-c", BALLOON_CHECK], env=env, capture_output=True,
                         text=True, timeout=60)
    assert "THEME dark" in out.stdout, out.stdout + out.stderr
    labels = [line.split() for line in out.stdout.splitlines() if line.startswith("LABEL ")]
    assert len(labels) == 2, out.stdout + out.stderr
    for parts in labels:
        bg, ink = float(parts[-2]), float(parts[-1])
        assert abs(bg - ink) > 0.45, out.stdout
