"""The window at its default size with its docks open (docs/gui.md, "Docks"; offscreen Qt, the
real app): the History, Problems and Hosts docks share the space under the table as tabs and
leave it at least eight rows; the default columns fit the window (Holder, PID and Expires are
never pushed out of sight, and Expires is wide enough for its longest countdown); every dock
says something when it is empty."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QApplication

from app.table.columns import Col

WAIT_MS = 20000


def dead_pid() -> int:
    """A PID that just exited (reaped): no process has it."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def shown(lw: Any, qtbot: Any) -> Any:
    lw.start(show_window=True)
    w = lw.window
    qtbot.waitExposed(w)
    assert (w.width(), w.height()) == (1100, 680)  # the default size
    return w


def fully_visible(w: Any, col: Col) -> bool:
    t = w.table
    left = t.columnViewportPosition(int(col))
    return (not t.isColumnHidden(int(col)) and left >= 0
            and left + t.columnWidth(int(col)) <= t.viewport().width())


def test_the_docks_leave_the_table_eight_rows_and_its_columns(make_app: Any, qtbot: Any,
                                                              lockdir: Path) -> None:
    lw = make_app([lockdir])
    w = shown(lw, qtbot)
    for col in Col:  # the default columns fit the window: nothing to scroll to
        if not w.table.isColumnHidden(int(col)):
            assert fully_visible(w, col), col
    countdown = w.table.fontMetrics().horizontalAdvance("in 23h 59m")
    assert w.table.columnWidth(int(Col.EXPIRES)) >= countdown + 12
    w.set_fleet(True)  # the Hosts panel opens
    lw.history.dock.show()
    w.problems.reveal()
    QApplication.processEvents()
    docks = (w.hosts, lw.history.dock, w.problems)
    assert all(d.isVisible() or w.tabifiedDockWidgets(d) for d in docks)
    assert {d for d in docks} == {w.problems, *w.tabifiedDockWidgets(w.problems)}
    rows = w.table.viewport().height() / w.table.verticalHeader().defaultSectionSize()
    assert rows >= 8, rows
    for col in (Col.HOLDER, Col.PID, Col.EXPIRES):
        assert fully_visible(w, col), col
    # the detail pane, squeezed, scrolls: the reasons are never cut
    lock = lockdir / "deploy.lock"
    lock.write_text(f"pid={dead_pid()}\ntimestamp={int(time.time()) - 7200}\ntag=deploy\n")
    qtbot.waitUntil(lambda: w.select_path(str(lock)), timeout=WAIT_MS)
    w.splitter.setSizes([10_000, 1])  # the pane as small as it goes, its reasons long
    w.detail.reasons.setText("<ul>" + "<li>a reason worded at length, as some are</li>" * 6
                             + "</ul>")
    QApplication.processEvents()
    why = w.detail.reasons
    assert why.text() and why.height() >= why.heightForWidth(why.width())
    for dock in docks:  # each, brought forward, has room to show something
        dock.raise_()
        QApplication.processEvents()
        assert dock.widget().height() >= 80, dock.objectName()


def test_every_dock_says_something_when_empty(make_app: Any, qtbot: Any,
                                              lockdir: Path) -> None:
    lw = make_app([lockdir])
    w = shown(lw, qtbot)
    w.problems.reveal()
    QApplication.processEvents()
    assert w.problems.count() == 0
    assert w.problems.summary.text() == "No problems"
    note = w.problems.empty_note
    assert note.isVisible() and "configuration file reads well" in note.text()
    assert note.width() >= note.fontMetrics().horizontalAdvance("The configuration file")
    w.set_fleet(True)
    w.hosts.raise_()
    QApplication.processEvents()
    assert "No host has published" in w.hosts.summary.text()
    lw.history.dock.show()
    lw.history.dock.raise_()
    QApplication.processEvents()
    assert lw.history.pane.title.text()  # "Select a lock …" or the lock's history
