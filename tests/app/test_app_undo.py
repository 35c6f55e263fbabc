"""The window's side of "Nothing lost" (docs/gui.md, "Window", "Dialogs"; offscreen Qt, the real
engine and watcher, real processes and a real Vim): Force release keeps a foreign file and
offers Undo (status bar button, Edit menu, Ctrl+Z), which puts it back but never over a lock
taken meanwhile; a Vim swap with unsaved changes gets a confirmation that names them and the
recovery command; the audit viewer keeps showing a directory removed from Settings and shows
the user's own log (where entries about locks in git repositories go)."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from core import audit
from tests.support.app_spies import SignalSpy
from tests.support.editors import dirty_vim_swap

WAIT_MS = 20000


@pytest.fixture
def sleeper() -> Iterator[int]:
    p = subprocess.Popen(["sleep", "600"])
    try:
        yield p.pid
    finally:
        p.kill()
        p.wait()


def foreign_lock(path: Path, pid: int, tag: str = "deploy") -> bytes:
    subprocess.run(["bash", "-c", 'printf "pid=%s\\ntimestamp=%s\\ntag=%s\\n" "$1" '
                    '"$(date +%s)" "$2" > "$0"', str(path), str(pid), tag], check=True)
    return path.read_bytes()


def started(make_app: Any, qtbot: Any, dirs: list[Path]) -> Any:
    lw = make_app(dirs)
    lw.start(show_window=True)
    qtbot.waitUntil(lambda: bool(lw.inventory.dirs), timeout=WAIT_MS)
    return lw


def force_release(lw: Any, qtbot: Any, path: Path) -> None:
    qtbot.waitUntil(lambda: lw.model.status_of(str(path)) is not None, timeout=WAIT_MS)
    dlg = lw.ops.open_force_release(str(path))
    assert dlg is not None
    dlg.reason.setText("holder hung")
    dlg.accept()
    qtbot.waitUntil(lambda: lw.ops.busy == 0, timeout=WAIT_MS)


def test_force_release_keeps_the_file_and_ctrl_z_puts_it_back(
        make_app: Any, qtbot: Any, lockdir: Path, sleeper: int) -> None:
    lw = started(make_app, qtbot, [lockdir])
    lock = lockdir / "deploy.lock"
    data = foreign_lock(lock, sleeper)
    undo = lw.undo
    assert not undo.action.isEnabled() and undo.button.isHidden()
    assert undo.action in lw.window.menus.edit.actions()
    assert undo.action.shortcut() == QKeySequence(QKeySequence.StandardKey.Undo)
    force_release(lw, qtbot, lock)
    assert not lock.exists()
    kept = lw.ops.last_kept
    assert kept is not None and kept.method == "trash" and Path(kept.path).read_bytes() == data
    assert undo.action.isEnabled() and not undo.button.isHidden()
    assert "deploy.lock" in undo.action.text()
    assert f"the file is in the trash ({kept.path})" in lw.window.statusBar().currentMessage()

    lw.window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is lw.window, timeout=WAIT_MS)
    lw.window.table.setFocus()
    QTest.keyClick(lw.window.table, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lock.exists, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: lw.ops.busy == 0, timeout=WAIT_MS)
    assert lock.read_bytes() == data and not Path(kept.path).exists()
    assert not undo.action.isEnabled() and undo.button.isHidden()
    [entry] = [e for e in audit.read(str(lockdir)) if e.operation == "restore"]
    assert entry.via == "gui" and entry.details["kept"]["path"] == kept.path
    qtbot.waitUntil(lambda: lw.model.status_of(str(lock)) is not None, timeout=WAIT_MS)


def test_ctrl_z_in_the_filter_box_undoes_the_force_release(
        make_app: Any, qtbot: Any, lockdir: Path, sleeper: int) -> None:
    """The filter box has the focus at start-up and a line edit takes Ctrl+Z for its own
    text: while a force release can be undone, Ctrl+Z there undoes it (what the status bar and
    the Edit menu promise); otherwise the box's own undo keeps working."""
    lw = started(make_app, qtbot, [lockdir])
    lock = lockdir / "deploy.lock"
    data = foreign_lock(lock, sleeper)
    w = lw.window
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w, timeout=WAIT_MS)
    assert w.focusWidget() is w.filter  # the focus at start-up
    QTest.keyClicks(w.filter, "dep")
    QTest.keyClick(w.filter, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert w.filter.text() == ""  # nothing to undo but the typing: the box's own undo
    force_release(lw, qtbot, lock)
    assert not lock.exists() and lw.undo.action.isEnabled()
    w.activateWindow()  # again: the confirmation had it
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w, timeout=WAIT_MS)
    w.filter.setFocus()
    QTest.keyClick(w.filter, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lock.exists, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: lw.ops.busy == 0, timeout=WAIT_MS)
    assert lock.read_bytes() == data and not lw.undo.action.isEnabled()


