"""The audit log viewer (docs/gui.md "Dialogs"): entries of this user's own log and of the logs
of every directory ever watched (docs/audit.md, "The viewer's logs"), newest first, filtered by
operation / lock / user, with each log's chain verification."""

from __future__ import annotations

import json
import os
import threading
from typing import TypedDict

from PySide6.QtCore import Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.table.lockinfo import local_time, utc_time
from core import audit
from core.audit import AuditEntry
from core.text import plural, printable

DETAIL_KEYS = ("reason", "decision", "displaced", "holder", "kept", "error")
"""Keys of an entry's ``details`` shown in the Details column, in this order."""


class AuditRow(TypedDict):
    """One entry as the viewer shows it. ``sort``: (Unix time in s, 0.0 when unknown; read
    order), ``time``: local time (:func:`app.table.lockinfo.local_time`), ``utc``: the same in UTC
    (its tooltip), ``log``: the log file it came from."""

    sort: tuple[float, int]
    time: str
    utc: str
    operation: str
    lock: str
    user: str
    via: str
    result: str
    details: str
    log: str
    entry: str
    digest: str


def _details_text(details: dict[str, object]) -> str:
    """One line: :data:`DETAIL_KEYS` first, then every other key of a foreign tool's entry; a
    holder object as its holder name or PID; empty values left out (never "None")."""
    parts = []
    for k in [*DETAIL_KEYS, *sorted(k for k in details if k not in DETAIL_KEYS)]:
        v = details.get(k)
        if v is None or v == "" or v == {} or v == []:
            continue
        if isinstance(v, dict) and k == "kept":
            v = f"{v.get('method')} {v.get('path') or ''}".strip()
        elif isinstance(v, dict):
            v = v.get("holder") or (f"pid {v.get('pid')}" if v.get("pid") else "…")
        parts.append(f"{k}: {v}")
    return printable("; ".join(parts))


def _entry_text(e: AuditEntry) -> str:
    """The whole entry for the Entry pane: its JSON object indented (the raw line when it is
    not JSON), escaped."""
    try:
        return printable_lines(json.dumps(json.loads(e.raw), indent=2, ensure_ascii=False))
    except ValueError:
        return printable(e.raw)


def printable_lines(text: str) -> str:
    """``text`` with every line escaped (:func:`core.text.printable`), line breaks kept."""
    return "\n".join(printable(line) for line in text.split("\n"))


def as_row(e: AuditEntry, log: str, seq: int) -> AuditRow:
    """The viewer's row for entry ``e`` of ``log``, the ``seq``-th read."""
    ts = e.timestamp
    return AuditRow(
        sort=(ts.timestamp() if ts is not None else 0.0, seq),
        time=local_time(ts) if ts is not None else "",
        utc=utc_time(ts) if ts is not None else "",
        operation=e.operation or "",
        lock=e.lock_path or "",
        user=e.user or "",
        via=e.via or "",
        result=e.result or "",
        details=_details_text(e.details),
        log=log,
        entry=_entry_text(e),
        digest=e.digest,
    )


def read_logs(sources: list[str]) -> tuple[list[AuditRow], list[str]]:
    """Entries of every log named by ``sources`` (lock directories or log files), newest
    first, and one verification line per log (``core.audit.verify``). Blocks on file I/O;
    never raises (a log that cannot be read or verified gets a line saying why)."""
    entries: list[AuditRow] = []
    lines: list[str] = []
    seen: set[str] = set()
    for src in sources:
        try:
            log = audit.resolve_log_path(src)  # a directory, a log file or a lock path
        except Exception:
            log = src
        if log in seen or not os.path.exists(log):
            continue
        seen.add(log)
        try:
            got = audit.read(log)
        except Exception as exc:
            lines.append(f"✗ {log}: cannot read ({exc})")
            continue
        base = len(entries)
        entries.extend(as_row(e, log, base + i) for i, e in enumerate(got))
        lines.append(_verification(log))
    if not lines:
        lines.append("No audit log yet: neither yours nor one in a watched directory.")
    entries.sort(key=lambda r: r["sort"], reverse=True)
    return entries, lines


def _verification(log: str) -> str:
    try:
        v = audit.verify(log)
    except Exception as exc:
        return f"✗ {log}: cannot verify ({exc})"
    if v.ok:
        return f"✓ {log}: {plural(v.entries, 'entry', 'entries')}, chain intact"
    return f"✗ {log}: line {v.bad_line}: {v.reason}"


