"""More of the app, offscreen: quit with held locks, errors as messages, tray logic
(aggregate, menu limit, notifications once per lock, pause), start at login, dark theme."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import shutil
from datetime import UTC, datetime, timedelta

from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication, QMessageBox

from core import config as cfgmod
from core.codes import Code
from core.reasons import Reason
from core.record import Liveness, LockRecord, LockStatus, State
from tests.support.app_spies import SignalSpy


def fake(path: str, state: State, age: float = 30.0, pid: int = 4321) -> LockStatus:
    now = datetime.now(UTC)
    rec = LockRecord(path=path, format="sema", pid=pid, host=None,
                     acquired_at=now - timedelta(seconds=age))
    live = Liveness.DEAD if state is State.STALE else Liveness.ALIVE
    return LockStatus(path=path, state=state, liveness=live, record=rec,
                      reasons=(Reason.of(Code.HOLDER_DEAD, pid=pid),)
                      if state is State.STALE else ())


def test_quit_with_held_locks_asks_and_releases(make_app, lockdir):
    lw = make_app([lockdir])
    lw.start(show_window=True)
    path = lockdir / "held.lock"
    lw.actions.acquire(str(path), ttl=30.0)
    assert path.exists()
    box = lw.request_quit()
    assert isinstance(box, QMessageBox) and "held.lock" in box.text()
    assert not lw.quitting
    release = next(b for b in box.buttons() if b.text() == "Release all")
    release.click()
    assert lw.quitting
    assert not path.exists()


def test_engine_errors_are_messages_and_table_stays(make_app, tmp_path, qtbot):
    gone = tmp_path / "gone"
    gone.mkdir()
    lw = make_app([gone])
    errors = SignalSpy(lw.ops.errorShown)
    lw.start(show_window=True)
    lock = gone / "x.lock"
    lw.actions.acquire(str(lock))
    lw.inventory.flush()
    shutil.rmtree(gone)
    lw.ops.release(str(lock))
    qtbot.waitUntil(lambda: lw.ops.busy == 0)
    assert errors.last is not None
    title, text = errors.last
    assert "release" in title.lower() and "Traceback" not in text
    assert not lw.actions.holds(str(lock))
    # acquiring in a directory that does not exist: the dialog refuses, nothing raised
    dlg = lw.ops.open_acquire(str(gone))
    dlg.accept()
    assert "not a directory" in dlg.error.text()
    dlg.reject()


def test_tray_aggregate_menu_and_notifications(make_app, lockdir):
    from app.tray import MENU_LIMIT, aggregate
    from core.watch.watcher import DirStatus

    lw = make_app([lockdir], tray=True, on_acquire=True)
    tray = lw.tray
    assert tray is not None
    notes = SignalSpy(tray.notified)
    assert aggregate({}, []) == "free"
    assert aggregate({State.HELD: 2}, []) == "held"
    assert aggregate({State.HELD: 2, State.EXPIRED: 1}, []) == "stale"
    assert aggregate({State.HELD: 1}, [DirStatus(str(lockdir), "missing")]) == "problem"

    base = str(lockdir)
    lw.inventory.initial_done = True  # as after the first scan: changes are events now
    held = [fake(f"{base}/h{i:02d}.lock", State.HELD, age=i) for i in range(20)]
    lw.inventory.push((s.path, s) for s in held)
    lw.inventory.flush()
    assert notes.column(0) == ["20 lock changes"]  # summarised, not 20 popups
    tray.refresh()
    assert tray.state == "held" and tray.badge == 0
    assert "20 held" in tray.icon.toolTip()
    # a lock becomes stale: one notification, not one per tick
    stale = fake(f"{base}/h03.lock", State.STALE, age=3)
    for _ in range(3):
        lw.inventory.push([(stale.path, stale)])
        lw.inventory.flush()
    stale_msgs = [(t, b) for t, b, _ in notes.calls if "is stale" in t]
    assert stale_msgs == [("h03.lock is stale", "PID 4321 exited")]
    tray.refresh()
    assert tray.state == "stale" and tray.badge == 1
    tray.rebuild_menu()
    texts = [a.text() for a in tray.menu.actions()]
    lock_entries = [t for t in texts if ".lock —" in t]
    assert len(lock_entries) == MENU_LIMIT
    assert lock_entries[0].startswith("h03.lock — stale")
    assert f"{20 - MENU_LIMIT} more…" in texts
    assert {"Open Lockwarden", "Acquire lock…", "Pause notifications", "Quit"} <= set(texts)
    # pause: no more messages, and the choice is saved
    tray.act_pause.setChecked(True)
    assert cfgmod.load(lw.config_path).notifications.paused
    n = len(notes.calls)
    other = fake(f"{base}/h07.lock", State.STALE, age=7)
    lw.inventory.push([(other.path, other)])
    lw.inventory.flush()
    assert len(notes.calls) == n


def test_release_in_tray_menu_only_for_own_locks(make_app, lockdir, qtbot):
    lw = make_app([lockdir], tray=True)
    lw.start(show_window=False)
    mine = lockdir / "mine.lock"
    lw.actions.acquire(str(mine))
    other = fake(str(lockdir / "other.lock"), State.HELD)
    lw.inventory.push([(other.path, other)])
    qtbot.waitUntil(lambda: lw.model.status_of(str(mine)) is not None
                    and lw.model.status_of(other.path) is not None, timeout=20000)
    tray = lw.tray
    assert tray is not None
    tray.rebuild_menu()
    subs = {a.text().split(" — ")[0]: [x.text() for x in a.menu().actions()]
            for a in tray.menu.actions() if a.menu() is not None}
    assert subs["mine.lock"][0] == "Release"
    assert "Release" not in subs["other.lock"]
    release = next(a for a in tray.menu.actions() if a.text().startswith("mine.lock"))
    next(x for x in release.menu().actions() if x.text() == "Release").trigger()
    qtbot.waitUntil(lambda: lw.ops.busy == 0)
    assert not mine.exists()


def test_start_at_login_through_settings(make_app, lockdir, tmp_path):
    from app.startup import autostart

    lw = make_app([lockdir])
    dlg = lw.ops.open_settings()
    assert not dlg.autostart.isChecked()
    dlg.autostart.setChecked(True)
    dlg.accept()
    entry = tmp_path / "xdg_config_home" / "autostart" / "lockwarden.desktop"
    assert entry == autostart.desktop_file()
    text = entry.read_text()
    assert "Exec=" in text and "--minimized" in text and "-m app" in text
    dlg = lw.ops.open_settings()
    assert dlg.autostart.isChecked()
    dlg.autostart.setChecked(False)
    dlg.accept()
    assert not entry.exists()


def test_dark_theme_follows_the_palette(make_app, lockdir, qtbot):
    from app.style.theme import apply_theme

    lw = make_app([lockdir])
    qapp = QApplication.instance()
    assert isinstance(qapp, QApplication)
    try:
        assert apply_theme(qapp, "dark") == "dark"
        table = lw.window.table
        qtbot.waitUntil(
            lambda: table.palette().color(QPalette.ColorRole.Base).lightnessF() < 0.3)
        pal = table.palette()
        base = pal.color(QPalette.ColorRole.Base).lightnessF()
        text = pal.color(QPalette.ColorRole.Text).lightnessF()
        assert base < 0.3 and text > 0.7
        # the cells carry no colours of their own: text comes from the palette
        from PySide6.QtCore import Qt

        from app.table.columns import Col

        st = fake(str(lockdir / "a.lock"), State.STALE)
        lw.inventory.push([(st.path, st)])
        lw.inventory.flush()
        idx = lw.model.index(0, Col.LOCK)
        assert lw.model.data(idx, Qt.ItemDataRole.ForegroundRole) is None
        assert lw.model.data(idx, Qt.ItemDataRole.BackgroundRole) is None
    finally:
        apply_theme(qapp, "light")
    assert qapp.palette().color(QPalette.ColorRole.Base).lightnessF() > 0.7


def test_lock_taken_away_is_reported_as_lost(make_app, lockdir, qtbot):
    import core

    lw = make_app([lockdir], tray=True)
    assert lw.tray is not None
    lost = SignalSpy(lw.actions.lost)
    notes = SignalSpy(lw.tray.notified)
    lw.start(show_window=False)
    path = lockdir / "mine.lock"
    dlg = lw.ops.open_acquire(str(lockdir))
    dlg.name.setText("mine.lock")
    dlg.accept()
    qtbot.waitUntil(lambda: lw.ops.busy == 0 and lw.actions.holds(str(path)), timeout=20000)
    qtbot.waitUntil(lambda: lw.model.status_of(str(path)) is not None, timeout=20000)
    # our own release is not a loss
    lw.ops.release(str(path))
    qtbot.waitUntil(lambda: lw.ops.busy == 0, timeout=20000)
    qtbot.waitUntil(lambda: lw.model.status_of(str(path)) is None, timeout=20000)
    assert lost.column(0) == []
    # someone else force-releases it: reported, and no longer offered for Release
    lw.actions.acquire(str(path))
    qtbot.waitUntil(lambda: lw.model.status_of(str(path)) is not None, timeout=20000)
    core.force_release(str(path), reason="test: someone else")
    qtbot.waitUntil(lambda: lost.column(0) == [str(path)], timeout=20000)
    assert not lw.actions.holds(str(path))
    assert lw.tray is not None
    assert any(t == "Lost mine.lock" for t in notes.column(0))
