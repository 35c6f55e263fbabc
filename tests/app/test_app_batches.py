"""The lock table under load (docs/gui.md "Window", docs/performance.md "GUI under load"): a
batch reaches the model in ranges (one ``dataChanged`` per contiguous block of rows), the proxy
re-sorts once per batch, the selection follows its lock through the re-sort, and the proxy's
order is always the sorted, filtered source (checked against a plain Python reference over
random batches); full garbage collections wait their interval."""

from __future__ import annotations

import gc
import os
import random

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from datetime import UTC, datetime, timedelta

import pytest
from PySide6.QtCore import QItemSelectionModel, Qt, QTimer

from app.bridges import watch_bridge
from app.bridges.watch_bridge import WatchBridge
from app.startup import collector
from app.startup.collector import GarbageCollector
from app.table.columns import SORT_ROLE, Col
from app.table.model import LockTableModel
from app.table.proxy import LockFilterProxy
from app.table.row_order import merged, position_of
from app.table.view import LockTable
from core.record import Liveness, LockRecord, LockStatus, State

NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=UTC)
pytestmark = pytest.mark.usefixtures("qapp")


def status(i: int, state: State = State.HELD, *, age: float | None = None,
           tag: str = "") -> LockStatus:
    path = f"/locks/l{i:04d}.lock"
    rec = LockRecord(path=path, format="sema", pid=100 + i, host="here",
                     acquired_at=NOW - timedelta(seconds=i if age is None else age),
                     tag=tag or f"job {i}", raw=f"pid={100 + i}\n")
    live = Liveness.DEAD if state is State.STALE else Liveness.ALIVE
    return LockStatus(path=path, state=state, liveness=live, record=rec, checked_at=NOW)


def make_model() -> LockTableModel:
    return LockTableModel(my_pid=1, my_host="here", clock=lambda: NOW, tick_ms=0)


def test_one_data_changed_per_contiguous_block_of_rows():
    m = make_model()
    m.apply([(s.path, s) for s in (status(i) for i in range(10))])
    signals: list[tuple[int, int, int, int]] = []
    m.dataChanged.connect(lambda tl, br, *_: signals.append(
        (tl.row(), br.row(), tl.column(), br.column())))
    # rows 2, 3, 4 and 7 change (state in some, tag in others): two blocks, two signals
    m.apply([(s.path, s) for s in (status(2, State.STALE), status(3, tag="x"),
                                   status(4, State.STALE), status(7, tag="y"))])
    assert signals == [(2, 4, Col.STATE, Col.TAG), (7, 7, Col.TAG, Col.TAG)]


def test_a_batch_re_sorts_the_proxy_once():
    m = make_model()
    proxy = LockFilterProxy()
    proxy.setSourceModel(m)
    proxy.sort(Col.AGE, Qt.SortOrder.AscendingOrder)
    m.apply([(s.path, s) for s in (status(i) for i in range(0, 200, 2))])
    events: list[str] = []
    proxy.layoutChanged.connect(lambda *_: events.append("layout"))
    proxy.rowsInserted.connect(lambda *_: events.append("insert"))
    proxy.rowsRemoved.connect(lambda *_: events.append("remove"))
    # 100 new rows between the old ones, 20 old rows re-aged (moving), 3 removed
    batch: list[tuple[str, LockStatus | None]]
    batch = [(s.path, s) for s in (status(i) for i in range(1, 200, 2))]
    batch += [(s.path, s) for s in (status(i, age=1000.0 + i) for i in range(0, 40, 2))]
    batch += [(status(i).path, None) for i in (100, 150, 198)]
    m.apply(batch)
    assert events.count("layout") == 1 and events.count("insert") == 1
    assert events.count("remove") <= 3
    keys = [proxy.data(proxy.index(r, Col.AGE), SORT_ROLE) for r in range(proxy.rowCount())]
    assert keys == sorted(keys) and proxy.rowCount() == 197
    # a batch that changes no sort key moves nothing
    events.clear()
    m.apply([(s.path, s) for s in (status(i, tag="renamed") for i in range(41, 60, 2))])
    assert "layout" not in events


