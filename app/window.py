"""The main window: lock table with filter box and quick filters, detail pane, toolbar,
context menu, shortcuts and status bar (issue 5 "Main window").

The window only presents; the operations live in :class:`app.application.LockwardenApp`
(shared with the tray menu), which calls the engine through :mod:`app.actions`.
"""

from __future__ import annotations

import html
import os
import threading
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import (
    QByteArray,
    QItemSelection,
    QModelIndex,
    QPoint,
    QSettings,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QAction, QCloseEvent, QFontDatabase, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QFormLayout,
    QFrame,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMenu,
    QPlainTextEdit,
    QScrollArea,
    QSplitter,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableView,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from app.icons import app_icon
from app.model import STATUS_ROLE, Col, current_reasons, human_duration, not_a_lock_file
from app.qtcompat import emit
from core.record import LockStatus, State

if TYPE_CHECKING:
    from app.application import LockwardenApp

DEFAULT_WIDTHS = {Col.STATE: 100, Col.LOCK: 150, Col.DIRECTORY: 190, Col.FORMAT: 76,
                  Col.HOLDER: 140, Col.PID: 60, Col.LIVENESS: 72, Col.AGE: 76,
                  Col.EXPIRES: 100, Col.TAG: 100}


RAW_LIMIT = 64 * 1024
"""At most this many bytes of an unreadable lock file are shown (bytes, 64 KiB)."""


def escaped_text(data: bytes) -> str:
    """``data`` as text for the raw pane: UTF-8 where it decodes, other bytes as ``\\xNN``,
    control characters other than newline and tab as ``\\xNN`` too."""
    text = data.decode("utf-8", errors="backslashreplace")
    return "".join(c if c in "\n\t" or (ord(c) >= 32 and ord(c) != 127)
                   else f"\\x{ord(c):02x}" for c in text)


class DetailPane(QWidget):
    """Parsed fields, the verdict's reasons in plain words and the raw file (monospace).

    For an unreadable lock the raw file is read in a worker thread with
    :func:`core.fsutil.read_lock_file` (symlinks, FIFOs, devices and directories are never
    opened; at most :data:`RAW_LIMIT` bytes) and shown escaped; ``rawLoaded(path, text,
    placeholder)`` brings it back to the GUI thread."""

    rawLoaded = Signal(str, str, str)

    FIELDS = ("Path", "State", "Format", "Holder", "PID", "Host", "Liveness", "Acquired",
              "Expires", "TTL", "Tag", "Token")

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.values: dict[str, QLabel] = {}
        form = QFormLayout()
        form.setRowWrapPolicy(QFormLayout.RowWrapPolicy.DontWrapRows)
        form.setVerticalSpacing(3)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        for name in self.FIELDS:
            lab = QLabel()
            lab.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            lab.setWordWrap(True)
            self.values[name] = lab
            form.addRow(name + ":", lab)
        self.reasons = QLabel()
        self.reasons.setWordWrap(True)
        self.reasons.setTextFormat(Qt.TextFormat.RichText)
        self.reasons.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.raw = QPlainTextEdit()
        self.raw.setReadOnly(True)
        self.raw.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.raw.setPlaceholderText("(file content)")
        self.raw.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        fields = QWidget()
        ll = QVBoxLayout(fields)
        ll.setContentsMargins(0, 0, 6, 0)
        ll.addLayout(form)
        ll.addStretch(1)
        left = QScrollArea()
        left.setWidget(fields)
        left.setWidgetResizable(True)
        left.setFrameShape(QFrame.Shape.NoFrame)
        right = QWidget()
        rl = QVBoxLayout(right)
        rl.setContentsMargins(0, 0, 0, 0)
        title = QLabel("<b>Why</b>")
        rl.addWidget(title)
        rl.addWidget(self.reasons)
        rl.addWidget(QLabel("<b>Raw file</b>"))
        rl.addWidget(self.raw, 1)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(left)
        split.addWidget(right)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        split.setSizes([470, 600])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.addWidget(split)
        self.status: LockStatus | None = None
        self.rawLoaded.connect(self._raw_loaded)
        self.show_status(None)

    def show_status(self, st: LockStatus | None, *, age: str = "", mine: bool = False,
                    now: datetime | None = None) -> None:
        """Show ``st`` (``None`` clears the pane). ``age`` is the formatted age text; ``now``
        (aware UTC, default the clock) the moment the reasons are worded for."""
        self.status = st
        self.raw.setPlaceholderText("(file content)")
        for lab in self.values.values():
            lab.setText("")
        if st is None:
            self.reasons.setText("Select a lock to see who holds it and why it is in its state.")
            self.raw.setPlainText("")
            return
        rec = st.record
        v = self.values
        v["Path"].setText(st.path)
        state = st.state.value + (" — held by this Lockwarden" if mine else "")
        if st.read_only:
            state += " (read-only: managed by its ledger)"
        v["State"].setText(state)
        if rec is not None:
            v["Format"].setText(rec.format)
            v["Holder"].setText(rec.holder or "")
            v["PID"].setText("" if rec.pid is None else str(rec.pid))
            v["Host"].setText(rec.host or "")
            v["Liveness"].setText(st.liveness.value)
            self._set_acquired(age)
            exp = rec.effective_expiry()
            v["Expires"].setText(exp.strftime("%Y-%m-%d %H:%M:%S UTC") if exp else "never")
            v["TTL"].setText("" if rec.ttl is None else f"{rec.ttl:g} s")
            v["Tag"].setText(rec.tag or "")
            v["Token"].setText(rec.token or "")
        self._set_reasons(now)
        self.raw.setPlainText(rec.raw if rec is not None else "")
        if rec is None and st.state is State.UNREADABLE:
            self.raw.setPlaceholderText("(reading…)")
            self._load_raw(st.path)

    def _load_raw(self, path: str) -> None:
        def work() -> None:
            from core.errors import UnreadableError
            from core.fsutil import read_lock_file

            text, placeholder = "", ""
            try:
                data, _info = read_lock_file(path, RAW_LIMIT)
                text = escaped_text(data)
                if not text:
                    placeholder = "(empty file)"
            except UnreadableError as exc:
                placeholder = f"(not shown: {exc.reason})"
            except OSError as exc:
                placeholder = f"(not shown: {exc.strerror or exc})"
            try:
                emit(self.rawLoaded, path, text, placeholder)
            except RuntimeError:  # the pane is gone
                pass

        threading.Thread(target=work, name="lockwarden-raw", daemon=True).start()

    def _raw_loaded(self, path: str, text: str, placeholder: str) -> None:
        st = self.status
        if st is None or st.path != path or st.record is not None:
            return  # the selection moved on meanwhile
        self.raw.setPlaceholderText(placeholder or "(file content)")
        self.raw.setPlainText(text)


    def _set_acquired(self, age: str) -> None:
        st = self.status
        rec = st.record if st is not None else None
        if rec is None or rec.acquired_at is None:
            return
        self.values["Acquired"].setText(rec.acquired_at.strftime("%Y-%m-%d %H:%M:%S UTC")
                                        + (f" ({age} ago)" if age else ""))

    def _set_reasons(self, now: datetime | None) -> None:
        st = self.status
        if st is None:
            return
        reasons = current_reasons(st, now)
        if st.error and st.error not in reasons:
            reasons.append(st.error)
        if not reasons:
            reasons = ["(no reasons given)"]
        text = "<ul style='margin-left:-20px'>" + "".join(
            f"<li>{html.escape(r)}</li>" for r in reasons) + "</ul>"
        if text != self.reasons.text():
            self.reasons.setText(text)

    def tick(self, *, age: str, now: datetime) -> None:
        """Re-word the time-dependent texts ("Acquired … (3m ago)", "held for 3m 12s",
        "expired 5s ago") for ``now`` without touching the rest (the raw file keeps its
        scroll position and selection)."""
        if self.status is None:
            return
        self._set_acquired(age)
        self._set_reasons(now)


class LockTable(QTableView):
    """The lock table. Qt's single-selection view selects a neighbour when the selected row
    is removed; here the selection is cleared instead and :attr:`selected_removed` is called
    with the removed lock's path (a lock must never be swapped under the user's cursor)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.selected_removed: Callable[[str], None] | None = None

    def rowsAboutToBeRemoved(self, parent: Any, start: int, end: int) -> None:
        """Qt hook: clear the selection first when it is among the removed rows."""
        sm = self.selectionModel()
        rows = sm.selectedRows() if sm is not None else []
        if rows and start <= rows[0].row() <= end and not parent.isValid():
            value = rows[0].data(STATUS_ROLE)
            sm.clear()
            if isinstance(value, LockStatus) and self.selected_removed is not None:
                self.selected_removed(value.path)
        super().rowsAboutToBeRemoved(parent, start, end)


class ElideMiddleDelegate(QStyledItemDelegate):
    """Elides a cell's text in the middle ("/home/…/build/a"): for directories, whose
    distinguishing part is often at the end (issue 5 "Main window")."""

    def initStyleOption(self, option: QStyleOptionViewItem, index: Any) -> None:
        """Qt hook: the default options, with middle elision."""
        super().initStyleOption(option, index)
        option.textElideMode = Qt.TextElideMode.ElideMiddle


class MainWindow(QMainWindow):
    """Lock table, filter box, quick filters, detail pane, actions, status bar."""

    def __init__(self, ctx: LockwardenApp, settings: QSettings) -> None:
        super().__init__()
        self.ctx = ctx
        self.settings = settings
        self.setWindowTitle("Lockwarden")
        self.setWindowIcon(app_icon())
        self.resize(1100, 680)

        self.table = LockTable()
        self.table.selected_removed = self._selected_removed
        self.table.setModel(ctx.proxy)
        self.table.setSortingEnabled(True)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        self.table.setShowGrid(False)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(24)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._context_menu)
        hh = self.table.horizontalHeader()
        hh.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        hh.setStretchLastSection(True)
        hh.setSortIndicatorShown(True)
        for col, w in DEFAULT_WIDTHS.items():
            self.table.setColumnWidth(int(col), w)
        self._elide_middle = ElideMiddleDelegate(self.table)
        self.table.setItemDelegateForColumn(int(Col.DIRECTORY), self._elide_middle)
        self.table.sortByColumn(int(Col.STATE), Qt.SortOrder.AscendingOrder)
        self.table.selectionModel().selectionChanged.connect(self._selection_changed)
        ctx.proxy.dataChanged.connect(self._proxy_data_changed)
        ctx.model.ticked.connect(self._tick_detail)
        ctx.proxy.rowsInserted.connect(self._update_empty)
        ctx.proxy.rowsInserted.connect(self._select_first)
        self._auto_selected = False
        ctx.proxy.rowsRemoved.connect(self._update_empty)
        ctx.proxy.layoutChanged.connect(self._update_empty)

        self.empty = QLabel(self.table.viewport())
        self.empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.empty.setWordWrap(True)
        self.empty.setEnabled(False)

        self.detail = DetailPane()
        self.table.doubleClicked.connect(lambda _i: self.detail.raw.setFocus())
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(self.detail)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        self.splitter = split

        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter (Ctrl+F): lock, holder, PID, tag…")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self._filter_changed)
        self.stale_only = QCheckBox("Stale only")
        self.stale_only.setToolTip("Show only stale and expired locks")
        self.stale_only.toggled.connect(self._quick_filters)
        self.held_by_me = QCheckBox("Held by me")
        self.held_by_me.setToolTip("Show only locks this Lockwarden holds")
        self.held_by_me.toggled.connect(self._quick_filters)

        self._make_actions()
        tb = QToolBar("Actions")
        tb.setObjectName("actions")
        tb.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        tb.setMovable(False)
        for a in (self.act_acquire, self.act_release, self.act_reclaim, self.act_force,
                  None, self.act_open_folder, self.act_copy, None, self.act_rescan,
                  self.act_audit, self.act_settings):
            if a is None:
                tb.addSeparator()
            else:
                tb.addAction(a)
        self.addToolBar(tb)
        fbar = QToolBar("Filter")
        fbar.setObjectName("filter")
        fbar.setMovable(False)
        self.filter.setMinimumWidth(240)
        self.filter.setMaximumWidth(520)
        fbar.addWidget(self.filter)
        fbar.addSeparator()
        fbar.addWidget(self.stale_only)
        fbar.addWidget(self.held_by_me)
        self.addToolBarBreak()
        self.addToolBar(fbar)

        central = QWidget()
        lay = QVBoxLayout(central)
        lay.setContentsMargins(4, 0, 4, 0)
        lay.addWidget(split)
        self.setCentralWidget(central)

        self.dirs_label = QLabel()
        self.counts_label = QLabel()
        self.statusBar().addWidget(self.dirs_label, 1)
        self.statusBar().addPermanentWidget(self.counts_label)

        self._status_timer = QTimer(self)
        self._status_timer.setSingleShot(True)
        self._status_timer.setInterval(200)
        self._status_timer.timeout.connect(self.update_status)
        ctx.model.countsChanged.connect(self._status_timer.start)
        ctx.inventory.dirsChanged.connect(lambda _d: self.update_status())
        ctx.actions.heldChanged.connect(self._update_actions)
        self.restore_state()
        self.update_status()
        self._update_actions()
        self._update_empty()

    # -- actions ------------------------------------------------------------------------------

    def _action(self, text: str, slot: Any, shortcut: Any = None, tip: str = "") -> QAction:
        a = QAction(text, self)
        if shortcut is not None:
            a.setShortcut(QKeySequence(shortcut))
            a.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        a.setToolTip(tip or text)
        a.triggered.connect(slot)
        self.addAction(a)
        return a

    def _make_actions(self) -> None:
        c = self.ctx
        self.act_acquire = self._action("Acquire…", lambda: c.open_acquire(None),
                                        QKeySequence.StandardKey.New,
                                        "Acquire a lock held by Lockwarden (Ctrl+N)")
        self.act_release = self._action("Release", lambda: self._with_current(c.release),
                                        None, "Release a lock this Lockwarden holds (Del)")
        # Del is its own action, enabled whenever a row is selected: on a lock this app does
        # not hold it explains why nothing happens instead of doing nothing silently
        self.act_release_key = self._action("Release (Del)", self.release_key,
                                            QKeySequence.StandardKey.Delete)
        self.act_reclaim = self._action("Reclaim", lambda: self._with_current(c.open_reclaim),
                                        QKeySequence("Ctrl+R"),
                                        "Break a stale lock and take it (Ctrl+R)")
        self.act_force = self._action("Force release…",
                                      lambda: self._with_current(c.open_force_release),
                                      QKeySequence("Ctrl+Shift+Del"),
                                      "Delete the lock file whoever holds it (Ctrl+Shift+Del)")
        self.act_open_folder = self._action("Open folder",
                                            lambda: self._with_current(c.open_folder))
        self.act_copy = self._action("Copy path", lambda: self._with_current(c.copy_path),
                                     QKeySequence("Ctrl+Shift+C"))
        self.act_rescan = self._action("Rescan", c.rescan, QKeySequence.StandardKey.Refresh,
                                       "Scan the watched directories again (F5)")
        if QKeySequence(QKeySequence.StandardKey.Refresh).isEmpty() or \
                QKeySequence("F5") not in self.act_rescan.shortcuts():
            self.act_rescan.setShortcuts([QKeySequence("F5"),
                                          *self.act_rescan.shortcuts()])
        self.act_settings = self._action("Settings…", c.open_settings,
                                         QKeySequence("Ctrl+,"), "Settings (Ctrl+,)")
        prefs = QKeySequence(QKeySequence.StandardKey.Preferences)
        if not prefs.isEmpty() and prefs != QKeySequence("Ctrl+,"):
            self.act_settings.setShortcuts([QKeySequence("Ctrl+,"), prefs])
        self.act_audit = self._action("Audit log", c.open_audit, QKeySequence("Ctrl+L"))
        self.act_find = self._action("Find", self.focus_filter, QKeySequence.StandardKey.Find)
        self.act_close = self._action("Close window", self.close, QKeySequence.StandardKey.Close)
        self.act_quit = self._action("Quit", c.request_quit, QKeySequence.StandardKey.Quit)

    def release_key(self) -> None:
        """Del: release the selected lock when this Lockwarden holds it; otherwise say in the
        status bar why not and what to use instead."""
        st = self.current_status()
        if st is None:
            return
        if self.ctx.actions.holds(st.path):
            self.ctx.release(st.path)
            return
        self.statusBar().showMessage(
            f"{os.path.basename(st.path)} is not held by this Lockwarden, so Del does not "
            "release it; use Force release… (Ctrl+Shift+Del) to delete it anyway.", 10000)

    def focus_filter(self) -> None:
        """Focus the filter box and select its text (Ctrl+F)."""
        self.filter.setFocus(Qt.FocusReason.ShortcutFocusReason)
        self.filter.selectAll()

    def current_status(self) -> LockStatus | None:
        """Status of the selected row, or ``None`` (the current index alone does not count:
        Qt moves it to a neighbour when the selected row disappears)."""
        rows = self.table.selectionModel().selectedRows()
        if not rows:
            return None
        return self.ctx.proxy.status_at(rows[0].row())

    def _selected_removed(self, path: str) -> None:
        """The selected lock left the list (released, removed or filtered out): say so in
        the detail pane; nothing else is selected in its place."""
        self.detail.show_status(None)
        self._update_actions()
        # the source model may be removing the row right now: decide why once it is done
        QTimer.singleShot(0, lambda: self._say_gone(path))

    def _say_gone(self, path: str) -> None:
        if self.detail.status is not None:  # the user selected another lock meanwhile
            return
        why = ("it is hidden by the filter" if self.ctx.model.row_of(path) is not None
               else "it was released or removed")
        self.detail.reasons.setText(
            f"{html.escape(os.path.basename(path))} is no longer in the list: {why}.")

    def select_path(self, path: str) -> bool:
        """Select the row of ``path``; False when it is not visible."""
        row = self.ctx.model.row_of(path)
        if row is None:
            return False
        pidx = self.ctx.proxy.mapFromSource(self.ctx.model.index(row, 0))
        if not pidx.isValid():
            return False
        self.table.selectRow(pidx.row())
        self.table.scrollTo(pidx)
        return True

    def _with_current(self, fn: Any) -> None:
        st = self.current_status()
        if st is not None:
            fn(st.path)

    def _update_actions(self) -> None:
        st = self.current_status()
        has = st is not None
        writable = has and st is not None and not st.read_only and not not_a_lock_file(st)
        self.act_release.setEnabled(bool(has and st and self.ctx.actions.holds(st.path)))
        self.act_release_key.setEnabled(has)
        self.act_reclaim.setEnabled(bool(writable and st and st.state is not State.WRITING))
        self.act_force.setEnabled(bool(writable))
        self.act_open_folder.setEnabled(has)
        self.act_copy.setEnabled(has)
        if st is not None and st.state is State.STALE:
            self.act_reclaim.setText("Reclaim")
        elif st is not None:
            self.act_reclaim.setText("Reclaim…")

    def _context_menu(self, pos: QPoint) -> None:
        idx = self.table.indexAt(pos)
        if idx.isValid():
            self.table.selectRow(idx.row())
        menu = self.build_context_menu()
        menu.popup(self.table.viewport().mapToGlobal(pos))

    def build_context_menu(self) -> QMenu:
        """The table's context menu for the current selection."""
        menu = QMenu(self)
        for a in (self.act_release, self.act_reclaim, self.act_force, None,
                  self.act_open_folder, self.act_copy, None, self.act_acquire, self.act_rescan):
            if a is None:
                menu.addSeparator()
            else:
                menu.addAction(a)
        return menu

    # -- filters, selection, detail -----------------------------------------------------------

    def _filter_changed(self, text: str) -> None:
        self.ctx.proxy.set_text(text)
        self._update_empty()

    def _quick_filters(self) -> None:
        self.ctx.proxy.set_stale_only(self.stale_only.isChecked())
        self.ctx.proxy.set_held_by_me(self.held_by_me.isChecked())
        self._update_empty()

    def _selection_changed(self, _sel: QItemSelection, _desel: QItemSelection) -> None:
        self.refresh_detail()
        self._update_actions()

    def _proxy_data_changed(self, top: QModelIndex, bottom: QModelIndex, *_a: Any) -> None:
        st = self.detail.status
        if st is None:
            return
        idx = self.table.selectionModel().currentIndex()
        only_time = top.column() >= Col.AGE and bottom.column() <= Col.EXPIRES
        if idx.isValid() and top.row() <= idx.row() <= bottom.row() and not only_time:
            self.refresh_detail()
            self._update_actions()

    def refresh_detail(self) -> None:
        """Show the selected lock in the detail pane."""
        st = self.current_status()
        if st is None:
            self.detail.show_status(None)
            return
        m = self.ctx.model
        age = m.age_seconds(st)
        self.detail.show_status(st, age=human_duration(age) if age is not None else "",
                                mine=m.is_mine(st), now=m.now)

    def _tick_detail(self) -> None:
        """Each second: the selected lock's time-dependent texts follow the clock."""
        st = self.detail.status
        if st is None:
            return
        m = self.ctx.model
        age = m.age_seconds(st)
        self.detail.tick(age=human_duration(age) if age is not None else "", now=m.now)

    def _select_first(self, *_a: Any) -> None:
        """Select the first row once, when the first locks arrive, so that the detail pane
        explains something from the start."""
        if self._auto_selected or self.current_status() is not None:
            return
        self._auto_selected = True
        self.table.selectRow(0)

    def _update_empty(self, *_a: Any) -> None:
        n = self.ctx.proxy.rowCount()
        if n:
            self.empty.hide()
            return
        if self.ctx.proxy.active and self.ctx.model.rowCount():
            text = "No lock matches the filter."
        else:
            dirs = len(self.ctx.config.watches)
            text = (f"No locks in the {dirs} watched "
                    f"{'directory' if dirs == 1 else 'directories'}.\n"
                    "Acquire one with Ctrl+N, or add directories in Settings.")
        self.empty.setText(text)
        self.empty.resize(self.table.viewport().size())
        self.empty.show()
        if self.current_status() is None:
            self.detail.show_status(None)

    def resizeEvent(self, event: Any) -> None:
        """Keep the empty-table hint centred."""
        super().resizeEvent(event)
        self.empty.resize(self.table.viewport().size())

    # -- status bar ---------------------------------------------------------------------------

    def update_status(self) -> None:
        """Watched directories with their observer mode; counts per state."""
        dirs = self.ctx.inventory.dirs
        if dirs:
            parts = []
            for d in dirs:
                mode = getattr(d, "mode", "?")
                parts.append(f"{d.path} ({mode})")
            tip = "\n".join(f"{d.path}: {getattr(d, 'mode', '?')}"
                            + (f" — {d.message}" if getattr(d, "message", "") else "")
                            for d in dirs)
            self.dirs_label.setText("Watching " + ", ".join(parts))
            self.dirs_label.setToolTip(tip)
        else:
            n = len(self.ctx.config.watches)
            self.dirs_label.setText("Not watching any directory" if n == 0
                                    else f"Starting to watch {n} directories…")
        counts = self.ctx.model.counts()
        order = (State.HELD, State.STALE, State.EXPIRED, State.WRITING, State.UNREADABLE)
        text = "  ".join(f"{counts[s]} {s.value}" for s in order if counts[s])
        self.counts_label.setText(text or "no locks")
        self._update_empty()

    # -- persistence --------------------------------------------------------------------------

    def restore_state(self) -> None:
        """Window geometry, splitter, column widths and sort order from QSettings."""
        s = self.settings
        geo = s.value("window/geometry")
        if isinstance(geo, QByteArray | bytes):
            self.restoreGeometry(QByteArray(geo))
        split = s.value("window/splitter")
        if isinstance(split, QByteArray | bytes):
            self.splitter.restoreState(QByteArray(split))
        else:
            self.splitter.setSizes([420, 260])
        header = s.value("window/header")
        if isinstance(header, QByteArray | bytes):
            self.table.horizontalHeader().restoreState(QByteArray(header))
            hh = self.table.horizontalHeader()
            self.ctx.proxy.sort(hh.sortIndicatorSection(), hh.sortIndicatorOrder())

    def save_state(self) -> None:
        """Store geometry, splitter, column widths and sort order in QSettings."""
        s = self.settings
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/splitter", self.splitter.saveState())
        s.setValue("window/header", self.table.horizontalHeader().saveState())
        s.sync()

    def closeEvent(self, event: QCloseEvent) -> None:
        """With a tray the window only hides; without one closing it quits the app."""
        if self.ctx.quitting:  # finish_quit saved the state already
            event.accept()
            return
        self.save_state()
        if self.ctx.tray is not None and not self.ctx.quitting:
            event.ignore()
            self.hide()
            return
        if not self.ctx.quitting:
            event.ignore()
            self.ctx.request_quit()
            return
        event.accept()