class AuditDialog(QDialog):
    """Audit log viewer over ``sources`` (lock directories or log files). Logs are read in a
    worker thread (:func:`read_logs`); ``loaded(list[AuditRow], list[str])`` brings them to the
    GUI thread, after which :attr:`ready` is True."""

    COLUMNS = ("Time", "Operation", "Lock", "User", "Via", "Result", "Details")
    loaded = Signal(object, object)
    timelineRequested = Signal(str, str, float)
    """"Show in timeline": the selected entry's lock, digest and time (Unix s); the app's
    History pane shows the transition it caused (docs/gui.md "History")."""

    def __init__(self, sources: list[str], parent: QWidget | None = None, *,
                 lock: str | None = None) -> None:
        """``sources``: the logs to read (:func:`read_logs`); ``lock``: show only this lock's
        entries, by full path."""
        super().__init__(parent)
        self.setWindowTitle("Audit log" if lock is None
                            else f"Audit entries of {printable(os.path.basename(lock))}")
        self.resize(980, 560)
        self.sources = sources
        self.entries: list[AuditRow] = []
        self._rows: list[AuditRow] = []  # what the table shows, in its order
        self.operation = QComboBox()
        self.operation.addItem("All operations")
        self.lock_filter = QLineEdit()
        self.lock_filter.setPlaceholderText("Lock contains…")
        self.user_filter = QLineEdit()
        self.user_filter.setPlaceholderText("User contains…")
        if lock is not None:
            self.lock_filter.setText(lock)
        self.table = self._table()
        self.table.setAccessibleName("Audit entries")
        self.entry = QPlainTextEdit()
        self.entry.setReadOnly(True)
        self.entry.setAccessibleName("Selected entry")
        self.entry.setPlaceholderText("Select an entry to see all of it (selectable, copyable)")
        self.entry.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.entry.setMaximumHeight(120)
        self.table.itemSelectionChanged.connect(self._show_entry)
        self.verification = QPlainTextEdit()
        self.verification.setReadOnly(True)
        self.verification.setMaximumHeight(70)
        self.verification.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        lay = QVBoxLayout(self)
        lay.addLayout(self._filter_bar())
        lay.addWidget(self.table, 3)
        lay.addWidget(QLabel("Entry:"))
        lay.addWidget(self.entry)
        lay.addWidget(QLabel("Chain verification:"))
        lay.addWidget(self.verification)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        close.rejected.connect(self.reject)
        lay.addWidget(close)
        self.ready = False
        self.loaded.connect(self._loaded)
        self.operation.currentIndexChanged.connect(self._fill)
        self.lock_filter.textChanged.connect(self._fill)
        self.user_filter.textChanged.connect(self._fill)
        self.reload()

    def _filter_bar(self) -> QHBoxLayout:
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Show:"))
        bar.addWidget(self.operation)
        bar.addWidget(self.lock_filter, 1)
        bar.addWidget(self.user_filter, 1)
        reload_ = QPushButton("Reload")
        reload_.clicked.connect(self.reload)
        bar.addWidget(reload_)
        self.to_timeline = QPushButton("Show in timeline")
        self.to_timeline.setToolTip("The History pane at the change this entry made")
        self.to_timeline.setEnabled(False)
        self.to_timeline.setVisible(False)  # shown by whoever handles timelineRequested
        self.to_timeline.clicked.connect(self._timeline_clicked)
        bar.addWidget(self.to_timeline)
        return bar

    def _timeline_clicked(self) -> None:
        row = self.table.currentRow()
        if self.table.selectionModel().hasSelection() and 0 <= row < len(self._rows):
            r = self._rows[row]
            if r["lock"] and r["digest"]:
                self.timelineRequested.emit(r["lock"], r["digest"], r["sort"][0])

    def _table(self) -> QTableWidget:
        table = QTableWidget(0, len(self.COLUMNS))
        table.setHorizontalHeaderLabels(list(self.COLUMNS))
        table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        table.verticalHeader().hide()
        table.verticalHeader().setDefaultSectionSize(22)
        table.setWordWrap(False)
        hh = table.horizontalHeader()
        hh.setStretchLastSection(True)
        hh.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        return table

    def reload(self) -> None:
        """Read and verify every source again, in a worker thread (logs may live on a network
        directory); the table fills when :attr:`loaded` is emitted."""
        self.ready = False
        self.verification.setPlainText("Reading the audit logs…")
        sources = list(self.sources)
        threading.Thread(target=lambda: self._load(sources), name="lockwarden-audit",
                         daemon=True).start()

    def _load(self, sources: list[str]) -> None:
        entries, lines = read_logs(sources)
        try:
            self.loaded.emit(entries, lines)
        except RuntimeError:  # the dialog was closed meanwhile
            pass

    def _loaded(self, entries: list[AuditRow], lines: list[str]) -> None:
        self.entries = entries
        self.verification.setPlainText("\n".join(lines))
        ops = sorted({r["operation"] for r in entries if r["operation"]})
        cur = self.operation.currentText()
        self.operation.blockSignals(True)
        self.operation.clear()
        self.operation.addItem("All operations")
        self.operation.addItems(ops)
        if cur in ops:
            self.operation.setCurrentText(cur)
        self.operation.blockSignals(False)
        self._fill()
        self.ready = True

    def visible_entries(self) -> list[AuditRow]:
        """Entries passing the filters, newest first."""
        op = self.operation.currentText() if self.operation.currentIndex() > 0 else ""
        lock = self.lock_filter.text().strip().lower()
        user = self.user_filter.text().strip().lower()
        return [r for r in self.entries
                if (not op or r["operation"] == op)
                and (not lock or lock in r["lock"].lower())
                and (not user or user in r["user"].lower())]

    def _fill(self) -> None:
        rows = self.visible_entries()
        self._rows = rows
        self.table.setRowCount(len(rows))
        for i, r in enumerate(rows):
            vals = (r["time"], r["operation"], os.path.basename(r["lock"]) or r["lock"],
                    r["user"], r["via"], r["result"], r["details"])
            for c, v in enumerate(vals):
                item = QTableWidgetItem(printable(v))
                if c == 0:
                    item.setToolTip(r["utc"])
                elif c == 2:
                    item.setToolTip(printable(r["lock"]))
                elif c == len(vals) - 1:
                    item.setToolTip(r["entry"])
                self.table.setItem(i, c, item)
        self.table.resizeColumnsToContents()
        self._show_entry()

    def _show_entry(self) -> None:
        """The selected entry, whole, in the Entry pane."""
        row = self.table.currentRow()
        rows = self._rows
        selected = self.table.selectionModel().hasSelection()
        self.entry.setPlainText(rows[row]["entry"] if selected and 0 <= row < len(rows) else "")
        self.to_timeline.setEnabled(selected and 0 <= row < len(rows) and bool(rows[row]["lock"]))