def test_selection_follows_its_lock_through_a_re_sort(qtbot):
    m = make_model()
    proxy = LockFilterProxy()
    proxy.setSourceModel(m)
    table = LockTable(proxy)
    qtbot.addWidget(table)
    table.sortByColumn(int(Col.AGE), Qt.SortOrder.AscendingOrder)
    m.apply([(s.path, s) for s in (status(i) for i in range(50))])
    target = status(10).path
    row = proxy.mapFromSource(m.index(m.row_of(target) or 0, 0)).row()
    table.selectionModel().select(proxy.index(row, 0), QItemSelectionModel.SelectionFlag.Rows
                                  | QItemSelectionModel.SelectionFlag.ClearAndSelect)
    # older locks arrive and the selected one becomes the oldest: it moves to the bottom
    m.apply([(s.path, s) for s in (status(i) for i in range(50, 80))]
            + [(target, status(10, age=99999.0))])
    selected = table.selected_status()
    assert selected is not None and selected.path == target
    assert proxy.status_at(proxy.rowCount() - 1) == selected


@pytest.mark.parametrize(("paths", "most"),
                         [(120, 40), pytest.param(2000, 12, marks=pytest.mark.slow)])
def test_proxy_order_is_the_sorted_filtered_source_over_random_batches(paths, most):
    # few changes among many rows are merged into place (app.table.row_order.merged), many re-sorted
    rnd = random.Random(24)
    m = make_model()
    proxy = LockFilterProxy()
    proxy.setSourceModel(m)
    known: dict[int, LockStatus] = {}
    if paths > 1000:  # a table already full
        known = {i: status(i, age=float(rnd.randrange(500))) for i in range(paths)}
        m.apply([(s.path, s) for s in known.values()])
    settings = [(Col.AGE, Qt.SortOrder.AscendingOrder, ""),
                (Col.LOCK, Qt.SortOrder.DescendingOrder, ""),
                (Col.AGE, Qt.SortOrder.DescendingOrder, "job 1"),
                (-1, Qt.SortOrder.AscendingOrder, "")]
    for round_ in range(60):
        col, order, text = settings[round_ % len(settings)]
        if round_ % 5 == 0:
            proxy.sort(col, order)
            proxy.set_text(text)
            proxy.set_stale_only(round_ % 15 == 0)
        batch: list[tuple[str, LockStatus | None]] = []
        for _ in range(rnd.randrange(1, most)):
            i = rnd.randrange(paths)
            if i in known and rnd.random() < 0.3:
                batch.append((known.pop(i).path, None))
            else:
                st = status(i, rnd.choice([State.HELD, State.STALE]),
                            age=float(rnd.randrange(500)))
                known[i] = st
                batch.append((st.path, st))
        m.apply(batch)
        shown = [proxy.status_at(r) for r in range(proxy.rowCount())]
        expected: list[LockStatus | None]
        expected = [m.status(r) for r in range(m.rowCount()) if proxy.accepts(r)]
        if proxy.sortColumn() >= 0:
            keys = m.column_sort_keys(proxy.sortColumn())
            rows = sorted((r for r in range(m.rowCount()) if proxy.accepts(r)),
                          key=keys.__getitem__,
                          reverse=proxy.sortOrder() == Qt.SortOrder.DescendingOrder)
            expected = [m.status(r) for r in rows]
        assert shown == expected, f"round {round_}"
        for r, got in enumerate(shown):
            assert got is not None
            row = m.row_of(got.path)
            assert row is not None and proxy.mapFromSource(m.index(row, 0)).row() == r
            assert proxy.mapToSource(proxy.index(r, 0)).row() == row


def test_full_collections_wait_their_interval():
    now = [0.0]
    seen: list[int] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    threshold = gc.get_threshold()
    c = GarbageCollector(interval_ms=3_600_000, clock=lambda: now[0])  # automatic gc off
    gc.set_threshold(1, 1, 1)
    gc.callbacks.append(on_gc)
    try:
        junk: list[list[dict[str, int]]] = []
        for _ in range(12):
            junk.append([{} for _ in range(20)])
            c.collect()
        assert seen and 2 not in seen  # thresholds asked for full ones; the interval said no
        now[0] = collector.FULL_EVERY_S
        seen.clear()
        for _ in range(4):
            junk.append([{} for _ in range(20)])
            c.collect()
        assert seen.count(2) == 1
    finally:
        c.stop()
        gc.callbacks.remove(on_gc)
        gc.set_threshold(*threshold)


def test_a_burst_of_new_objects_is_frozen_not_walked():
    seen: list[int] = []

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    c = GarbageCollector(interval_ms=3_600_000)
    frozen = gc.get_freeze_count()
    gc.callbacks.append(on_gc)
    try:
        burst = [[i] for i in range(collector.BURST + 1000)]  # a scan's statuses, say
        c.collect()
        assert seen == [] and gc.get_freeze_count() >= frozen + len(burst)
    finally:
        gc.callbacks.remove(on_gc)
        c.stop()
        gc.unfreeze()


