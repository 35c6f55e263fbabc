"""Lock table model and proxy without a view (pytest-qt's qtmodeltester), in-place updates,
sorting by real types and filtering."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from datetime import UTC, datetime, timedelta

import pytest
from PySide6.QtCore import QModelIndex, Qt

from app.table.columns import SORT_ROLE, STATUS_ROLE, Col
from app.table.model import LockTableModel
from app.table.proxy import LockFilterProxy
from core.codes import Code
from core.reasons import Reason
from core.record import FileInfo, Liveness, LockRecord, LockStatus, State

NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
ME = 4242
pytestmark = pytest.mark.usefixtures("qapp")


GARBAGE = Reason.of(Code.UNREADABLE, kind="parse", detail="garbage")


def status(name: str, state: State = State.HELD, *, age: float = 60.0, pid: int | None = 100,
           ttl: float | None = None, tag: str | None = None, holder: str | None = None,
           host: str | None = "here", liveness: Liveness = Liveness.ALIVE,
           reasons: list[Reason] | None = None, directory: str = "/locks") -> LockStatus:
    path = f"{directory}/{name}"
    if state is State.UNREADABLE:
        return LockStatus(path=path, state=state, reasons=tuple(reasons or [GARBAGE]),
                          error="no format fits", checked_at=NOW,
                          file=FileInfo(1, 1, 3, int((NOW.timestamp() - age) * 1e9)))
    rec = LockRecord(path=path, format="sema", holder=holder, pid=pid, host=host,
                     acquired_at=NOW - timedelta(seconds=age), ttl=ttl, tag=tag,
                     raw=f"pid={pid}\n")
    return LockStatus(path=path, state=state, liveness=liveness, reasons=tuple(reasons or []),
                      record=rec, checked_at=NOW)


def make_model(**kw) -> LockTableModel:
    return LockTableModel(my_pid=ME, my_host="here", clock=lambda: NOW, tick_ms=0, **kw)


def test_qtmodeltester_and_proxy(qtmodeltester):
    m = make_model()
    m.apply([(s.path, s) for s in (
        status("a.lock"), status("b.lock", State.STALE, liveness=Liveness.DEAD),
        status("c.lock", State.UNREADABLE), status("d.lock", State.EXPIRED, ttl=10),
    )])
    qtmodeltester.check(m)
    proxy = LockFilterProxy()
    proxy.setSourceModel(m)
    proxy.sort(Col.AGE, Qt.SortOrder.AscendingOrder)
    qtmodeltester.check(proxy)
    # the testers stay attached: inserts, in-place changes, removals and ticks are verified
    m.apply([("/locks/e.lock", status("e.lock", age=5)),
              ("/locks/a.lock", status("a.lock", State.STALE, liveness=Liveness.DEAD)),
              ("/locks/b.lock", None)])
    m.tick()
    m.apply([("/locks/b.lock", status("b.lock")), ("/locks/c.lock", None)])
    proxy.set_stale_only(True)
    proxy.set_stale_only(False)
    assert [os.path.basename(s.path) for s in m.statuses()] == ["a.lock", "d.lock", "e.lock",
                                                              "b.lock"]
    m.apply([("/locks/c.lock", status("c.lock", State.UNREADABLE))])
    assert m.rowCount() == 5
    assert m.rowCount(m.index(0, 0)) == 0
    assert m.data(m.index(4, Col.STATE)) == "unreadable"


def test_updates_in_place_without_reset(qtbot):
    m = make_model()
    resets: list[int] = []
    changed: list[tuple[int, int, int]] = []
    m.modelReset.connect(lambda: resets.append(1))
    m.dataChanged.connect(lambda tl, br, *_: changed.append((tl.row(), tl.column(), br.column())))
    m.apply([("/locks/a.lock", status("a.lock")), ("/locks/b.lock", status("b.lock"))])
    assert m.rowCount() == 2 and not changed
    # the holder dies: state and liveness change, nothing else
    dead = status("b.lock", State.STALE, liveness=Liveness.DEAD,
                  reasons=[Reason.of(Code.HOLDER_DEAD, pid=100)])
    with qtbot.waitSignal(m.transitions) as blocker:
        m.apply([(dead.path, dead)])
    row = m.row_of(dead.path)
    # one signal for the row, spanning the changed cells (state, lock tooltip, liveness)
    assert changed == [(row, Col.STATE, Col.LIVENESS)]
    (old, new), = blocker.args[0]
    assert old.state is State.HELD and new is dead
    # identical status again: no signal at all
    changed.clear()
    m.apply([(dead.path, dead)])
    assert changed == []
    # removal and insertion are row operations, never resets
    removed: list[int] = []
    m.rowsRemoved.connect(lambda _p, first, _l: removed.append(first))
    m.apply([("/locks/a.lock", None), ("/locks/c.lock", status("c.lock"))])
    assert removed == [0]
    assert [os.path.basename(s.path) for s in m.statuses()] == ["b.lock", "c.lock"]
    assert m.row_of("/locks/c.lock") == 1 and m.row_of("/locks/a.lock") is None
    # a free status removes the row; a full sync removes what is missing
    m.sync([status("z.lock")])
    assert [os.path.basename(s.path) for s in m.statuses()] == ["z.lock"]
    assert resets == []


def test_tick_updates_only_age_and_expires(qtbot):
    now = [NOW]
    m = LockTableModel(my_pid=ME, my_host="here", clock=lambda: now[0], tick_ms=0)
    m.apply([(s.path, s) for s in (status("a.lock", age=50, ttl=100), status("b.lock"))])
    assert m.data(m.index(0, Col.AGE)) == "50s"
    assert m.data(m.index(0, Col.EXPIRES)) == "in 50s"
    now[0] = NOW + timedelta(seconds=70)
    with qtbot.waitSignal(m.dataChanged) as blocker:
        m.tick()
    tl, br = blocker.args[0], blocker.args[1]
    assert (tl.row(), tl.column(), br.row(), br.column()) == (0, Col.AGE, 1, Col.EXPIRES)
    assert m.data(m.index(0, Col.AGE)) == "2m 0s"
    assert m.data(m.index(0, Col.EXPIRES)) == "20s ago"
    # sort keys order like the durations and do not move with the clock
    assert m.data(m.index(0, Col.AGE), SORT_ROLE) < m.data(m.index(1, Col.AGE), SORT_ROLE)


def test_sort_ages_as_durations():
    m = make_model()
    # text order would be "1h 0m" < "2m 0s" < "9s"; duration order is 9s < 2m < 1h
    m.apply([(s.path, s) for s in (status("h.lock", age=3600), status("m.lock", age=120),
                                   status("s.lock", age=9), status("u.lock", State.UNREADABLE,
                                                                   age=30))])
    proxy = LockFilterProxy()
    proxy.setSourceModel(m)
    proxy.sort(Col.AGE, Qt.SortOrder.AscendingOrder)
    names = [proxy.data(proxy.index(r, Col.LOCK)) for r in range(proxy.rowCount())]
    assert names == ["s.lock", "u.lock", "m.lock", "h.lock"]
    proxy.sort(Col.PID, Qt.SortOrder.DescendingOrder)
    last = proxy.status_at(proxy.rowCount() - 1)
    assert last is not None and last.state is State.UNREADABLE  # no pid sorts last
    proxy.sort(Col.STATE, Qt.SortOrder.AscendingOrder)
    assert proxy.data(proxy.index(0, Col.STATE)) == "unreadable"


def test_sort_pids_numerically():
    m = make_model()
    m.apply([(s.path, s) for s in (status("a", pid=900), status("b", pid=10000),
                                   status("c", pid=85))])
    proxy = LockFilterProxy()
    proxy.setSourceModel(m)
    proxy.sort(Col.PID, Qt.SortOrder.AscendingOrder)
    assert [proxy.data(proxy.index(r, Col.PID)) for r in range(3)] == ["85", "900", "10000"]


def test_filters():
    m = make_model()
    m.apply([(s.path, s) for s in (
        status("build.lock", tag="nightly Build"),
        status("deploy.lock", State.STALE, liveness=Liveness.DEAD,
               reasons=[Reason.of(Code.HOLDER_DEAD, pid=77)]),
        status("mine.lock", pid=ME),
        status("other-host.lock", pid=ME, host="elsewhere", liveness=Liveness.REMOTE),
        status("queue.lock", State.EXPIRED, ttl=5, holder="agent-7"),
    )])
    proxy = LockFilterProxy()
    proxy.setSourceModel(m)

    def names() -> list[str]:
        out = []
        for r in range(proxy.rowCount()):
            st = proxy.status_at(r)
            assert st is not None
            out.append(os.path.basename(st.path))
        return sorted(out)

    proxy.set_text("BUILD")
    assert names() == ["build.lock"]
    proxy.set_text("agent")  # holder column
    assert names() == ["queue.lock"]
    proxy.set_text("exited")  # a reason
    assert names() == ["deploy.lock"]
    proxy.set_text("")
    proxy.set_stale_only(True)
    assert names() == ["deploy.lock", "queue.lock"]
    proxy.set_stale_only(False)
    proxy.set_held_by_me(True)
    assert names() == ["mine.lock"]
    assert proxy.active
    proxy.set_held_by_me(False)
    assert proxy.rowCount() == 5 and not proxy.active
    # dynamic filter: a row that becomes stale shows up under "stale only"
    proxy.set_stale_only(True)
    m.apply([("/locks/build.lock", status("build.lock", State.STALE))])
    assert names() == ["build.lock", "deploy.lock", "queue.lock"]


def test_roles_and_headers():
    m = make_model()
    st = status("a.lock", reasons=[Reason.of(Code.HOLDER_ALIVE, pid=100)])
    m.apply([(st.path, st)])
    idx = m.index(0, Col.STATE)
    assert m.data(idx, STATUS_ROLE) is st
    assert "PID 100 is alive" in m.data(idx, Qt.ItemDataRole.ToolTipRole)
    assert not m.data(idx, Qt.ItemDataRole.DecorationRole).isNull()
    assert m.headerData(Col.AGE, Qt.Orientation.Horizontal) == "Age"
    assert m.data(QModelIndex()) is None
    assert m.counts()[State.HELD] == 1


def test_emitting_signals_keeps_true_alive():
    """A long-running app (ticks every second) never loses references to True through
    emit() (PySide6 6.12.0 did; it is excluded in pyproject.toml, see
    tests/app/test_qt_emit_refcount.py)."""
    import sys

    m = make_model()
    m.apply([(s.path, s) for s in (status("a.lock"), status("b.lock"))])
    before = sys.getrefcount(True)
    for _ in range(200):
        m.tick()
    assert sys.getrefcount(True) >= before - 5


def test_proxy_re_emits_ticks_for_age_columns_only(qtbot):
    now = [NOW]
    m = LockTableModel(my_pid=ME, my_host="here", clock=lambda: now[0], tick_ms=0)
    m.apply([(s.path, s) for s in (status("a.lock", age=5), status("b.lock", age=500))])
    proxy = LockFilterProxy()
    proxy.setSourceModel(m)
    proxy.sort(Col.AGE, Qt.SortOrder.DescendingOrder)
    source_changes: list[int] = []
    m.dataChanged.connect(lambda *_a: source_changes.append(1))
    now[0] = NOW + timedelta(seconds=60)
    with qtbot.waitSignal(proxy.dataChanged) as blocker:
        m.tick()
    tl, br = blocker.args[0], blocker.args[1]
    assert (tl.row(), tl.column(), br.row(), br.column()) == (0, Col.AGE, 1, Col.EXPIRES)
    assert source_changes == []
    assert [proxy.data(proxy.index(r, Col.AGE)) for r in range(2)] == ["9m 20s", "1m 5s"]
