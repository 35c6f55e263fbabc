"""History in the app (docs/gui.md "History", "Notify me when free"): the app records what its
watcher sees, the History pane shows the selected lock's timeline, figures and transitions,
"Notify me when free" tells once when a held lock is released or its holder dies, and a data
directory that cannot be written shows a visible reason while the table keeps working. Real
files, a real holder process, real Qt (offscreen)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from core.history.model import Observation
from core.history.store import HistoryStore, default_path


def sema(path: Path, pid: int) -> None:
    path.write_text(f"pid={pid}\ntimestamp={int(time.time())}\ntag=build\n")


def select(lw: Any, qtbot: Any, path: Path) -> None:
    qtbot.waitUntil(lambda: lw.window.select_path(str(path)))


def test_the_app_records_and_the_pane_shows_the_lock(make_app: Any, lockdir: Path,
                                                     qtbot: Any) -> None:
    lw = make_app([lockdir], stale_after=1.0)  # another tool's lock: stale 1 s after death
    lw.start(show_window=True)
    qtbot.waitUntil(lambda: lw.inventory.initial_done)
    holder = subprocess.Popen(["sleep", "600"])
    try:
        lock = lockdir / "build.lock"
        sema(lock, holder.pid)
        select(lw, qtbot, lock)
        holder.kill()
        holder.wait()
        qtbot.waitUntil(lambda: (st := lw.window.current_status()) is not None
                        and st.state.value == "stale", timeout=10000)
    finally:
        holder.kill()
        holder.wait()
    rec = lw.history.recorder.recorder
    assert rec is not None and rec.flush()
    store = HistoryStore(readonly=True)
    rows = store.transitions(str(lock))
    store.close()
    assert [(r.event, r.pid) for r in rows] == [("acquired", holder.pid),
                                               ("stale", holder.pid)]

    lw.history.act_history.trigger()  # Ctrl+Shift+H: the dock opens on the selected lock
    pane = lw.history.pane
    qtbot.waitUntil(lambda: pane.current is not None and len(pane.current.rows) == 2)
    assert pane.target == str(lock)
    assert pane.table.rowCount() == 2
    assert pane.table.item(0, 2).text() == "acquired" and pane.table.item(1, 1).text() == "stale"
    assert "Held" in pane.figures.text() and "1 distinct holder" in pane.figures.text()
    spans = pane.timeline.spans[str(lock)]
    assert [s.state for s in spans] == ["held", "stale"]
    pane.timeline.repaint()
    assert pane.timeline.last_paint_ms > 0
    pane.step_zoom(+1)  # Last day -> Last week
    assert pane.window_s == 7 * 86400.0


def test_notify_me_when_free_tells_once(make_app: Any, lockdir: Path, qtbot: Any) -> None:
    lw = make_app([lockdir])
    lw.start(show_window=True)
    qtbot.waitUntil(lambda: lw.inventory.initial_done)
    lock = lockdir / "deploy.lock"
    sema(lock, os.getpid())
    select(lw, qtbot, lock)
    parts = lw.history
    qtbot.waitUntil(lambda: parts.act_notify.isEnabled())
    assert parts.act_notify in lw.window.build_context_menu().actions()
    parts.act_notify.trigger()
    assert parts.free.paths() == [str(lock)] and parts.act_notify.isChecked()
    with qtbot.waitSignal(parts.free.freed, timeout=10000) as got:
        lock.unlink()
    assert got.args[0] == str(lock) and "free" in got.args[1]
    assert "deploy.lock is free" in lw.window.statusBar().currentMessage()
    assert parts.free.paths() == []  # dropped after one notification


def test_an_unwritable_data_directory_shows_why_and_the_table_keeps_working(
        make_app: Any, lockdir: Path, qtbot: Any, tmp_path: Path,
        monkeypatch: Any) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the data directory should be\n")
    monkeypatch.setenv("XDG_DATA_HOME", str(blocker))
    lw = make_app([lockdir])
    monkeypatch.setenv("XDG_DATA_HOME", str(blocker))  # make_app set its own
    lw.history.recorder.recorder.path = None  # default path: under the file
    lw.start(show_window=True)
    label = lw.history.paused_label
    qtbot.waitUntil(lambda: label.isVisible(), timeout=10000)
    assert "History paused" in label.text() and str(blocker) in label.toolTip()
    lock = lockdir / "still.lock"
    sema(lock, os.getpid())
    select(lw, qtbot, lock)  # the monitor goes on
    assert blocker.read_text().startswith("a file")


@pytest.mark.slow
def test_a_week_of_a_busy_lock_draws(qtbot: Any, tmp_path: Path) -> None:
    from app.history.view import HistoryPane

    db = tmp_path / "h.sqlite3"
    store = HistoryStore(str(db))
    now = time.time()
    week = 7 * 86400.0
    obs = []
    for i in range(5000):
        t = now - week + 60 + i * (week - 120) / 5000
        obs.append(Observation("/l/busy.lock", t, ("held", "stale", "free")[i % 3],
                               pid=100 + i % 7, ident=str(i)))
    store.record(obs)
    store.close()
    pane = HistoryPane(db_path=str(db))
    qtbot.addWidget(pane)
    pane.resize(900, 400)
    pane.show()
    pane.zoom.setCurrentIndex(3)  # last week
    pane.show_path("/l/busy.lock")
    qtbot.waitUntil(lambda: pane.current is not None)
    assert pane.current is not None and len(pane.current.rows) == 5000
    assert pane.current.stats is not None and len(pane.current.stats.holders) == 7
    pane.timeline.repaint()
    assert pane.timeline.last_paint_ms > 0
    assert default_path() != str(db)


@pytest.mark.parametrize("on_stale", [False, True])
def test_notify_from_the_tray_when_the_holder_dies(make_app: Any, lockdir: Path,
                                                    qtbot: Any, on_stale: bool) -> None:
    """One notification either way: the tray's own "is stale" when asked for in Settings
    (``on_stale``), else the one the user asked for."""
    from tests.support.app_spies import SignalSpy

    lw = make_app([lockdir], tray=True, stale_after=1.0, on_stale=on_stale)
    lw.start(show_window=False)
    qtbot.waitUntil(lambda: lw.inventory.initial_done)
    tray = lw.tray
    assert tray is not None
    notes = SignalSpy(tray.notified)
    holder = subprocess.Popen(["sleep", "600"])
    try:
        lock = lockdir / "cache.lock"
        sema(lock, holder.pid)
        qtbot.waitUntil(lambda: lw.model.status_of(str(lock)) is not None)
        tray.rebuild_menu()
        sub = next(a.menu() for a in tray.menu.actions() if a.text().startswith("cache.lock"))
        entry = next(x for x in sub.actions() if x.text() == "Notify me when free")
        entry.trigger()
        assert lw.history.free.paths() == [str(lock)]
        tray.rebuild_menu()  # the entry now cancels
        sub = next(a.menu() for a in tray.menu.actions() if a.text().startswith("cache.lock"))
        assert "Don't notify when free" in [x.text() for x in sub.actions()]
        holder.kill()  # SIGKILL: the lock stays and turns stale
        holder.wait()
        qtbot.waitUntil(lambda: "cache.lock is stale" in [t for t, _, _ in notes.calls],
                        timeout=15000)
        qtbot.waitUntil(lambda: lw.history.free.paths() == [])
    finally:
        holder.kill()
        holder.wait()
    assert lw.history.free.paths() == []
    stale = [b for t, b, _ in notes.calls if t == "cache.lock is stale"]
    assert len(stale) == 1
    assert ("can be reclaimed" in stale[0]) is not on_stale  # whose notification it was


def test_the_audit_viewer_shows_an_action_in_the_timeline(make_app: Any, lockdir: Path,
                                                          qtbot: Any) -> None:
    lw = make_app([lockdir])
    lw.start(show_window=True)
    qtbot.waitUntil(lambda: lw.inventory.initial_done)
    lock = lockdir / "mine.lock"
    lw.actions.acquire(str(lock))
    select(lw, qtbot, lock)
    lw.ops.release(str(lock))
    qtbot.waitUntil(lambda: not lock.exists() and lw.ops.busy == 0)
    rec = lw.history.recorder.recorder
    assert rec is not None
    qtbot.waitUntil(lambda: rec.flush(0.1) and [r.event for r in _rows(str(lock))] == [
        "acquired", "released"], timeout=10000)
    # the engine logs an action right after making it: the recorder names the entry late
    qtbot.waitUntil(lambda: all(r.audit_id for r in _rows(str(lock))), timeout=10000)
    released = _rows(str(lock))[1]
    assert released.event == "released" and released.audit_id

    dlg = lw.ops.open_audit()
    qtbot.waitUntil(lambda: dlg.ready, timeout=15_000)  # reads every known log: slow under load
    assert dlg.to_timeline.isVisible()
    row = next(i for i, r in enumerate(dlg._rows) if r["operation"] == "release")
    dlg.table.selectRow(row)
    assert dlg.to_timeline.isEnabled()
    dlg.to_timeline.click()
    pane = lw.history.pane
    assert lw.history.dock.isVisible() and pane.target == str(lock)
    # the released lock's row leaves the table after the click (the watcher is late under
    # load): the selection empties, and the pane stays on the lock the user asked for
    lw.window.table.clearSelection()
    lw.history.follow_selection()  # what the late selectionChanged calls
    assert pane.target == str(lock)
    # the load that show_action started marks the time; an earlier load (the selection's)
    # may have applied first under load
    qtbot.waitUntil(lambda: pane.current is not None and pane.table.selectedItems() != []
                    and pane.timeline.mark is not None, timeout=15_000)
    picked = pane.table.currentRow()
    assert pane.table.item(picked, 2).text() == "released"
    assert released.audit_id.startswith(pane.table.item(picked, 7).text())
    assert pane.timeline.mark is not None


def _rows(lock: str) -> list[Any]:
    store = HistoryStore(readonly=True)
    try:
        return store.transitions(lock)
    finally:
        store.close()


def test_whole_directory_gives_the_directory_figures(qtbot: Any, tmp_path: Path) -> None:
    from app.history.view import HistoryPane

    db = tmp_path / "h.sqlite3"
    store = HistoryStore(str(db))
    now = time.time()
    store.record([Observation("/d/a.lock", now - 600, "held", holder="ci-1", pid=1, ident="1"),
                  Observation("/d/b.lock", now - 500, "held", holder="ci-2", pid=2, ident="2"),
                  Observation("/d/a.lock", now - 400, "free")])
    store.close()
    pane = HistoryPane(db_path=str(db))
    qtbot.addWidget(pane)
    pane.show_path("/d/a.lock")
    qtbot.waitUntil(lambda: pane.current is not None and pane.current.target == "/d/a.lock")
    assert pane.current is not None and pane.current.stats is not None
    assert pane.current.stats.holders == ["ci-1"]
    pane.whole_dir.setChecked(True)
    assert pane.target == "/d"
    qtbot.waitUntil(lambda: pane.current is not None and pane.current.target == "/d")
    assert pane.current.stats is not None
    assert sorted(pane.current.stats.holders) == ["ci-1", "ci-2"]
    assert sorted(pane.timeline.spans) == ["/d/a.lock", "/d/b.lock"]
    pane.show_path("redis://h:6379/0#lock:x")  # a server lock has no directory here
    assert not pane.whole_dir.isEnabled() and pane.target == "redis://h:6379/0#lock:x"
