"""The History pane (docs/gui.md "History"): for the selected lock, or every lock of a
directory, the timeline (:class:`app.history.timeline.TimelineWidget`), the contention figures
(:func:`core.history.spans.stats_of`) and the table of transitions, over a window from the
last hour to the last month.

The store is read on a worker thread (:meth:`HistoryPane.reload`); the result comes back to
the GUI thread through :attr:`HistoryPane.loaded`. A history that cannot be read shows why.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.history.timeline import TimelineWidget
from core.history.model import HistoryUnavailable, Transition, iso
from core.history.spans import Span, Stats, holder_label, spans_of, stats_of
from core.text import human_duration, printable

ZOOMS: tuple[tuple[str, float], ...] = (
    ("Last hour", 3600.0), ("Last 6 hours", 6 * 3600.0), ("Last day", 86400.0),
    ("Last week", 7 * 86400.0), ("Last month", 30 * 86400.0))
"""The timeline's windows (label, seconds)."""

COLUMNS = ("Time (UTC)", "State", "Event", "Holder", "Process", "Tag", "Reasons", "Audit entry")

TABLE_LIMIT = 5000
"""Most transitions listed in the table (the newest); the timeline and figures use all."""


@dataclass
class Loaded:
    """What one read of the store gave (built on the worker thread)."""

    target: str
    since: float
    until: float
    rows: list[Transition] = field(default_factory=list)
    spans: dict[str, list[Span]] = field(default_factory=dict)
    stats: Stats | None = None
    error: str | None = None


def load(target: str, since: float, until: float, db_path: str | None = None, *,
         directory: bool | None = None) -> Loaded:
    """Read ``target``'s history (a lock path or URL, or a directory: every lock under it)
    in ``[since, until)`` (Unix s); ``directory``: whether ``target`` is one (default: ask
    the file system). Never raises: a store that cannot be read gives ``error``."""
    from core.history.store import HistoryStore, default_path

    out = Loaded(target, since, until)
    path = db_path or default_path()
    if not os.path.exists(path):
        out.error = ("Nothing recorded yet: history is recorded while Lockwarden (or "
                     "`lockwarden watch`) runs.")
        return out
    if directory is None:
        directory = os.path.isdir(target)
    lock, under = (None, target) if directory else (target, None)
    try:
        store = HistoryStore(path, readonly=True)
        try:
            out.rows = store.transitions(lock, under=under, since=since, until=until)
            before = store.before(lock, under=under, at=since)
        finally:
            store.close()
    except HistoryUnavailable as exc:
        out.error = f"History unavailable: {exc.reason}"
        return out
    from core.verdicts.liveness import hostname

    here = hostname()  # the recorder's host: a row without one is this host's
    out.spans = spans_of(out.rows, since, until, before, here)
    out.stats = stats_of(out.rows, since, until, before, here)
    return out


def stats_text(st: Stats) -> str:
    """The contention figures in one short paragraph."""
    longest = (f"{human_duration(st.longest_hold_s)} by {st.longest_hold[1] or 'unnamed'}"
               if st.longest_hold else "—")
    return (f"Held {human_duration(st.held_s)} · longest hold {longest} · "
            f"{len(st.holders)} distinct holder(s) · stale {human_duration(st.stale_s)} · "
            f"expired {human_duration(st.expired_s)} · reclaimed {st.reclaimed}× · "
            f"released {st.released}× (forced {st.force_released}×) · "
            f"{st.transitions} transition(s)")


PREFERRED_HEIGHT = 210
"""Pixels the History pane asks for when its dock opens (docs/gui.md "Docks")."""


