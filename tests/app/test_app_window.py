"""The main window against real lock directories, real holder processes and the real engine
and watcher (offscreen Qt). Dialogs are driven by setting their fields and calling accept()."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import gc
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from core import audit
from core import config as cfgmod
from core.record import State
from tests.support.app_spies import SignalSpy

ROOT = Path(__file__).resolve().parents[2]
WAIT_MS = 20000  # generous: 2 shared cores under load

HOLDER = (
    "import sys, time, core\n"
    "lock = core.Lock(sys.argv[1], tag='held by test')\n"
    "lock.acquire(blocking=False)\n"
    "print('ready', flush=True)\n"
    "time.sleep(600)\n"
)


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """Keep every per-user path (QSettings, autostart, audit fallback) inside tmp_path."""
    for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    monkeypatch.setenv("LOCKWARDEN_CONFIG", str(tmp_path / "cfg" / "config.toml"))
    return tmp_path


@pytest.fixture
def gui(qtbot, isolated, lockdir):
    from app.application import LockwardenApp

    cfg_path = isolated / "cfg" / "config.toml"
    cfg = cfgmod.Config(watches=[cfgmod.WatchSpec(path=str(lockdir))])
    cfgmod.save(cfg, str(cfg_path))
    qapp = QApplication.instance()
    assert isinstance(qapp, QApplication)
    lw = LockwardenApp(qapp, config_path=str(cfg_path), use_tray=False)
    lw.start(show_window=True)
    qtbot.waitUntil(lambda: bool(lw.inventory.dirs), timeout=WAIT_MS)
    yield lw
    lw.finish_quit(release=True)
    lw.dispose()


@pytest.fixture
def errors(gui):
    """The error messages ``gui`` shows (title, text), recorded from its signal."""
    return SignalSpy(gui.ops.errorShown)


@pytest.fixture
def holder(tmp_path):
    """Start a process holding a lock through the engine; yields a starter."""
    procs: list[subprocess.Popen[str]] = []

    def start(path: Path) -> subprocess.Popen[str]:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        p = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdout=subprocess.PIPE,
                             text=True, env=env)
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "ready"
        procs.append(p)
        return p

    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


def settle(lw, qtbot) -> None:
    """Wait until the operations started from the GUI (worker threads) have finished."""
    qtbot.waitUntil(lambda: lw.ops.busy == 0, timeout=WAIT_MS)


def row_state(lw, path: Path) -> State | None:
    st = lw.model.status_of(str(path))
    return None if st is None else st.state


def ops(directory: Path) -> list[tuple[str, str | None]]:
    return [(e.operation or "", e.via) for e in audit.read(str(directory))]


def test_acquire_and_release_through_the_window(gui, errors, qtbot, lockdir):
    dlg = gui.ops.open_acquire(str(lockdir))
    dlg.name.setText("job.lock")
    dlg.tag.setText("nightly report")
    dlg.accept()
    settle(gui, qtbot)
    path = lockdir / "job.lock"
    assert path.is_file()
    assert "tag=nightly report" in path.read_text()
    assert ("acquire", "gui") in ops(lockdir)
    qtbot.waitUntil(lambda: row_state(gui, path) is State.HELD, timeout=WAIT_MS)
    st = gui.model.status_of(str(path))
    assert st is not None and gui.model.is_mine(st)
    # "held by me" shows it
    gui.window.held_by_me.setChecked(True)
    assert gui.proxy.rowCount() == 1
    gui.window.held_by_me.setChecked(False)
    # select it: detail pane shows fields and the raw file; Release is enabled
    assert gui.window.select_path(str(path))
    assert gui.window.detail.values["Tag"].text() == "nightly report"
    assert f"pid={os.getpid()}" in gui.window.detail.raw.toPlainText()
    assert gui.window.act_release.isEnabled()
    gui.window.act_release.trigger()
    settle(gui, qtbot)
    assert not path.exists()
    assert ("release", "gui") in ops(lockdir)
    qtbot.waitUntil(lambda: gui.model.status_of(str(path)) is None, timeout=WAIT_MS)
    assert errors.last is None


def test_acquire_dialog_validates_and_engine_errors_are_messages(gui, errors, qtbot, lockdir,
                                                                 holder):
    dlg = gui.ops.open_acquire(str(lockdir))
    dlg.name.setText("")
    dlg.accept()
    assert dlg.isVisible() and "file name" in dlg.error.text()
    dlg.reject()
    # a lock someone else holds: a clear message, no exception, no file change
    held = lockdir / "busy.lock"
    p = holder(held)
    before = held.read_bytes()
    dlg = gui.ops.open_acquire(str(lockdir))
    dlg.name.setText("busy.lock")
    dlg.accept()
    settle(gui, qtbot)
    assert errors.last is not None
    title, text = errors.last
    assert "Could not acquire" in title and "held" in text and "Traceback" not in text
    assert held.read_bytes() == before
    assert f"pid={p.pid}" in before.decode()


@pytest.mark.slow
def test_reclaim_after_holder_killed(gui, errors, qtbot, lockdir, holder):
    path = lockdir / "deploy.lock"
    p = holder(path)
    qtbot.waitUntil(lambda: row_state(gui, path) is State.HELD, timeout=WAIT_MS)
    p.send_signal(signal.SIGKILL)
    p.wait()
    qtbot.waitUntil(lambda: row_state(gui, path) is State.STALE, timeout=WAIT_MS)
    st = gui.model.status_of(str(path))
    assert st is not None and any(r.get("pid") == p.pid for r in st.reasons)
    dlg = gui.ops.open_reclaim(str(path))
    assert dlg is not None and not dlg.ask_reason  # stale: the light confirmation
    dlg.accept()
    settle(gui, qtbot)
    assert errors.last is None
    assert gui.actions.holds(str(path))
    assert f"pid={os.getpid()}" in path.read_text()
    assert ("reclaim", "gui") in ops(lockdir)
    qtbot.waitUntil(lambda: row_state(gui, path) is State.HELD, timeout=WAIT_MS)


def test_force_release_needs_confirmation_and_reason(gui, qtbot, lockdir, holder):
    path = lockdir / "busy.lock"
    p = holder(path)
    qtbot.waitUntil(lambda: row_state(gui, path) is State.HELD, timeout=WAIT_MS)
    assert gui.window.select_path(str(path))
    assert gui.window.act_force.isEnabled() and not gui.window.act_release.isEnabled()
    dlg = gui.ops.open_force_release(str(path))
    assert dlg is not None
    assert f"pid {p.pid}" in dlg.label.text() and "alive" in dlg.label.text()
    assert not dlg.ok.isEnabled()
    dlg.accept()  # no reason: refused
    settle(gui, qtbot)
    assert path.exists()
    dlg.reason.setText("job hung since noon")
    assert dlg.ok.isEnabled()
    dlg.accept()
    settle(gui, qtbot)
    assert not path.exists()
    entries = [e for e in audit.read(str(lockdir)) if e.operation == "force_release"]
    assert entries and entries[-1].details.get("reason") == "job hung since noon"
    assert entries[-1].via == "gui"
    qtbot.waitUntil(lambda: gui.model.status_of(str(path)) is None, timeout=WAIT_MS)


@pytest.mark.slow
def test_garbage_file_shows_as_unreadable(gui, qtbot, lockdir):
    bad = lockdir / "corrupt.lock"
    bad.write_bytes(b"\x00\x01 this is no lock \xff\n")
    qtbot.waitUntil(lambda: row_state(gui, bad) is State.UNREADABLE, timeout=WAIT_MS)
    assert gui.window.select_path(str(bad))
    assert gui.window.detail.reasons.text()
    assert not gui.window.act_release.isEnabled()
    assert bad.exists()  # never deleted


def test_settings_start_watching_a_new_directory(gui, qtbot, isolated, lockdir):
    newdir = isolated / "more-locks"
    newdir.mkdir()
    dlg = gui.ops.open_settings()
    dlg.add_directory(str(newdir))
    dlg.on_acquire.setChecked(True)
    dlg.accept()
    saved = cfgmod.load(gui.config_path)
    assert [w.path for w in saved.watches] == [str(lockdir), str(newdir)]
    assert saved.notifications.on_acquire
    qtbot.waitUntil(lambda: any(d.path == str(newdir) for d in gui.inventory.dirs),
                    timeout=WAIT_MS)
    (newdir / "fresh.lock").write_text("pid=1\ntimestamp=1700000000\n")
    qtbot.waitUntil(lambda: gui.model.status_of(str(newdir / "fresh.lock")) is not None,
                    timeout=WAIT_MS)
    assert str(newdir) in gui.window.dirs_label.text()
    # removing a directory takes its locks off the table
    (lockdir / "old.lock").write_text("pid=1\ntimestamp=1700000000\n")
    qtbot.waitUntil(lambda: gui.model.status_of(str(lockdir / "old.lock")) is not None,
                    timeout=WAIT_MS)
    dlg = gui.ops.open_settings()
    dlg.list.setCurrentRow(0)
    dlg.remove_current()
    dlg.accept()
    assert [w.path for w in cfgmod.load(gui.config_path).watches] == [str(newdir)]
    qtbot.waitUntil(lambda: gui.model.status_of(str(lockdir / "old.lock")) is None,
                    timeout=WAIT_MS)
    assert gui.model.status_of(str(newdir / "fresh.lock")) is not None


def test_window_state_persists(gui, qtbot):
    from app.window import MainWindow

    w = gui.window
    w.table.setColumnWidth(2, 151)  # Directory (Format, 3, is hidden by default)
    w.table.sortByColumn(7, Qt.SortOrder.DescendingOrder)
    w.save_state()
    w2 = MainWindow(model=gui.model, proxy=gui.proxy, inventory=gui.inventory,
                    actions=gui.actions, store=gui.store, settings=gui.settings,
                    hide_on_close=False)
    qtbot.addWidget(w2)
    assert w2.table.columnWidth(2) == 151
    hh = w2.table.horizontalHeader()
    assert (hh.sortIndicatorSection(), hh.sortIndicatorOrder()) == (7, Qt.SortOrder.DescendingOrder)


def test_audit_viewer_lists_entries_and_chain(gui, qtbot, lockdir):
    gui.actions.acquire(str(lockdir / "a.lock"))
    gui.actions.release(str(lockdir / "a.lock"))
    dlg = gui.ops.open_audit()
    qtbot.waitUntil(lambda: dlg.ready, timeout=WAIT_MS)
    ops_shown = [r["operation"] for r in dlg.visible_entries()]
    assert ops_shown[:2] == ["release", "acquire"]  # newest first
    assert "chain intact" in dlg.verification.toPlainText()
    dlg.operation.setCurrentText("acquire")
    assert [r["operation"] for r in dlg.visible_entries()] == ["acquire"]
    dlg.reject()


def test_second_launch_raises_first_and_exits_0(qtbot, isolated):
    from app.startup.single import SingleInstance, server_name

    cfg = str(isolated / "cfg" / "single.toml")
    guard = SingleInstance(server_name(cfg))
    assert guard.acquire()
    env = dict(os.environ, PYTHONPATH=str(ROOT), QT_QPA_PLATFORM="offscreen")
    with qtbot.waitSignal(guard.activated, timeout=WAIT_MS):
        p = subprocess.Popen([sys.executable, "-m", "app", "--config", cfg], env=env,
                             stdout=subprocess.PIPE, text=True)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 0 and "already running" in out
    guard.close()
    del guard  # destroy the server while the QApplication still exists
    gc.collect()