def test_undo_never_overwrites_a_lock_taken_meanwhile(
        make_app: Any, qtbot: Any, lockdir: Path, sleeper: int) -> None:
    lw = started(make_app, qtbot, [lockdir])
    errors = SignalSpy(lw.ops.errorShown)
    lock = lockdir / "deploy.lock"
    data = foreign_lock(lock, sleeper)
    force_release(lw, qtbot, lock)
    kept = lw.ops.last_kept
    assert kept is not None
    successor = foreign_lock(lock, sleeper, "next deploy")  # it took the free lock
    lw.undo.button.click()
    qtbot.waitUntil(lambda: errors.last is not None, timeout=WAIT_MS)
    assert errors.last is not None
    title, text = errors.last
    assert title == "Could not undo the force release" and "taken again" in text
    assert kept.path in text  # says where the removed file still is
    assert lock.read_bytes() == successor and Path(kept.path).exists()
    qtbot.waitUntil(lambda: lw.ops.busy == 0, timeout=WAIT_MS)
    qtbot.waitUntil(lw.undo.action.isEnabled, timeout=WAIT_MS)  # offered again
    lock.unlink()  # the next deploy is done
    lw.undo.action.trigger()
    qtbot.waitUntil(lambda: lw.ops.busy == 0 and lock.exists(), timeout=WAIT_MS)
    assert lock.read_bytes() == data and not Path(kept.path).exists()


def test_a_vim_swap_with_unsaved_changes_needs_them_discarded_by_name(
        make_app: Any, qtbot: Any, tmp_path: Path) -> None:
    from app.dialogs import UnsavedDialog

    editing = tmp_path / "editing"
    editing.mkdir()
    swap, edited = dirty_vim_swap(editing)
    data = swap.read_bytes()
    lw = started(make_app, qtbot, [editing])
    lw.ops.apply_settings(dataclasses.replace(lw.config, watches=[
        dataclasses.replace(w, patterns=["*.lock", ".*.sw?"]) for w in lw.config.watches]))
    qtbot.waitUntil(lambda: lw.model.status_of(str(swap)) is not None, timeout=WAIT_MS)
    dlg = lw.ops.open_force_release(str(swap))
    assert isinstance(dlg, UnsavedDialog)
    assert "unsaved Vim changes" in dlg.label.text() and str(edited) in dlg.label.text()
    assert dlg.command.text() == f"vim -r {edited}"
    dlg.copy.click()
    assert lw.qapp.clipboard().text() == f"vim -r {edited}"
    dlg.reason.setText("vim crashed, changes recovered")
    assert not dlg.ok.isEnabled()
    dlg.accept()  # not discarded: refused
    assert swap.read_bytes() == data
    dlg.discard.setChecked(True)
    assert dlg.ok.isEnabled()
    dlg.accept()
    qtbot.waitUntil(lambda: lw.ops.busy == 0 and not swap.exists(), timeout=WAIT_MS)
    kept = lw.ops.last_kept
    assert kept is not None and Path(kept.path).read_bytes() == data


def test_the_audit_viewer_keeps_a_removed_directory_and_shows_the_users_log(
        make_app: Any, qtbot: Any, tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    lw = started(make_app, qtbot, [old, new])
    import core

    core.Lock(str(old / "nightly.lock")).acquire(blocking=False).release()
    if shutil.which("git"):
        repo = tmp_path / "repo"
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        core.Lock(str(repo / "build.lock")).acquire(blocking=False).release()
        assert not (repo / ".lock_audit.log").exists()
    lw.ops.apply_settings(dataclasses.replace(lw.config, watches=[
        w for w in lw.config.watches if w.path == str(new)]))
    assert [w.path for w in lw.config.watches] == [str(new)]
    dlg = lw.ops.open_audit()
    qtbot.waitUntil(lambda: dlg.ready, timeout=WAIT_MS)
    locks = {r["lock"] for r in dlg.entries}
    assert str(old / "nightly.lock") in locks
    if shutil.which("git"):
        assert str(tmp_path / "repo" / "build.lock") in locks
    assert audit.known_logs()[:2] == [str(old / ".lock_audit.log"), str(new / ".lock_audit.log")]


def test_the_balloon_after_a_force_release_says_force_released(
        make_app: Any, qtbot: Any, lockdir: Path, sleeper: int) -> None:
    """With "A lock is released" on, another tool's lock that disappears is "released"; one
    this app force-released is said to be force-released by the user, not "released" as if its
    holder had let it go."""
    lw = make_app([lockdir], tray=True, on_release=True)
    tray = lw.tray
    assert tray is not None
    notes = SignalSpy(tray.notified)
    lw.start(show_window=False)
    qtbot.waitUntil(lambda: lw.inventory.initial_done, timeout=WAIT_MS)
    lock = lockdir / "deploy.lock"
    foreign_lock(lock, sleeper)
    force_release(lw, qtbot, lock)
    qtbot.waitUntil(lambda: lw.model.status_of(str(lock)) is None, timeout=WAIT_MS)
    lw.inventory.flush()
    qtbot.waitUntil(lambda: bool(notes.calls), timeout=WAIT_MS)
    titles = notes.column(0)
    assert "deploy.lock released" not in titles, titles
    assert "deploy.lock force-released" in titles, titles
    [body] = [b for t, b, _i in notes.calls if t == "deploy.lock force-released"]
    assert "by you" in body and "holder hung" in body
    other = lockdir / "other.lock"  # another tool's release stays "released"
    foreign_lock(other, sleeper, "build")
    qtbot.waitUntil(lambda: lw.model.status_of(str(other)) is not None, timeout=WAIT_MS)
    other.unlink()
    qtbot.waitUntil(lambda: "other.lock released" in notes.column(0), timeout=WAIT_MS)
