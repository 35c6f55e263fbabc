"""What a new user meets in the window (docs/gui.md): states told apart, the rule that decided,
durations in words, dialogs that grow, the audit viewer and a lock's history, notifications
that lead to their lock, first-scan progress, the column chooser, remembered filters and
accessible names. Real files, real offscreen Qt."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtGui import QImage

from app.dialogs.acquire import AcquireDialog
from app.dialogs.audit import AuditDialog
from app.dialogs.duration import parse_duration
from app.style.icons import state_icon
from app.table.columns import Col
from app.table.lockinfo import HELD_DEAD, STATE_WORDS
from tests.support.app_spies import SignalSpy
from tests.support.cli import dead_pid


def _row_of(lw: Any, path: Path) -> int:
    st = lw.model.status_of(str(path))
    assert st is not None
    row = lw.model.row_of(str(path))
    assert row is not None
    return int(row)


def test_a_dead_holders_lock_is_told_apart_from_held(make_app: Any, lockdir: Path,
                                                     qtbot: Any) -> None:
    """A pidfile whose daemon died is "held" by the rules (another tool's lock younger than
    the stale limit) but must not look like a live one: word, icon and the rule differ."""
    dead = lockdir / "daemon.pid"
    dead.write_text(f"{dead_pid()}\n")
    live = lockdir / "live.pid"
    live.write_text(f"{os.getpid()}\n")
    lw = make_app([lockdir])
    lw.start(show_window=True)
    qtbot.waitUntil(lambda: lw.model.status_of(str(dead)) is not None
                    and lw.model.status_of(str(live)) is not None, timeout=10_000)
    m = lw.model
    d_row, l_row = _row_of(lw, dead), _row_of(lw, live)
    assert m.data(m.index(d_row, Col.STATE)) == STATE_WORDS[HELD_DEAD] == "held, holder dead"
    assert m.data(m.index(l_row, Col.STATE)) == "held"
    img_dead = state_icon(HELD_DEAD).pixmap(28, 28).toImage()
    img_held = state_icon("held").pixmap(28, 28).toImage()
    assert img_dead.convertToFormat(QImage.Format.Format_ARGB32) != \
        img_held.convertToFormat(QImage.Format.Format_ARGB32)
    assert img_dead.pixelColor(14, 14).alpha() == 0  # a ring: the centre is empty
    assert "holder dead" in m.data(m.index(d_row, Col.STATE), 3)  # ToolTipRole
    assert lw.window.select_path(str(dead))
    assert lw.window.detail.values["Safe action"].text().startswith("its holder is gone")
    rule = lw.window.detail.values["Rule"].text()
    assert "stays held until it is older than the stale limit" in rule
    age = m.data(m.index(d_row, Col.AGE))
    assert age and age != "-"  # a pidfile's age is its file's age, and the pane says so
    assert "from the file's modification time" in lw.window.detail.values["Acquired"].text()


def test_durations_are_words(make_app: Any, lockdir: Path) -> None:
    assert parse_duration("1 h 30 min") == 5400.0
    assert parse_duration("90") == 90.0 and parse_duration("2.5 s") == 2.5
    assert parse_duration("1d 2h") == 93600.0 and parse_duration("soon") is None
    lw = make_app([lockdir], stale_after=3600.0)
    dlg = lw.ops.open_settings()
    assert dlg.stale.text() == "1 h"
    dlg.stale.lineEdit().setText("1 h 30 min")
    dlg.stale.interpretText()
    assert dlg.stale.value() == 5400.0
    dlg.reject()


def test_acquire_dialog_grows_for_an_error(qtbot: Any, lockdir: Path) -> None:
    dlg = AcquireDialog([str(lockdir)], directory=str(lockdir))
    qtbot.addWidget(dlg)
    dlg.show()
    qtbot.waitExposed(dlg)
    fields = (dlg.name, dlg.tag, dlg.ttl, dlg.directory)
    height = dlg.height()
    dlg.failed("cannot create a lock file in /very/long/path: Permission denied; " * 4)
    qtbot.waitUntil(lambda: dlg.error.isVisible())
    assert dlg.height() > height  # the dialog grew...
    for w in fields:  # ...instead of squashing a field below the height it needs
        assert w.height() >= w.minimumSizeHint().height(), (w, dlg.name, dlg.tag, dlg.size())
    assert dlg.error.text().startswith("cannot create")


def test_audit_viewer_shows_foreign_entries_whole_and_a_lock_history(
        qtbot: Any, tmp_path: Path) -> None:
    log = tmp_path / ".lock_audit.log"
    lines = [{"timestamp": "2026-11-25T10:00:00.000Z", "operation": "acquire",
              "lockPath": str(tmp_path / "a.lock"), "details": {"owner": "pid-1@h"}},
             {"timestamp": "2026-11-25T10:00:01.000Z", "operation": "release",
              "lockPath": str(tmp_path / "b.lock"), "details": {}}]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    dlg = AuditDialog([str(log)])
    qtbot.addWidget(dlg)
    qtbot.waitUntil(lambda: dlg.ready, timeout=10_000)
    items = [dlg.table.item(r, c) for r in range(dlg.table.rowCount())
             for c in range(dlg.table.columnCount())]
    texts = [i.text() for i in items if i is not None]
    assert "None" not in texts and "owner: pid-1@h" in texts
    dlg.table.selectRow(1)  # newest first: row 1 is the acquire
    assert '"owner": "pid-1@h"' in dlg.entry.toPlainText()
    hist = AuditDialog([str(log)], lock=str(tmp_path / "a.lock"))
    qtbot.addWidget(hist)
    qtbot.waitUntil(lambda: hist.ready, timeout=10_000)
    assert [r["operation"] for r in hist.visible_entries()] == ["acquire"]
    assert hist.windowTitle() == "Audit entries of a.lock"


def test_clicking_a_notification_opens_its_lock(make_app: Any, lockdir: Path,
                                                qtbot: Any) -> None:
    path = lockdir / "x.lock"
    path.write_text(f"pid={os.getpid()}\ntimestamp={int(time.time())}\n")
    lw = make_app([lockdir], tray=True)
    lw.start(show_window=False)
    qtbot.waitUntil(lambda: lw.model.status_of(str(path)) is not None, timeout=10_000)
    lw.window.filter.setText("nothing matches this")
    spy = SignalSpy(lw.tray.showLockRequested)
    lw.tray.notify("x.lock is stale", "why", path=str(path))
    lw.tray.message_clicked()  # what QSystemTrayIcon.messageClicked calls
    assert spy.calls == [(str(path),)]
    assert lw.window.isVisible()
    st = lw.window.current_status()
    assert st is not None and st.path == str(path)


def test_first_scan_progress_column_chooser_filters_and_names(make_app: Any, lockdir: Path,
                                                               qtbot: Any) -> None:
    lw = make_app([lockdir])
    w = lw.window
    assert not lw.inventory.initial_done and w.scan_progress.isVisibleTo(w)
    lw.start(show_window=True)
    qtbot.waitUntil(lambda: lw.inventory.initial_done, timeout=10_000)
    assert not w.scan_progress.isVisibleTo(w)
    menu = w.table.column_menu()
    tag = next(a for a in menu.actions() if a.text() == "Tag")
    state = next(a for a in menu.actions() if a.text() == "State")
    assert not state.isEnabled()
    tag.setChecked(False)
    assert w.table.horizontalHeader().isSectionHidden(int(Col.TAG))
    w.filter.setText("build")
    w.stale_only.setChecked(True)
    w.save_state()
    w.filter.clear()
    w.stale_only.setChecked(False)
    w.table.horizontalHeader().setSectionHidden(int(Col.TAG), False)
    w.restore_state()
    assert w.filter.text() == "build" and w.stale_only.isChecked()
    assert w.table.horizontalHeader().isSectionHidden(int(Col.TAG))
    assert w.table.accessibleName() == "Locks" and w.filter.accessibleName()
    assert w.detail.values["State"].accessibleName() == "State"
    assert w.act_history.shortcut().toString() == "Ctrl+H"


def test_rescan_keys(make_app: Any, lockdir: Path) -> None:
    lw = make_app([lockdir])
    keys = [k.toString() for k in lw.window.act_rescan.shortcuts()]
    assert "F5" in keys and "Ctrl+R" in keys


def test_history_from_the_detail_pane(make_app: Any, lockdir: Path, qtbot: Any) -> None:
    path = lockdir / "h.lock"
    lw = make_app([lockdir])
    lw.start(show_window=True)
    lw.actions.acquire(str(path))
    qtbot.waitUntil(lambda: lw.model.status_of(str(path)) is not None, timeout=10_000)
    assert lw.window.select_path(str(path))
    n = len(lw.ops.dialogs)
    lw.window.detail.history.click()
    dlg = lw.ops.dialogs[n]
    assert dlg.windowTitle() == "Audit entries of h.lock"
    qtbot.waitUntil(lambda: dlg.ready, timeout=10_000)
    assert [r["operation"] for r in dlg.visible_entries()] == ["acquire"]
    dlg.reject()


def test_gui_help_shows_its_options() -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "app.console", "gui", "--help"],
                         capture_output=True, text=True, timeout=60, check=True)
    for opt in ("--demo", "--minimized", "--config"):
        assert opt in out.stdout


@pytest.mark.slow
def test_kernel_locks_offer_only_safe_actions(make_app: Any, lockdir: Path, qtbot: Any) -> None:
    """An empty file held by a real flock(1): shown as a kernel lock with its tool, kind and
    safe action; Force release and Reclaim are not offered (deleting it would let a second
    holder in)."""
    import shutil
    import subprocess

    import pytest

    if shutil.which("flock") is None or not os.path.exists("/proc/locks"):
        pytest.skip("flock(1) and /proc/locks (Linux) are needed")
    path = lockdir / "uv.lock"
    path.write_bytes(b"")
    proc = subprocess.Popen(["flock", str(path), "sh", "-c", "echo locked; exec cat"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        lw = make_app([lockdir])
        lw.start(show_window=True)
        qtbot.waitUntil(lambda: (st := lw.model.status_of(str(path))) is not None
                        and st.kernel_held, timeout=10_000)
        m = lw.model
        row = _row_of(lw, path)
        assert m.data(m.index(row, Col.TOOL)) == "kernel"
        assert m.data(m.index(row, Col.KIND)) == "kernel"
        assert m.data(m.index(row, Col.PID)) == str(lw.model.status_of(str(path)).kernel_pid)
        assert lw.window.select_path(str(path))
        w = lw.window
        assert not w.act_force.isEnabled() and not w.act_reclaim.isEnabled()
        assert w.detail.values["Kind"].text().startswith("kernel lock")
        assert w.detail.values["Safe action"].text().startswith("leave it")
        # the one action offered: end the holder, confirmed with a reason, audited
        assert w.act_end_holder.isEnabled()
        n = len(lw.ops.dialogs)
        w.act_end_holder.trigger()
        dlg = lw.ops.dialogs[n]
        assert dlg.windowTitle() == "End holder process…" and not dlg.ok.isEnabled()
        dlg.reason.setText("uv hung")
        dlg.accept()
        assert proc.wait(timeout=30) != 0
    finally:
        proc.kill()
        proc.wait()