class CountingKeys:
    """The model's sort keys of a column, counting look-ups (the proxy reads them by row)."""

    def __init__(self, keys: list[str]) -> None:
        self.keys = keys
        self.looked_up = 0

    def __getitem__(self, row: int) -> str:
        self.looked_up += 1
        return self.keys[row]


def sorted_by_age(monkeypatch, order: Qt.SortOrder):
    """A model of 20,000 locks aged 0, 2, 4... s shown through a proxy sorted by age, and
    the model's age keys counting their look-ups from now on: ``(model, proxy, counted)``."""
    m = make_model()
    proxy = LockFilterProxy()
    proxy.setSourceModel(m)
    proxy.sort(Col.AGE, order)
    m.apply([(s.path, s) for s in (status(i, age=float(2 * i)) for i in range(20_000))])
    counted = CountingKeys(m.column_sort_keys(Col.AGE))
    monkeypatch.setattr(m, "column_sort_keys", lambda col: counted)
    return m, proxy, counted


def test_new_rows_are_merged_into_a_big_order_not_sorted_with_it(monkeypatch):
    # the first fill arrives in chunks: each chunk's rows are placed by binary search (a few
    # key look-ups each), not by re-sorting every row already shown (one look-up per row)
    m, proxy, counted = sorted_by_age(monkeypatch, Qt.SortOrder.DescendingOrder)
    layouts: list[int] = []
    proxy.layoutChanged.connect(lambda *_: layouts.append(1))
    # ten older-or-younger locks land between the others
    m.apply([(s.path, s) for s in (status(20_000 + k, age=float(4001 * k + 1))
                                   for k in range(10))])
    assert counted.looked_up <= 10 * 20  # ~log2(20,000) = 15 each; a re-sort: 20,010
    assert layouts == [1]
    monkeypatch.undo()
    keys = m.column_sort_keys(Col.AGE)
    shown = [proxy.source_row(r) for r in range(proxy.rowCount())]
    assert shown == sorted(range(m.rowCount()), key=keys.__getitem__, reverse=True)


def test_a_few_re_sorted_rows_move_without_re_sorting_the_rest(monkeypatch):
    # sorted by age, 10 of 20,000 locks re-aged: each is taken out and merged back in
    m, proxy, counted = sorted_by_age(monkeypatch, Qt.SortOrder.AscendingOrder)
    changed: list[tuple[int, int]] = []
    proxy.dataChanged.connect(lambda tl, br, *_: changed.append((tl.row(), br.row())))
    aged = [status(i, age=float(40_001 + 7 * i)) for i in range(0, 20_000, 2_000)]
    m.apply([(s.path, s) for s in aged])
    assert counted.looked_up <= 10 * 20  # a re-sort: 20,000
    monkeypatch.undo()
    keys = m.column_sort_keys(Col.AGE)
    shown = [proxy.source_row(r) for r in range(proxy.rowCount())]
    assert shown == sorted(range(m.rowCount()), key=keys.__getitem__)
    # now the oldest ten, at the bottom, in one block: one dataChanged
    assert [proxy.status_at(r) for r in range(19_990, 20_000)] == aged
    assert changed == [(19_990, 19_999)]


def test_inserted_rows_compute_their_cell_keys_only_when_they_change(monkeypatch):
    from app.table import columns

    computed: list[str] = []
    real = columns.cell_keys

    def counting(st: LockStatus, host: str) -> tuple[object, ...]:
        computed.append(st.path)
        return real(st, host)

    monkeypatch.setattr(columns, "cell_keys", counting)
    m = make_model()
    m.apply([(s.path, s) for s in (status(i) for i in range(1000))])
    assert computed == []  # a first fill of 100,000 rows would pay ~10 us a row for nothing
    signals: list[tuple[int, int]] = []
    m.dataChanged.connect(lambda tl, br, *_: signals.append((tl.column(), br.column())))
    m.apply([(status(5).path, status(5, tag="renamed"))])
    assert signals == [(Col.TAG, Col.TAG)]  # the row's keys as inserted, then its new ones
    m.apply([(status(6).path, status(6))])  # the same status again: nothing changed
    assert signals == [(Col.TAG, Col.TAG)]


