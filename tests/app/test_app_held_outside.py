"""Changing the watched directories while the app holds a lock (docs/gui.md "Watched
directories and the locks the app holds"): the lock stays held, listed and releasable; only the
engine decides that a lock is lost."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QMessageBox

from app.bridges.watch_bridge import WatchBridge
from core.record import State
from tests.support.app_spies import SignalSpy


def test_leaving_the_watch_list_keeps_held_locks(make_app: Callable[..., Any],
                                                  tmp_path: Path, qtbot: Any) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    lw = make_app([a])
    lw.start(show_window=True)
    qtbot.waitUntil(lambda: lw.inventory.initial_done, timeout=10_000)
    lost = SignalSpy(lw.actions.lost)
    path = str(a / "mine.lock")
    lw.actions.acquire(path, ttl=30.0)
    qtbot.waitUntil(lambda: lw.model.status_of(path) is not None, timeout=10_000)
    assert lw.window.select_path(path)
    assert lw.window.act_release.isEnabled()

    cfg = lw.config
    from dataclasses import replace

    from core.config import WatchSpec

    lw.ops.apply_settings(replace(cfg, watches=[WatchSpec(path=str(b))]))
    # the watcher drops directory a; the app keeps its lock listed
    qtbot.waitUntil(lambda: [d.path for d in lw.inventory.dirs] == [str(b)], timeout=10_000)
    # the kept lock is checked by the engine (not by the watcher): its update arrives
    with qtbot.waitSignal(lw.inventory.updated, timeout=10_000,
                          check_params_cb=lambda ups: any(p == path for p, _ in ups)):
        lw.inventory.check_kept()
    lw.inventory.flush()
    assert lost.calls == []
    assert lw.actions.holds(path)
    st = lw.model.status_of(path)
    assert st is not None and st.state is State.HELD and lw.model.is_mine(st)
    assert lw.window.select_path(path)
    assert lw.window.act_release.isEnabled()
    assert "outside the watched directories" in lw.window.detail.values["State"].text()

    # someone removes it outside the watched directories: the engine says it is gone
    os.unlink(path)
    lw.inventory.check_kept()
    qtbot.waitUntil(lambda: bool(lost.calls), timeout=10_000)
    assert lost.calls == [(path, False)]
    assert lw.model.status_of(path) is None


def test_quit_asks_release_all_or_keep(make_app: Callable[..., Any], lockdir: Path) -> None:
    lw = make_app([lockdir])
    lw.start(show_window=True)
    p1, p2 = str(lockdir / "one.lock"), str(lockdir / "two.lock")
    lw.actions.acquire(p1)
    lw.actions.acquire(p2)
    box = lw.request_quit()
    assert isinstance(box, QMessageBox)
    assert "2 locks" in box.text() and "lock(s)" not in box.text()
    texts = [b.text() for b in box.buttons()]
    assert "Release all" in texts and "Keep" in texts
    next(b for b in box.buttons() if b.text() == "Release all").click()
    assert not os.path.exists(p1) and not os.path.exists(p2)


def test_removed_report_of_a_kept_path_is_checked_by_the_engine(
        qtbot: Any, lockdir: Path) -> None:
    """The watcher's "removed" for a path the app holds is re-inspected, not believed."""
    from core.engine.lock import Lock
    from core.watch.watcher import ChangeSet

    inv = WatchBridge()
    path = str(lockdir / "kept.lock")
    lock = Lock(path)
    lock.acquire(blocking=False)
    try:
        inv.kept = lambda: [path]
        spy = SignalSpy(inv.updated)
        from core.verdicts.inspect import inspect

        st = inspect(path)
        inv.push_changeset(ChangeSet(added=[], changed=[], removed=[st]))
        inv.flush()
        assert spy.calls and dict(spy.calls[-1][0])[path] is not None
    finally:
        lock.release()
