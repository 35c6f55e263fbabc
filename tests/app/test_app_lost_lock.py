"""A lock this app holds is reported lost by one place only (app.bridges.lock_actions.LockActions),
so what
the user is told does not depend on the order in which the parts' slots were connected.

The parts are wired here by hand, in every order, and fed the same inventory updates (real
lock files, real engine, no watcher: updates are pushed the way the watcher's are)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import core
from app.bridges.config_store import ConfigStore
from app.bridges.lock_actions import LockActions, lost_verdict
from app.bridges.watch_bridge import WatchBridge
from app.table.model import LockTableModel
from app.table.proxy import LockFilterProxy
from app.tray import TrayController
from app.window import MainWindow
from core import config as cfgmod
from core.record import State
from core.verdicts.inspect import inspect as inspect_lock
from tests.support.app_spies import SignalSpy

pytestmark = pytest.mark.usefixtures("qapp")

PARTS = ("model", "actions", "tray", "window")


def run_story(order: tuple[str, ...], lockdir: Path, tmp_path: Path,
              qtbot: Any) -> dict[str, Any]:
    """Wire the parts in ``order``; then: we acquire a lock, release it ourselves, acquire it
    again, someone removes it, we acquire it again, someone replaces it. Returns what the
    user was told and what the app believes at the end."""
    model = LockTableModel(tick_ms=0)
    proxy = LockFilterProxy()
    proxy.setSourceModel(model)
    inventory = WatchBridge()
    actions = LockActions()
    config = cfgmod.Config(watches=[cfgmod.WatchSpec(path=str(lockdir))],
                           notifications=cfgmod.NotificationSettings(on_acquire=True,
                                                                     on_release=True))
    store = ConfigStore(config, str(tmp_path / "config.toml"), persist=False)
    made: dict[str, Any] = {}

    def make_tray() -> None:
        made["tray"] = TrayController(model=model, inventory=inventory, actions=actions,
                                      store=store)

    def make_window() -> None:
        from PySide6.QtCore import QSettings

        settings = QSettings(str(tmp_path / "gui-state.ini"), QSettings.Format.IniFormat)
        w = MainWindow(model=model, proxy=proxy, inventory=inventory, actions=actions,
                       store=store, settings=settings, hide_on_close=True)
        qtbot.addWidget(w)
        made["window"] = w

    connect: dict[str, Callable[[], object]] = {
        "model": lambda: inventory.updated.connect(model.apply),
        "actions": lambda: inventory.updated.connect(actions.observe),
        "tray": make_tray,
        "window": make_window,
    }
    for part in order:
        connect[part]()
    notes = SignalSpy(made["tray"].notified)
    lost = SignalSpy(actions.lost)
    released = SignalSpy(actions.released)
    status_bar = SignalSpy(made["window"].statusBar().messageChanged)
    inventory.initial_done = True  # as after the first scan: changes are events now
    path = str(lockdir / "mine.lock")

    steps: list[list[tuple[str, str, int]]] = []

    def report() -> None:
        """Deliver what the watcher would report for the path now; keep the notifications
        of this step (sorted: two raised by one batch may come in either order)."""
        st = inspect_lock(path)
        inventory.push([(path, None if st.state is State.FREE else st)])
        inventory.flush()
        seen = sum(len(step) for step in steps)
        steps.append(sorted((t, b, int(i.value)) for t, b, i in notes.calls[seen:]))

    actions.acquire(path)
    report()
    actions.release(path)
    report()
    actions.acquire(path)
    report()
    core.force_release(path, reason="test: someone else removes it")
    report()
    actions.acquire(path)
    report()
    core.force_release(path, reason="test: someone else replaces it")
    other = core.Lock(path, holder_pid=1)  # another holder (PID 1's lock, another token)
    other.acquire(blocking=False)
    try:
        report()
    finally:
        other.release()
    report()
    result = {
        "notes": steps,
        "lost": lost.calls,
        "released": released.calls,
        "status_bar": [m for (m,) in status_bar.calls if m],
        "holds": actions.holds(path),
        "held": actions.held_paths(),
    }
    made["tray"].icon.hide()
    made["tray"].menu.deleteLater()
    return result


@pytest.mark.slow
def test_lost_lock_does_not_depend_on_connection_order(lockdir: Path, tmp_path: Path,
                                                       qtbot: Any) -> None:
    outcomes = {order: run_story(order, lockdir, tmp_path, qtbot)
                for order in itertools.permutations(PARTS)}
    first = outcomes[PARTS]
    for order, outcome in outcomes.items():
        assert outcome == first, order
    path = str(lockdir / "mine.lock")
    # removed, then replaced: each reported once, as "Lost", never as "released"
    assert first["lost"] == [(path, False), (path, True)]
    titles = [[t for t, _, _ in step] for step in first["notes"]]
    assert titles == [["mine.lock acquired"], ["mine.lock released"], ["mine.lock acquired"],
                      ["Lost mine.lock"], ["mine.lock acquired"],
                      ["Lost mine.lock", "mine.lock acquired"],  # replaced: the new holder
                      ["mine.lock released"]], titles  # the other holder's release
    assert first["released"] == [(path,)]  # only our own release
    assert [m for m in first["status_bar"] if m.startswith("Lost")] == [
        "Lost mine.lock: Someone removed this lock while Lockwarden held it.",
        "Lost mine.lock: Someone else replaced this lock while Lockwarden held it."]
    assert first["holds"] is False and first["held"] == []


def test_lost_verdict_follows_the_engine(lockdir: Path) -> None:
    path = str(lockdir / "x.lock")
    lock = core.Lock(path)
    lock.acquire(blocking=False)
    mine = inspect_lock(path)
    assert lost_verdict(lock, mine) is None  # the file names our token: still ours
    assert lost_verdict(lock, None) is False  # gone: removed
    core.force_release(path, reason="test")
    assert lost_verdict(lock, inspect_lock(path)) is False  # free: removed
    other = core.Lock(path, holder_pid=1)
    other.acquire(blocking=False)
    try:
        assert lost_verdict(lock, inspect_lock(path)) is True  # another token: replaced
    finally:
        other.release()
    # the engine found it lost (a release that met a successor): lost whatever the file says
    with pytest.raises(core.LockLost):
        lock.release()
    assert not lock.is_held and lock.lost.is_set()
    assert lost_verdict(lock, mine) is not None  # even a file naming its old token