def test_roles_no_cell_answers_never_reach_the_model(monkeypatch):
    m = make_model()
    proxy = LockFilterProxy()
    proxy.setSourceModel(m)
    m.apply([(status(1).path, status(1))])
    asked: list[int] = []
    real = LockTableModel.cell

    def cell(self: LockTableModel, r: int, c: int, role: int) -> object:
        asked.append(role)
        return real(self, r, c, role)

    monkeypatch.setattr(LockTableModel, "cell", cell)
    for role in (Qt.ItemDataRole.FontRole, Qt.ItemDataRole.BackgroundRole,
                 Qt.ItemDataRole.ForegroundRole, Qt.ItemDataRole.CheckStateRole):
        assert proxy.data(proxy.index(0, Col.LOCK), role) is None
    assert asked == []  # a painted cell asks 7 roles; 4 of them are answered here at once
    assert proxy.data(proxy.index(0, Col.LOCK)) == "l0001.lock"
    assert asked == [Qt.ItemDataRole.DisplayRole]


def test_merged_is_the_sorted_union():
    rnd = random.Random(7)
    for _ in range(200):
        n = rnd.randrange(0, 60)
        rows = rnd.sample(range(200), n + rnd.randrange(0, 8))
        keys = [f"{rnd.randrange(50):03d}\x00{r:04d}" for r in range(200)]  # unique, as paths
        old, new = rows[:n], rows[n:]
        for desc in (False, True):
            order = sorted(old, key=keys.__getitem__, reverse=desc)
            assert merged(order, new, keys.__getitem__, desc) == sorted(
                old + new, key=keys.__getitem__, reverse=desc)
        assert merged(sorted(old), new, None, False) == sorted(old + new)


def deliver(inv: WatchBridge, n: int, qtbot) -> list[list[str]]:
    """Push ``n`` updates at once into ``inv``; the chunks ``updated`` delivered, in order."""
    chunks: list[list[str]] = []
    inv.updated.connect(lambda ups: chunks.append([path for path, _st in ups]))
    inv.push((f"/locks/{i:06d}.lock", None) for i in range(n))
    qtbot.waitUntil(lambda: sum(map(len, chunks)) == n)
    return chunks


def test_a_big_batch_arrives_in_chunks_sized_to_a_time_budget(qtbot):
    now = [0.0]
    inv = WatchBridge(clock=lambda: now[0])
    cost = [20e-6]  # seconds a slot spends per update: 20 us, then 100 us
    inv.updated.connect(lambda ups: now.__setitem__(0, now[0] + cost[0] * len(ups)))
    try:
        chunks = deliver(inv, 6000, qtbot)
        sizes = [len(c) for c in chunks]
        assert sizes[0] == watch_bridge.FIRST_CHUNK
        for n in sizes[1:-1]:  # each chunk takes the budget, give or take one update
            assert abs(n * cost[0] - watch_bridge.CHUNK_BUDGET_S) <= cost[0]
        assert [p for c in chunks for p in c] == [f"/locks/{i:06d}.lock" for i in range(6000)]
        cost[0] = 100e-6  # a slower machine: smaller chunks, from the second one on
        sizes = [len(c) for c in deliver(inv, 2000, qtbot)]
        assert sizes[1:-1] and all(n in (79, 80) for n in sizes[1:-1])
    finally:
        inv.close()