class HistoryPane(QWidget):
    """Timeline, figures and transitions of one lock or directory.

    Signals:
        loaded(Loaded): a read finished (emitted from the worker thread, delivered queued).
    """

    loaded = Signal(object)

    def __init__(self, parent: QWidget | None = None, *, db_path: str | None = None) -> None:
        super().__init__(parent)
        self.db_path = db_path
        self.target: str | None = None
        """What is shown: the selected lock, or its directory (:attr:`whole_dir`)."""
        self.selected: str | None = None
        self.target_is_dir = False
        self.focus: tuple[str, float] | None = None
        """An audit entry's digest and time (Unix s) to select once loaded (:meth:`show_action`)."""
        self._marked: tuple[str, float] | None = None
        """The lock whose history shows a marked time (Unix s): kept over reloads of that lock
        (the watcher's next update reloads it), dropped when another lock is shown."""
        self._gen = 0
        self.current: Loaded | None = None
        self.title = QLabel("Select a lock to see its history.")
        self.title.setAccessibleName("History of")
        self.zoom = QComboBox()
        self.zoom.setAccessibleName("Time window")
        self.zoom.setToolTip("How far back to look (Ctrl++ / Ctrl+- to zoom)")
        for label, seconds in ZOOMS:
            self.zoom.addItem(label, seconds)
        self.zoom.setCurrentIndex(2)
        self.zoom.currentIndexChanged.connect(lambda _i: self.reload())
        self.timeline = TimelineWidget()
        self.figures = QLabel()
        self.figures.setWordWrap(True)
        self.figures.setAccessibleName("Contention figures")
        self.figures.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setAccessibleName("Transitions")
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setStretchLastSection(True)
        # the header and a row at least (it scrolls): the pane is a tab under the lock table,
        # which keeps its rows (docs/gui.md "Docks")
        self.table.setMinimumHeight(self.table.horizontalHeader().sizeHint().height()
                                    + self.table.verticalHeader().defaultSectionSize()
                                    + 2 * self.table.frameWidth())
        top = QHBoxLayout()
        self.whole_dir = QCheckBox("Whole directory")
        self.whole_dir.setToolTip("Every lock in the selected lock's directory: contention "
                                  "figures for the directory")
        self.whole_dir.toggled.connect(lambda _on: self._retarget())
        top.addWidget(self.title, 1)
        top.addWidget(self.whole_dir)
        top.addWidget(self.zoom)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(self.timeline)
        lay.addWidget(self.figures)
        lay.addWidget(self.table, 1)
        self.loaded.connect(self._apply)
        for keys, step in (("Ctrl++", -1), ("Ctrl+=", -1), ("Ctrl+-", 1)):
            sc = QShortcut(QKeySequence(keys), self)
            sc.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            sc.activated.connect(lambda s=step: self.step_zoom(s))

    def sizeHint(self) -> QSize:
        """Qt hook: the height the dock asks for first, :data:`PREFERRED_HEIGHT` (Qt's own
        hint, the transitions table's, took the table and detail pane's room at the default
        window size; the pane can be dragged taller)."""
        return QSize(super().sizeHint().width(), PREFERRED_HEIGHT)

    @property
    def window_s(self) -> float:
        """The chosen window, seconds."""
        return float(self.zoom.currentData())

    def step_zoom(self, step: int) -> None:
        """Zoom in (``-1``: a shorter window) or out (``+1``)."""
        self.zoom.setCurrentIndex(max(0, min(len(ZOOMS) - 1, self.zoom.currentIndex() + step)))

    def show_path(self, path: str | None) -> None:
        """Show ``path``'s history (a lock, a server URL or a directory; with
        :attr:`whole_dir` checked, a lock's directory); ``None`` clears."""
        self.selected = path
        self._retarget()

    def _retarget(self) -> None:
        path = self.selected
        local = path is not None and "://" not in path
        is_dir = path is not None and local and os.path.isdir(path)
        self.whole_dir.setEnabled(local and not is_dir)
        if path is not None and local and self.whole_dir.isChecked() and not is_dir:
            path, is_dir = os.path.dirname(path), True
        if path == self.target:
            return
        self.target, self.target_is_dir = path, is_dir
        self.reload()

    def show_action(self, lock: str, digest: str, t: float) -> None:
        """Show ``lock``'s history over the shortest window holding ``t`` (Unix s) and select
        the transition that the audit entry ``digest`` caused (the audit viewer's "Show in
        timeline"); the timeline marks ``t``."""
        ago = time.time() - t
        index = next((i for i, (_l, s) in enumerate(ZOOMS) if s > ago), len(ZOOMS) - 1)
        self.focus = (digest, t)
        self.selected = self.target = lock
        self.target_is_dir = False
        self.whole_dir.setChecked(False)
        self.zoom.blockSignals(True)
        self.zoom.setCurrentIndex(index)
        self.zoom.blockSignals(False)
        self.reload()

    def reload(self) -> None:
        """Read the store again for the current target and window (worker thread)."""
        self._gen += 1
        gen, target = self._gen, self.target
        if target is None:
            self.title.setText("Select a lock to see its history.")
            self.table.setRowCount(0)
            self.figures.clear()
            self.timeline.set_data({}, [], time.time() - self.window_s, time.time())
            return
        until = time.time()
        since = until - self.window_s
        self.title.setText(printable(f"History of {target}"))
        db, directory = self.db_path, self.target_is_dir

        def work() -> None:
            result = load(target, since, until, db, directory=directory)
            if gen == self._gen:
                self.loaded.emit(result)

        threading.Thread(target=work, name="lockwarden-history-read", daemon=True).start()

    def _apply(self, result: Loaded) -> None:
        if result.target != self.target:
            return
        self.current = result
        self.timeline.set_data(result.spans, result.rows, result.since, result.until)
        if result.error:
            self.figures.setText(result.error)
        elif result.stats is not None:
            self.figures.setText(stats_text(result.stats))
        rows = result.rows[-TABLE_LIMIT:]
        self.table.setRowCount(len(rows))
        many = len(result.spans) > 1 or self.target_is_dir
        for i, t in enumerate(rows):
            who = holder_label(t)
            if many:
                who = f"{os.path.basename(t.lock)}: {who}" if who else os.path.basename(t.lock)
            cells = (iso(t.t).replace("T", " ").removesuffix("Z"), t.state, t.event, who,
                     t.process or "", t.tag or "", ", ".join(t.reasons),
                     (t.audit_id or "")[:12])
            for col, text in enumerate(cells):
                item = QTableWidgetItem(printable(text))
                if col == 7 and t.audit_id:
                    item.setToolTip(f"Audit entry {t.audit_id} (the SHA-256 of its line)")
                self.table.setItem(i, col, item)
        self.table.resizeColumnsToContents()
        focus, self.focus = self.focus, None
        if focus is not None:
            self._marked = (result.target, focus[1])
        elif self._marked is not None and self._marked[0] != result.target:
            self._marked = None
        self.timeline.mark = self._marked[1] if self._marked is not None else None
        hit = next((i for i, t in enumerate(rows) if focus and t.audit_id == focus[0]), None)
        if hit is not None:
            self.table.selectRow(hit)
            first = self.table.item(hit, 0)
            if first is not None:
                self.table.scrollToItem(first)
        elif rows:
            self.table.scrollToBottom()
