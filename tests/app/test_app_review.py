"""Fixes from the user-level review of the app, offscreen with real lock directories:
reclaimed TTL locks are renewed, Settings round-trips exactly, the detail pane's time texts
follow the clock, dark balloons, notifications, tray badge and problems, acquire dialog,
duplicate names, stable rows, unreadable rows, keyboard."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import time
from pathlib import Path
from typing import Any

import pytest

from core import config as cfgmod
from core.codes import Code
from core.reasons import Reason, render, texts
from core.record import State
from tests.support.app_spies import SignalSpy
from tests.support.cli import dead_pid
from tests.support.clock import age_after_boot


def write_sema(path: Path, *, pid: int, age: float, ttl: float | None = None,
               tag: str = "t", ts: int | None = None) -> None:
    """A sema lock file acquired ``age`` seconds ago (or at Unix time ``ts``) by ``pid``
    (spec 000 fields)."""
    if ts is None:
        ts = int(time.time() - age)
    text = f"pid={pid}\ntimestamp={ts}\ntag={tag}\n"
    if ttl is not None:
        text += f"ttl={ttl:g}\n"
    path.write_text(text)


@pytest.mark.slow
def test_reclaimed_ttl_lock_is_renewed(make_app: Any, lockdir: Path, qtbot: Any) -> None:
    from core.verdicts.inspect import inspect as inspect_lock

    path = lockdir / "lease.lock"
    write_sema(path, pid=dead_pid(), age=30, ttl=2)
    st = inspect_lock(str(path))
    assert st.state in (State.STALE, State.EXPIRED) and st.record is not None
    lw = make_app([lockdir])
    lock = lw.actions.reclaim(str(path), status=st)
    assert lock.ttl == 2 and lw.actions.holds(str(path))
    token = lock.token
    first = inspect_lock(str(path)).record
    assert first is not None and first.acquired_at is not None
    assert lock.auto_refresh  # the engine renews it (core.reclaim(auto_refresh=True))
    start = first.acquired_at

    def renewed_twice() -> bool:
        rec = inspect_lock(str(path)).record
        return rec is not None and rec.renewed_at is not None and (
            (rec.renewed_at - start).total_seconds() >= 2)

    # renewals every 1.5 s: after two the lock is still ours, held, its lease moved on and its
    # age still counts from the reclaim (docs/formats.md, "Refresh: age and expiry")
    qtbot.waitUntil(renewed_twice, timeout=20_000)
    now = inspect_lock(str(path))
    assert now.state is State.HELD, now.reasons
    assert now.record is not None and now.record.token == token
    assert now.record.acquired_at == start
    lw.actions.release(str(path))
    assert not path.exists() and not lock.is_held


def test_settings_ok_without_changes_keeps_the_file(make_app: Any, lockdir: Path) -> None:
    lw = make_app([lockdir], stale_after=90.5)
    cfg = Path(lw.config_path)
    before = (cfg.read_bytes(), cfg.stat().st_mtime_ns)
    dlg = lw.ops.open_settings()
    assert dlg.stale.value() == 90.5 and dlg.stale.text() == "1 min 30 s"  # in words
    dlg.accept()
    assert (cfg.read_bytes(), cfg.stat().st_mtime_ns) == before
    assert lw.config.watches[0].stale_after == 90.5
    # a real change is saved, to the second
    dlg = lw.ops.open_settings()
    dlg.stale.setValue(45)
    dlg.accept()
    assert cfgmod.load(str(cfg)).watches[0].stale_after == 45.0
    assert lw.config.watches[0].stale_after == 45.0


@pytest.mark.slow
def test_detail_and_confirmation_texts_follow_the_clock(make_app: Any, lockdir: Path,
                                                        qtbot: Any) -> None:
    import subprocess

    from app.table.lockinfo import current_reasons

    holder = subprocess.Popen(["sleep", "120"])
    try:
        live = lockdir / "live.lock"
        import psutil

        # written just after the holder started (a PID older than its lock is "alive")
        write_sema(live, pid=holder.pid, age=0,
                   ts=int(psutil.Process(holder.pid).create_time() + 0.999))
        gone = lockdir / "gone.lock"
        write_sema(gone, pid=dead_pid(), age=age_after_boot(20), ttl=3)
        lw = make_app([lockdir])
        lw.start(show_window=True)
        qtbot.waitUntil(lambda: lw.model.status_of(str(live)) is not None
                        and lw.model.status_of(str(gone)) is not None, timeout=20_000)
        assert lw.window.select_path(str(live))
        pane = lw.window.detail
        qtbot.waitUntil(lambda: "held for" in pane.reasons.text(), timeout=20_000)
        first_reasons = pane.reasons.text()
        first_acquired = pane.values["Acquired"].text()
        assert "held for" in first_reasons and "ago)" in first_acquired
        # no new verdict arrives (only numbers change), yet the words follow the clock
        qtbot.waitUntil(lambda: pane.reasons.text() != first_reasons
                        and pane.values["Acquired"].text() != first_acquired, timeout=20_000)
        assert pane.status is lw.model.status_of(str(live))
        assert "held for" in pane.reasons.text()
        stored = lw.model.status_of(str(live))
        # liveness kept
        assert stored is not None and render(stored.reasons[0]) in pane.reasons.text()
        # the reclaim confirmation quotes the reasons as they read when it opens
        st = lw.model.status_of(str(gone))
        assert st is not None and st.state is State.STALE
        qtbot.waitUntil(lambda: current_reasons(st) != texts(st.reasons), timeout=20_000)
        before = current_reasons(st)
        dlg = lw.ops.open_reclaim(str(gone))
        after = current_reasons(st)
        assert dlg is not None
        text = dlg.label.text()
        assert any(r in text for r in before + after if "expired" in r), text
        assert not any(r in text for r in texts(st.reasons) if "expired" in r), text
        dlg.reject()
    finally:
        holder.kill()
        holder.wait()


def test_settings_change_scans_off_the_gui_thread(make_app: Any, lockdir: Path,
                                                  tmp_path: Path, qtbot: Any) -> None:
    import threading

    lw = make_app([lockdir])
    lw.start(show_window=False)
    qtbot.waitUntil(lambda: lw.inventory.watcher is not None
                    and len(lw.inventory.dirs) == 1, timeout=20_000)
    other = tmp_path / "other"
    other.mkdir()
    write_sema(other / "b.lock", pid=dead_pid(), age=7200)
    w = lw.inventory.watcher
    threads: list[str] = []
    real_set_specs, real_dir_status = w.set_specs, w.dir_status

    def set_specs(specs: Any) -> Any:  # a spy: records the thread, then does the real work
        threads.append(threading.current_thread().name)
        return real_set_specs(specs)

    def dir_status() -> Any:
        threads.append(threading.current_thread().name)
        return real_dir_status()

    w.set_specs, w.dir_status = set_specs, dir_status
    dlg = lw.ops.open_settings()
    dlg.add_directory(str(other))
    dlg.accept()
    qtbot.waitUntil(lambda: lw.model.status_of(str(other / "b.lock")) is not None
                    and {d.path for d in lw.inventory.dirs} >= {str(other)}, timeout=20_000)
    assert threads and threading.main_thread().name not in threads


def test_expired_lock_of_a_live_holder_needs_a_forced_reclaim(make_app: Any, lockdir: Path,
                                                             qtbot: Any) -> None:
    import subprocess

    import psutil

    from core import audit

    holder = subprocess.Popen(["sleep", "120"])
    try:
        path = lockdir / "lease.lock"
        write_sema(path, pid=holder.pid, age=0, ttl=1,
                   ts=int(psutil.Process(holder.pid).create_time() + 0.999))
        lw = make_app([lockdir])
        lw.start(show_window=True)

        def expired() -> bool:
            st = lw.model.status_of(str(path))
            return st is not None and st.state is State.EXPIRED

        qtbot.waitUntil(expired, timeout=20_000)
        dlg = lw.ops.open_reclaim(str(path))
        assert dlg is not None and dlg.windowTitle() == "Force reclaim…"
        assert "holder is still alive" in dlg.label.text()
        assert dlg.ask_reason and not dlg.ok.isEnabled()
        dlg.accept()  # refused without a reason
        assert dlg.isVisible()
        dlg.reason.setText("holder hung, checked by hand")
        dlg.accept()
        qtbot.waitUntil(lambda: lw.ops.busy == 0 and lw.actions.holds(str(path)), timeout=20_000)
        assert f"pid={os.getpid()}" in path.read_text()
        entries = [e for e in audit.read(str(lockdir)) if e.operation == "reclaim"]
        assert entries and "holder hung" in str(entries[-1].details)
    finally:
        holder.kill()
        holder.wait()


def test_notifications_are_events_with_the_right_icons(make_app: Any, lockdir: Path,
                                                       qtbot: Any) -> None:
    from dataclasses import replace

    from PySide6.QtWidgets import QSystemTrayIcon

    import core

    info, warn = QSystemTrayIcon.MessageIcon.Information, QSystemTrayIcon.MessageIcon.Warning
    old_stale = lockdir / "old.lock"
    write_sema(old_stale, pid=dead_pid(), age=7200)
    lw = make_app([lockdir], tray=True, on_acquire=True, on_release=True)
    tray = lw.tray
    assert tray is not None
    notes = SignalSpy(tray.notified)
    lost = SignalSpy(lw.actions.lost)
    lw.start(show_window=False)
    qtbot.waitUntil(lambda: lw.inventory.initial_done
                    and lw.model.status_of(str(old_stale)) is not None, timeout=20_000)
    assert notes.calls == []  # what the first scan found is not news
    # a lock going stale now: a warning
    new_stale = lockdir / "new.lock"
    write_sema(new_stale, pid=dead_pid(), age=7200)
    qtbot.waitUntil(lambda: any(t == "new.lock is stale" for t in notes.column(0)),
                    timeout=20_000)
    assert notes.column(2)[-1] is warn
    n = len(notes.calls)
    # a stale lock judged held again (same holder) is no "acquired"
    st = lw.model.status_of(str(old_stale))
    assert st is not None
    lw.inventory.push([(st.path, replace(st, state=State.HELD, reasons=()))])
    lw.inventory.flush()
    assert len(notes.calls) == n
    # our own acquisition: "acquired", with the information icon
    mine = lockdir / "mine.lock"
    lw.actions.acquire(str(mine))
    qtbot.waitUntil(lambda: any(t == "mine.lock acquired" for t in notes.column(0)),
                    timeout=20_000)
    assert notes.column(2)[-1] is info
    # someone else takes it away: "Lost", never followed by "released"
    core.force_release(str(mine), reason="test")
    qtbot.waitUntil(lambda: lost.column(0) == [str(mine)], timeout=20_000)
    lw.inventory.flush()
    titles = notes.column(0)
    assert titles[-1] == "Lost mine.lock" and "mine.lock released" not in titles
    assert notes.column(2)[-1] is warn


@pytest.mark.parametrize("size", [22, 32, 64])
@pytest.mark.parametrize("count", [2, 12])
def test_tray_badge_stands_out_from_a_red_padlock(qtbot: Any, size: int, count: int) -> None:
    from PySide6.QtGui import QColor

    from app.style.icons import badge_geometry, badge_text, tray_pixmap

    img = tray_pixmap("problem", count, size).toImage()
    rect, font, _ring = badge_geometry(badge_text(count, size), size)
    assert font.pixelSize() >= 7
    x = int(rect.center().x())
    col = [QColor(img.pixel(x, y)) for y in range(int(rect.top()), int(rect.bottom()))]
    first_red = next(i for i, c in enumerate(col)
                     if c.red() > 150 and c.green() < 80 and c.alpha() > 250)
    light = [c.lightnessF() for c in col[:first_red]]
    # from the red padlock down into the badge: a dark ring (then a white one from 32 px),
    # then the red fill
    assert light and min(light) < 0.3, light
    if size >= 32:
        assert max(light) > 0.8 and light.index(min(light)) < light.index(max(light)), light
    assert badge_text(count, size) == (str(count) if size >= 32 or count < 10 else "9+")


@pytest.mark.slow
def test_tray_menu_explains_the_problem_state(make_app: Any, lockdir: Path, tmp_path: Path,
                                              qtbot: Any) -> None:
    missing = tmp_path / "not-there"
    (lockdir / "garbage.lock").write_bytes(b"\xff\xfe not a lock")
    lw = make_app([lockdir, missing], tray=True)
    tray = lw.tray
    assert tray is not None
    lw.start(show_window=False)
    qtbot.waitUntil(lambda: tray.state == "problem" and lw.inventory.initial_done
                    and len(lw.inventory.dirs) == 2
                    and lw.model.counts().get(State.UNREADABLE, 0) == 1, timeout=20_000)
    tray.rebuild_menu()
    acts = [a for a in tray.menu.actions() if a.text().startswith("Problems:")]
    assert [a.text() for a in acts] == ["Problems: 1 unreadable, 1 directory missing — Open…"]
    acts[0].trigger()
    assert lw.window.isVisible() and lw.window.filter.text() == "unreadable"
    assert lw.proxy.rowCount() == 1


def test_acquire_dialog_defaults_errors_and_task_mcp(make_app: Any, lockdir: Path,
                                                     tmp_path: Path, qtbot: Any) -> None:
    import subprocess

    import psutil

    second = tmp_path / "second"
    (second / "sub").mkdir(parents=True)
    holder = subprocess.Popen(["sleep", "120"])
    try:
        write_sema(second / "sub" / "other.lock", pid=holder.pid, age=0,
                   ts=int(psutil.Process(holder.pid).create_time() + 0.999))
        busy = lockdir / "busy.lock"
        write_sema(busy, pid=holder.pid, age=0,
                   ts=int(psutil.Process(holder.pid).create_time() + 0.999))
        lw = make_app([lockdir, second])
        lw.store.set(cfgmod.Config(watches=[
            cfgmod.WatchSpec(path=str(lockdir)), cfgmod.WatchSpec(path=str(second),
                                                                  recursive=True)]),
                     save=False)
        lw.start(show_window=True)
        other = str(second / "sub" / "other.lock")
        qtbot.waitUntil(lambda: lw.model.status_of(other) is not None
                        and lw.model.status_of(str(busy)) is not None, timeout=20_000)
        assert lw.window.select_path(other)
        # the selected row's subdirectory is not the default: the first watched one is
        lw.window.act_acquire.trigger()
        dlg = lw.ops.dialogs[-1]
        assert dlg.directory.currentText() == str(lockdir)
        # a failure keeps the dialog open with the error and the typed fields
        dlg.name.setText("busy.lock")
        dlg.tag.setText("keep me")
        dlg.accept()
        qtbot.waitUntil(lambda: lw.ops.busy == 0 and dlg.error.isVisibleTo(dlg), timeout=20_000)
        assert dlg in lw.ops.dialogs and dlg.isVisible()
        assert "held by someone else" in dlg.error.text()
        assert dlg.tag.text() == "keep me" and dlg.ok.isEnabled()
        # success closes it; the same lock again is "already held by this Lockwarden"
        dlg.name.setText("mine.lock")
        dlg.accept()
        qtbot.waitUntil(lambda: lw.ops.busy == 0 and dlg not in lw.ops.dialogs, timeout=20_000)
        assert lw.actions.holds(str(lockdir / "mine.lock"))
        dlg = lw.ops.open_acquire()
        assert dlg.directory.currentText() == str(lockdir)
        dlg.name.setText("mine.lock")
        dlg.accept()
        qtbot.waitUntil(lambda: lw.ops.busy == 0 and dlg.error.isVisibleTo(dlg), timeout=20_000)
        assert "already held by this Lockwarden" in dlg.error.text()
        assert "someone else" not in dlg.error.text()
        # task-mcp: "no TTL" means the spec's default lease
        dlg.format.setCurrentText("task-mcp")
        assert dlg.ttl.value() == 0 and "spec default" in dlg.ttl.specialValueText()
        assert dlg.ttl_note.isVisibleTo(dlg) and "default" in dlg.ttl_note.text()
        dlg.format.setCurrentText("sema")
        assert dlg.ttl.specialValueText() == "no TTL" and not dlg.ttl_note.isVisibleTo(dlg)
        dlg.reject()
    finally:
        holder.kill()
        holder.wait()


def test_same_name_in_two_directories(make_app: Any, lockdir: Path, tmp_path: Path,
                                      qtbot: Any) -> None:
    from PySide6.QtCore import Qt

    from app.table.columns import Col

    a = tmp_path / "projects" / "alpha" / "build"
    b = tmp_path / "projects" / "beta" / "build2"
    for d in (a, b):
        d.mkdir(parents=True)
        write_sema(d / "x.lock", pid=dead_pid(), age=7200)
    lw = make_app([a, b], tray=True)
    lw.start(show_window=True)
    qtbot.waitUntil(lambda: lw.model.rowCount() == 2, timeout=20_000)
    delegate = lw.window.table.itemDelegateForColumn(int(Col.DIRECTORY))
    from PySide6.QtWidgets import QStyleOptionViewItem

    opt = QStyleOptionViewItem()
    delegate.initStyleOption(opt, lw.proxy.index(0, int(Col.DIRECTORY)))
    assert opt.textElideMode == Qt.TextElideMode.ElideMiddle
    assert lw.window.table.textElideMode() == Qt.TextElideMode.ElideRight  # others unchanged
    tray = lw.tray
    assert tray is not None
    tray.rebuild_menu()
    titles = sorted(x.text().split(" — ")[0] for x in tray.menu.actions()
                    if x.menu() is not None)
    assert titles == ["build/x.lock", "build2/x.lock"]


def test_rows_keep_their_order_and_selection_never_moves(make_app: Any, lockdir: Path,
                                                         qtbot: Any) -> None:
    from dataclasses import replace

    from PySide6.QtCore import Qt

    from app.table.columns import Col

    paths = [str(lockdir / f"{n}.lock") for n in ("c", "a", "d", "b")]
    for p in paths:
        write_sema(Path(p), pid=dead_pid(), age=7200)
    lw = make_app([lockdir])
    lw.start(show_window=True)
    qtbot.waitUntil(lambda: lw.model.rowCount() == 4 and lw.inventory.initial_done,
                    timeout=20_000)
    lw.window.table.sortByColumn(int(Col.STATE), Qt.SortOrder.AscendingOrder)

    def order() -> list[str]:
        out = []
        for r in range(lw.proxy.rowCount()):
            st = lw.proxy.status_at(r)
            assert st is not None
            out.append(st.path)
        return out

    assert order() == sorted(paths)  # equal states: by path
    # a row whose reasons change (same state) stays where it is
    st = lw.model.status_of(paths[1])
    assert st is not None
    lw.inventory.push([(st.path, replace(st, reasons=(*st.reasons, Reason.of(Code.AGE_UNKNOWN))))])
    lw.inventory.flush()
    assert order() == sorted(paths)
    # the selected lock disappears: nothing else gets selected behind the user's back
    assert lw.window.select_path(paths[1])
    lw.inventory.push([(paths[1], None)])
    lw.inventory.flush()
    assert lw.window.current_status() is None
    assert lw.window.detail.status is None
    assert not lw.window.act_force.isEnabled()
    qtbot.waitUntil(lambda: "a.lock is no longer in the list: it was released"
                    in lw.window.detail.reasons.text(), timeout=10_000)
    # hidden by the filter: said so, and again nothing else is selected
    assert lw.window.select_path(paths[0])
    lw.window.filter.setText("d.lock")
    assert lw.window.current_status() is None
    qtbot.waitUntil(lambda: "c.lock is no longer in the list: it is hidden by the filter"
                    in lw.window.detail.reasons.text(), timeout=10_000)
    # the filter cleared: the lock it hid is selected again, its verdict shown, not the note
    lw.window.filter.clear()
    st = lw.window.current_status()
    assert st is not None and st.path == paths[0]
    assert lw.window.detail.status is not None and lw.window.detail.status.path == paths[0]
    assert "no longer in the list" not in lw.window.detail.reasons.text()


@pytest.mark.slow
def test_unreadable_rows_show_their_bytes_and_no_unsafe_actions(make_app: Any, lockdir: Path,
                                                                qtbot: Any) -> None:
    from app.bridges.lock_actions import ActionError

    garbage = lockdir / "garbage.lock"
    garbage.write_bytes(b"\xff\xfe\x01pid=abc\n")
    fifo = lockdir / "pipe.lock"
    os.mkfifo(fifo)
    link = lockdir / "link.lock"
    link.symlink_to(garbage)
    normal = lockdir / "normal.lock"
    write_sema(normal, pid=dead_pid(), age=age_after_boot(60))
    lw = make_app([lockdir])
    errors = SignalSpy(lw.ops.errorShown)
    lw.start(show_window=True)
    qtbot.waitUntil(lambda: lw.model.rowCount() == 4, timeout=20_000)
    w, pane = lw.window, lw.window.detail
    assert w.select_path(str(garbage))
    qtbot.waitUntil(lambda: "pid=abc" in pane.raw.toPlainText(), timeout=20_000)
    assert pane.raw.toPlainText().startswith("\\xff\\xfe\\x01pid=abc")
    assert w.act_force.isEnabled()  # a real file: it may be force-released
    for odd in (fifo, link):
        assert w.select_path(str(odd))
        qtbot.waitUntil(lambda: pane.raw.placeholderText().startswith("(not shown:"),
                        timeout=20_000)
        assert pane.raw.toPlainText() == ""
        assert not w.act_force.isEnabled() and not w.act_reclaim.isEnabled()
        assert lw.ops.open_force_release(str(odd)) is None
        assert errors.last is not None and errors.last[0] == "Not a lock file"
    assert w.select_path(str(normal))
    assert pane.raw.placeholderText() == "(file content)"
    assert "pid=" in pane.raw.toPlainText()
    # an engine error names the path once
    holder_path = str(normal)
    lw.actions.acquire(str(lockdir / "mine.lock"))
    try:
        lw.actions.acquire(str(lockdir / "mine.lock"))
    except ActionError as exc:
        assert str(exc).count(str(lockdir / "mine.lock")) == 1
    else:
        raise AssertionError("acquiring a held lock succeeded")
    import subprocess

    import psutil

    holder = subprocess.Popen(["sleep", "60"])
    try:
        write_sema(normal, pid=holder.pid, age=0,
                   ts=int(psutil.Process(holder.pid).create_time() + 0.999))
        with pytest.raises(ActionError) as info:
            lw.actions.acquire(holder_path)
        assert "held by someone else" in str(info.value)
        assert str(info.value).count(holder_path) == 1, str(info.value)
    finally:
        holder.kill()
        holder.wait()


def test_keyboard_shortcuts_and_tray_entries(make_app: Any, lockdir: Path,
                                             qtbot: Any) -> None:
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication as QApp

    from app.dialogs import ConfirmDialog, SettingsDialog

    stale = lockdir / "stale.lock"
    write_sema(stale, pid=dead_pid(), age=7200)
    lw = make_app([lockdir], tray=True)
    lw.start(show_window=True)
    qtbot.waitUntil(lambda: lw.model.status_of(str(stale)) is not None, timeout=20_000)
    w = lw.window
    w.activateWindow()
    qtbot.waitUntil(lambda: QApp.activeWindow() is w, timeout=10_000)
    assert w.select_path(str(stale))
    w.table.setFocus()
    qtbot.keyClick(w.table, Qt.Key.Key_Delete)  # not ours: a hint, nothing released
    assert "not held by this Lockwarden" in w.statusBar().currentMessage()
    assert stale.exists()
    # "mine" in the Holder column (a process of this user, here the one that ran the tests,
    # older than the lock): Del names it
    held = lockdir / "held.lock"
    write_sema(held, pid=os.getppid(), age=1)
    qtbot.waitUntil(lambda: lw.model.status_of(str(held)) is not None, timeout=20_000)
    assert w.select_path(str(held))
    w.table.setFocus()
    qtbot.keyClick(w.table, Qt.Key.Key_Delete)
    said = w.statusBar().currentMessage()
    assert f"PID {os.getppid()}" in said and "of your user, not by this Lockwarden" in said
    assert held.exists()
    assert w.select_path(str(stale))
    keys: list[tuple[Any, Any, Any, str]] = [
        (Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier,
         ConfirmDialog, "Reclaim lock"),
        (Qt.Key.Key_Delete,
         Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier,
         ConfirmDialog, "Force release…"),
        (Qt.Key.Key_Comma, Qt.KeyboardModifier.ControlModifier, SettingsDialog,
         "Lockwarden settings"),
    ]
    for key, mods, kind, title in keys:
        n = len(lw.ops.dialogs)
        qtbot.keyClick(w.table, key, mods)
        assert len(lw.ops.dialogs) == n + 1, title
        dlg: Any = lw.ops.dialogs[-1]
        assert isinstance(dlg, kind) and dlg.windowTitle() == title
        dlg.reject()
        qtbot.waitUntil(lambda d=dlg: d not in lw.ops.dialogs, timeout=10_000)
    assert stale.exists()
    tray = lw.tray
    assert tray is not None
    tray.rebuild_menu()
    texts = [a.text() for a in tray.menu.actions()]
    assert "Settings…" in texts and "Audit log…" in texts
    next(a for a in tray.menu.actions() if a.text() == "Audit log…").trigger()
    assert lw.ops.dialogs and lw.ops.dialogs[-1].windowTitle() == "Audit log"
    lw.ops.dialogs[-1].reject()