def test_timers_a_chunk_starts_run_before_the_next_chunk(qtbot):
    # the view's delayed layout (a zero timer) and a paint between two chunks, never two
    # chunks back to back in one event-loop turn
    now = [0.0]
    inv = WatchBridge(clock=lambda: now[0])
    inv.updated.connect(lambda ups: now.__setitem__(0, now[0] + 80e-6 * len(ups)))  # 100/chunk
    events: list[str] = []
    timer = QTimer()
    timer.setSingleShot(True)
    timer.setInterval(0)
    timer.timeout.connect(lambda: events.append("timer"))

    def chunk(_ups: object) -> None:
        events.append("chunk")
        timer.start()

    inv.updated.connect(chunk)
    try:
        deliver(inv, 1000, qtbot)
        qtbot.waitUntil(lambda: events[-1] == "timer")
        assert len(events) >= 12 and events == ["chunk", "timer"] * (len(events) // 2)
    finally:
        inv.close()


def test_searched_texts_are_the_cells_texts():
    # the filter's one-pass row text (app.table.columns.searched_texts) says what each cell says
    from app.table.columns import SEARCHED, searched_texts, static_text
    from app.table.fleet_rows import fleet_key
    from core.codes import Code
    from core.reasons import Reason

    held = Reason.of(Code.KERNEL_LOCK_HELD, pid=4242, name="flock", kind="flock",
                     access="write", file="/locks/k")
    anchor = Reason.of(Code.KERNEL_LOCK_HELD, pid=77, name="apt-get", kind="posix",
                       access="write", file="/var/lib/dpkg/lock", tool="dpkg")
    base = status(3)
    assert base.record is not None
    no_pid = LockRecord(path=base.path, format="pidfile", pid=None, host="elsewhere",
                        acquired_at=None, tag=None, raw="")
    variants = [
        base,
        status(4, State.STALE),
        LockStatus(path="/locks/k", state=State.HELD, liveness=Liveness.ALIVE, record=None,
                   checked_at=NOW, reasons=(held,)),
        LockStatus(path="/var/lib/dpkg/lock", state=State.HELD, liveness=Liveness.ALIVE,
                   record=None, checked_at=NOW, reasons=(anchor,)),
        LockStatus(path=base.path, state=State.HELD, liveness=Liveness.UNKNOWN,
                   record=no_pid, checked_at=NOW, reasons=(held,)),
        LockStatus(path=base.path, state=State.HELD, liveness=Liveness.REMOTE, record=no_pid,
                   checked_at=NOW),
        LockStatus(path=fleet_key("build-7", "/srv/x.lock"), state=State.HELD,
                   liveness=Liveness.REMOTE, record=base.record, checked_at=NOW),
        LockStatus(path="redis://cache/lock:a", state=State.HELD, liveness=Liveness.REMOTE,
                   record=None, checked_at=NOW),
        LockStatus(path="/locks/gone", state=State.UNREADABLE, liveness=Liveness.UNKNOWN,
                   record=None, checked_at=NOW, error="permission denied"),
    ]
    for st in variants:
        for host in ("here", "elsewhere"):
            assert searched_texts(st, host) == [static_text(st, c, host) for c in SEARCHED]


def test_typing_in_the_filter_box_checks_rows_without_a_call_per_row(monkeypatch):
    m = make_model()
    proxy = LockFilterProxy()
    proxy.setSourceModel(m)
    m.apply([(s.path, s) for s in (status(i, tag=f"job {i % 7}") for i in range(2000))])
    calls: list[int] = []
    real = LockFilterProxy.accepts

    def accepts(self: LockFilterProxy, r: int) -> bool:
        calls.append(r)
        return real(self, r)

    monkeypatch.setattr(LockFilterProxy, "accepts", accepts)
    proxy.set_text("JOB 3")
    assert calls == []  # the row texts, word by word; no method call per row
    shown = sorted(proxy.source_row(r) for r in range(proxy.rowCount()))
    assert shown == [r for r in range(2000) if "job" in m.search_text(r)
                     and "3" in m.search_text(r)]  # every word somewhere in the row
    assert 286 < len(shown) < 2000
    proxy.set_stale_only(True)  # a quick filter too: row by row
    assert calls and proxy.rowCount() == 0


def test_position_of_finds_a_row_by_its_key():
    rnd = random.Random(5)
    keys = [f"{rnd.randrange(30):02d}\x00{r:04d}" for r in range(300)]
    shown = rnd.sample(range(300), 120)
    for desc in (False, True):
        order = sorted(shown, key=keys.__getitem__, reverse=desc)
        for r in range(300):
            expected = order.index(r) if r in shown else None
            assert position_of(order, r, keys.__getitem__, desc) == expected
    assert [position_of(sorted(shown), r, None, False) for r in sorted(shown)] == list(
        range(120))


def test_changes_reach_the_view_without_a_map_of_every_row(monkeypatch):
    # 100,000 rows: the map of every row's position took ~30 ms to build after each re-sort,
    # to find the rows of the batch's dataChanged signals; a binary search per row serves
    m = make_model()
    proxy = LockFilterProxy()
    proxy.setSourceModel(m)
    proxy.sort(Col.AGE, Qt.SortOrder.DescendingOrder)
    m.apply([(s.path, s) for s in (status(i, age=float(i)) for i in range(5000))])
    built: list[int] = []
    real = LockFilterProxy._positions

    def positions(self: LockFilterProxy) -> dict[int, int]:
        built.append(1)
        return real(self)

    monkeypatch.setattr(LockFilterProxy, "_positions", positions)
    changed: list[tuple[int, int]] = []
    proxy.dataChanged.connect(lambda tl, br, *_: changed.append((tl.row(), br.row())))
    m.apply([(s.path, s) for s in (status(i, age=float(i), tag="renamed")
                                   for i in range(100, 110))])  # in place: no re-sort
    assert changed == [(4890, 4899)]
    idx = proxy.mapFromSource(m.index(m.row_of(status(7).path) or 0, 0))
    assert idx.row() == 4992 and proxy.status_at(4992) == m.status_of(status(7).path)
    m.apply([(status(3).path, None)])  # a removal finds its row the same way
    assert proxy.rowCount() == 4999
    assert built == []
