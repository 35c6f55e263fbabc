"""Dialogs: acquire a lock, confirm a reclaim or a forced release, settings, audit log.

Dialogs never run their own blocking ``exec()`` from the app's code paths: the window opens
them with ``open()`` (window-modal, non-blocking) and acts on ``accepted``, so tests drive them
by setting fields and calling ``accept()`` (issue 5 "Tests").
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.qtcompat import emit
from core.reasons import render
from core.record import WRITABLE_FORMATS, LockStatus, State

DEFAULT_PATTERNS = ["*.lock", "*.pid", "*-lock"]
STALE_DECIMALS = 3
"""Decimals of the stale limit (seconds) in Settings; an unchanged value is kept exactly."""


def _human(seconds: float) -> str:
    from core.policy import human_duration

    return human_duration(max(0.0, seconds))


def describe_holder(st: LockStatus) -> str:
    """One line naming a lock's holder for confirmations: owner/PID/host, liveness, age."""
    rec = st.record
    if rec is None:
        return f"{os.path.basename(st.path)} ({st.state.value}; no readable holder)"
    who = []
    if rec.holder:
        who.append(rec.holder)
    if rec.pid is not None:
        who.append(f"PID {rec.pid}")
    if rec.host:
        who.append(f"on {rec.host}")
    holder = " ".join(who) or "an unknown holder"
    age = ""
    if rec.acquired_at is not None:
        secs = (datetime.now(UTC) - rec.acquired_at).total_seconds()
        age = f", taken {_human(secs)} ago"
    return f"{holder} (holder is {st.liveness.value}{age}; lock is {st.state.value})"


class AcquireDialog(QDialog):
    """Acquire a lock held by the app: directory (watched ones or browse), name, format, tag,
    TTL (seconds, 0 = none). :meth:`values` returns what to pass to the engine."""

    def __init__(self, directories: list[str], parent: QWidget | None = None,
                 *, directory: str | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Acquire lock")
        self.directory = QComboBox()
        self.directory.setEditable(True)
        self.directory.addItems(directories)
        if directory:
            self.directory.setCurrentText(directory)
        self.directory.setMinimumWidth(320)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        drow = QHBoxLayout()
        drow.addWidget(self.directory, 1)
        drow.addWidget(browse)
        self.name = QLineEdit("my-task.lock")
        self.format = QComboBox()
        self.format.addItems(list(WRITABLE_FORMATS))
        self.tag = QLineEdit()
        self.tag.setPlaceholderText("what the lock protects (optional)")
        self.ttl = QDoubleSpinBox()
        self.ttl.setRange(0, 7 * 24 * 3600)
        self.ttl.setDecimals(0)
        self.ttl.setSuffix(" s")
        self.ttl.setSpecialValueText("no TTL")
        self.ttl.setToolTip("Lease length in seconds; Lockwarden refreshes it at 75% while it runs")
        self.ttl_note = QLabel()
        self.ttl_note.setWordWrap(True)
        self.ttl_note.hide()
        self.format.currentTextChanged.connect(self._format_changed)
        self.error = QLabel()
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #d23c3c;")
        self.error.hide()
        form = QFormLayout()
        form.addRow("Directory:", drow)
        form.addRow("Lock name:", self.name)
        form.addRow("Format:", self.format)
        form.addRow("Tag:", self.tag)
        form.addRow("TTL:", self.ttl)
        form.addRow("", self.ttl_note)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        ok = buttons.button(QDialogButtonBox.StandardButton.Ok)
        ok.setText("Acquire")
        self.ok = ok
        self.submit: Callable[[dict[str, Any]], None] | None = None
        """Set by the app: called with :meth:`values` on Acquire; the dialog then stays open
        until :meth:`succeeded` closes it or :meth:`failed` shows the error (fields kept)."""
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(self.error)
        lay.addWidget(buttons)

    def _browse(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Lock directory", self.directory.currentText())
        if d:
            self.directory.setCurrentText(d)

    def _format_changed(self, fmt: str) -> None:
        if fmt == "task-mcp":
            from core.formats import taskmcp

            default = taskmcp.default_ttl("local", "interactive")
            self.ttl.setSpecialValueText(f"spec default ({default:g} s)")
            self.ttl_note.setText(
                f"Task MCP locks always carry a lease: with no TTL given, the spec's default "
                f"of {_human(default)} applies (spec 004), renewed while Lockwarden runs.")
            self.ttl_note.show()
        else:
            self.ttl.setSpecialValueText("no TTL")
            self.ttl_note.hide()

    def values(self) -> dict[str, Any]:
        """``{"path", "format", "tag", "ttl"}``: path of the lock file, format name, tag or
        ``None``, TTL in seconds or ``None``."""
        ttl = float(self.ttl.value())
        return {
            "path": os.path.join(os.path.expanduser(self.directory.currentText().strip()),
                                 self.name.text().strip()),
            "format": self.format.currentText(),
            "tag": self.tag.text().strip() or None,
            "ttl": ttl if ttl > 0 else None,
        }

    def validate(self) -> str | None:
        """Problem with the fields in plain words, or ``None``."""
        name = self.name.text().strip()
        d = os.path.expanduser(self.directory.currentText().strip())
        if not d:
            return "Choose a directory."
        if not os.path.isdir(d):
            return f"{d} is not a directory."
        if not name or "/" in name or os.sep in name or name in (".", ".."):
            return "Enter a file name for the lock (no slashes)."
        return None

    def accept(self) -> None:
        """Accept only valid fields; otherwise show what is wrong and stay open. With
        :attr:`submit` set, hand the values over and wait for the outcome, open."""
        problem = self.validate()
        if problem:
            self.failed(problem)
            return
        if self.submit is None:
            super().accept()
            return
        self.error.hide()
        self.ok.setEnabled(False)
        self.ok.setText("Acquiring…")
        self.submit(self.values())

    def succeeded(self) -> None:
        """The lock was acquired: close (``accepted``)."""
        super().accept()

    def failed(self, message: str) -> None:
        """Show ``message`` in the dialog and let the user correct the fields."""
        self.error.setText(message)
        self.error.show()
        self.ok.setEnabled(True)
        self.ok.setText("Acquire")


class ConfirmDialog(QDialog):
    """Confirmation of a risky action. With ``ask_reason`` (forced release/reclaim of a lock
    whose holder may be alive) the OK button stays disabled until a reason is typed; the
    reason goes into the audit entry."""

    def __init__(self, title: str, text: str, ok_text: str, *, ask_reason: bool = False,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.label = QLabel(text)
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setMinimumWidth(420)
        lay = QVBoxLayout(self)
        lay.addWidget(self.label)
        self.reason = QLineEdit()
        self.reason.setPlaceholderText("Reason (recorded in the audit log)")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        self.ok = buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok.setText(ok_text)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        if ask_reason:
            lay.addWidget(QLabel("Reason:"))
            lay.addWidget(self.reason)
            self.ok.setEnabled(False)
            self.reason.textChanged.connect(lambda t: self.ok.setEnabled(bool(t.strip())))
        self.ask_reason = ask_reason
        lay.addWidget(buttons)

    def accept(self) -> None:
        """Refuse to accept without a reason when one is required."""
        if self.ask_reason and not self.reason.text().strip():
            return
        super().accept()


def force_dialog(st: LockStatus, *, reclaim: bool, parent: QWidget | None = None) -> ConfirmDialog:
    """Confirmation for a forced release (``reclaim=False``) or forced reclaim of ``st``."""
    name = os.path.basename(st.path)
    verb = "Force reclaim" if reclaim else "Force release"
    what = ("remove it and take it for Lockwarden" if reclaim else "delete the lock file")
    expired = ""
    if st.state is State.EXPIRED:
        expired = ("Its lease has expired, but its holder is still alive and may still be "
                   "working.\n\n")
    text = (f"{verb} {name}?\n\nHolder: {describe_holder(st)}\nPath: {st.path}\n\n"
            f"{expired}This will {what}. If the holder is still working, two programs may "
            "then run what the lock protects at the same time.")
    return ConfirmDialog(f"{verb}…", text, verb, ask_reason=True, parent=parent)


def reclaim_dialog(st: LockStatus, parent: QWidget | None = None) -> ConfirmDialog:
    """Lighter confirmation for reclaiming a stale lock (no reason needed)."""
    reasons = "\n".join(f"• {render(r)}" for r in st.reasons) or "• judged stale"
    text = (f"Reclaim {os.path.basename(st.path)}? Lockwarden will break the stale lock and "
            f"hold it.\n\nHolder: {describe_holder(st)}\n{reasons}")
    return ConfirmDialog("Reclaim lock", text, "Reclaim", parent=parent)


class SettingsDialog(QDialog):
    """Settings: watched directories (path, recursive, patterns, stale limit, polling),
    notifications, appearance, start at login. :meth:`result_config` builds the new
    :class:`core.config.Config`; the app saves and applies it without restart."""

    def __init__(self, config: Any, *, autostart: bool, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Lockwarden settings")
        self.config = config
        self._watches: list[Any] = list(config.watches)
        self._loading = False

        self.list = QListWidget()
        self.list.setMinimumWidth(260)
        add = QPushButton("Add…")
        add.clicked.connect(self._browse_add)
        remove = QPushButton("Remove")
        remove.clicked.connect(self.remove_current)
        self.path = QLineEdit()
        self.recursive = QCheckBox("Include subdirectories")
        self.patterns = QLineEdit()
        self.patterns.setToolTip("File name patterns, separated by commas")
        self.stale = QDoubleSpinBox()
        self.stale.setRange(1, 30 * 24 * 3600)
        self.stale.setDecimals(STALE_DECIMALS)
        self.stale.setSingleStep(60)
        self.stale.setSuffix(" s")
        self.stale.setToolTip("A foreign lock whose holder is not alive is stale after this "
                              "age, in seconds (3600 = 1 hour)")
        self.polling = QComboBox()
        self.polling.addItems(["auto", "on", "off"])
        self.polling.setToolTip("auto: poll network filesystems; on: always poll; off: events only")
        form = QFormLayout()
        form.addRow("Directory:", self.path)
        form.addRow("", self.recursive)
        form.addRow("Patterns:", self.patterns)
        form.addRow("Stale after:", self.stale)
        form.addRow("Polling:", self.polling)
        self.editor = QWidget()
        self.editor.setLayout(form)
        for w in (self.path, self.patterns):
            w.editingFinished.connect(self._store)
        self.recursive.toggled.connect(self._store)
        self.stale.valueChanged.connect(self._store)
        self.polling.currentIndexChanged.connect(self._store)
        self.list.currentRowChanged.connect(self._load)

        left = QVBoxLayout()
        left.addWidget(self.list, 1)
        brow = QHBoxLayout()
        brow.addWidget(add)
        brow.addWidget(remove)
        left.addLayout(brow)
        top = QHBoxLayout()
        top.addLayout(left)
        top.addWidget(self.editor, 1)
        watched = QGroupBox("Watched directories")
        watched.setLayout(top)

        n = config.notifications
        self.on_stale = QCheckBox("A lock becomes stale")
        self.on_stale.setChecked(n.on_stale)
        self.on_expired = QCheckBox("A lock expires")
        self.on_expired.setChecked(n.on_expired)
        self.on_acquire = QCheckBox("A lock is acquired")
        self.on_acquire.setChecked(n.on_acquire)
        self.on_release = QCheckBox("A lock is released")
        self.on_release.setChecked(n.on_release)
        ngrid = QVBoxLayout()
        for box in (self.on_stale, self.on_expired, self.on_acquire, self.on_release):
            ngrid.addWidget(box)
        notes = QGroupBox("Notify me when")
        notes.setLayout(ngrid)

        self.theme = QComboBox()
        self.theme.addItems(["auto", "light", "dark"])
        self.theme.setCurrentText(config.ui.theme)
        self.start_minimized = QCheckBox("Start in the tray (no window)")
        self.start_minimized.setChecked(config.ui.start_minimized)
        self.autostart = QCheckBox("Start Lockwarden when I log in")
        self.autostart.setChecked(autostart)
        gform = QFormLayout()
        gform.addRow("Theme:", self.theme)
        gform.addRow("", self.start_minimized)
        gform.addRow("", self.autostart)
        general = QGroupBox("General")
        general.setLayout(gform)

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(watched, 1)
        row = QHBoxLayout()
        row.addWidget(notes)
        row.addWidget(general)
        lay.addLayout(row)
        lay.addWidget(buttons)
        self._refresh_list()
        if self._watches:
            self.list.setCurrentRow(0)
        else:
            self.editor.setEnabled(False)

    def _refresh_list(self) -> None:
        cur = self.list.currentRow()
        self.list.blockSignals(True)
        self.list.clear()
        for w in self._watches:
            item = QListWidgetItem(w.path + ("  (recursive)" if w.recursive else ""))
            item.setToolTip(w.path)
            self.list.addItem(item)
        self.list.blockSignals(False)
        if 0 <= cur < len(self._watches):
            self.list.setCurrentRow(cur)

    def _load(self, row: int) -> None:
        if not 0 <= row < len(self._watches):
            self.editor.setEnabled(False)
            return
        w = self._watches[row]
        self._loading = True
        self.editor.setEnabled(True)
        self.path.setText(w.path)
        self.recursive.setChecked(w.recursive)
        self.patterns.setText(", ".join(w.patterns))
        self.stale.setValue(w.stale_after)
        self.polling.setCurrentText(w.polling)
        self._loading = False

    def _store(self) -> None:
        row = self.list.currentRow()
        if self._loading or not 0 <= row < len(self._watches):
            return
        pats = [p.strip() for p in self.patterns.text().split(",") if p.strip()]
        old = self._watches[row]
        stale = float(self.stale.value())
        if stale == round(old.stale_after, STALE_DECIMALS):
            stale = old.stale_after  # shown rounded, unchanged: keep the exact value
        patterns: Any = pats or list(DEFAULT_PATTERNS)
        if patterns == list(old.patterns):
            patterns = old.patterns  # unchanged: keep the very value (exact round trip)
        self._watches[row] = replace(
            old,
            path=os.path.expanduser(self.path.text().strip()) or self._watches[row].path,
            recursive=self.recursive.isChecked(),
            patterns=patterns,
            stale_after=stale,
            polling=self.polling.currentText(),
        )
        item = self.list.item(row)
        w = self._watches[row]
        item.setText(w.path + ("  (recursive)" if w.recursive else ""))

    def _browse_add(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Watch directory", os.path.expanduser("~"))
        if d:
            self.add_directory(d)

    def add_directory(self, path: str, *, recursive: bool = False) -> None:
        """Add a watched directory with default settings and select it."""
        from core.config import WatchSpec

        self._store()
        self._watches.append(WatchSpec(path=path, recursive=recursive))
        self._refresh_list()
        self.list.setCurrentRow(len(self._watches) - 1)

    def remove_current(self) -> None:
        """Remove the selected watched directory."""
        row = self.list.currentRow()
        if 0 <= row < len(self._watches):
            del self._watches[row]
            self._refresh_list()
            self.list.setCurrentRow(min(row, len(self._watches) - 1))

    @property
    def watches(self) -> list[Any]:
        """The edited list of :class:`core.config.WatchSpec`."""
        self._store()
        return list(self._watches)

    def result_config(self) -> Any:
        """The edited :class:`core.config.Config` (same ``path``; ``warnings`` cleared)."""
        c = self.config
        return replace(
            c,
            watches=self.watches,
            notifications=replace(
                c.notifications,
                on_stale=self.on_stale.isChecked(),
                on_expired=self.on_expired.isChecked(),
                on_acquire=self.on_acquire.isChecked(),
                on_release=self.on_release.isChecked(),
            ),
            ui=replace(c.ui, theme=self.theme.currentText(),
                       start_minimized=self.start_minimized.isChecked()),
            warnings=[],
        )


def _field(entry: Any, *names: str) -> Any:
    for n in names:
        if isinstance(entry, dict):
            if n in entry:
                return entry[n]
        elif hasattr(entry, n):
            return getattr(entry, n)
    return None


class AuditDialog(QDialog):
    """Audit log viewer: entries of the given logs (lock directories or log files), newest
    first, filtered by operation / lock / user, with each log's chain verification result
    (``core.audit.verify``). Logs are read in a worker thread; ``ready`` turns True and
    ``loaded(entries, lines)`` is emitted when they are in."""

    COLUMNS = ("Time (UTC)", "Operation", "Lock", "User", "Via", "Result", "Details")
    loaded = Signal(object, object)

    def __init__(self, sources: list[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Audit log")
        self.resize(980, 560)
        self.sources = sources
        self.entries: list[dict[str, Any]] = []
        self.operation = QComboBox()
        self.operation.addItem("All operations")
        self.lock_filter = QLineEdit()
        self.lock_filter.setPlaceholderText("Lock contains…")
        self.user_filter = QLineEdit()
        self.user_filter.setPlaceholderText("User contains…")
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Show:"))
        bar.addWidget(self.operation)
        bar.addWidget(self.lock_filter, 1)
        bar.addWidget(self.user_filter, 1)
        reload_ = QPushButton("Reload")
        reload_.clicked.connect(self.reload)
        bar.addWidget(reload_)
        self.table = QTableWidget(0, len(self.COLUMNS))
        self.table.setHorizontalHeaderLabels(list(self.COLUMNS))
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(22)
        self.table.setWordWrap(False)
        hh = self.table.horizontalHeader()
        hh.setStretchLastSection(True)
        hh.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.verification = QPlainTextEdit()
        self.verification.setReadOnly(True)
        self.verification.setMaximumHeight(90)
        self.verification.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        lay = QVBoxLayout(self)
        lay.addLayout(bar)
        lay.addWidget(self.table, 1)
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

    def reload(self) -> None:
        """Read and verify every source again, in a worker thread (logs may live on a network
        directory); the table fills when :attr:`loaded` is emitted."""
        self.ready = False
        self.verification.setPlainText("Reading the audit logs…")
        sources = list(self.sources)
        threading.Thread(target=lambda: self._load(sources), name="lockwarden-audit",
                         daemon=True).start()

    def _load(self, sources: list[str]) -> None:
        from core import audit

        entries: list[dict[str, Any]] = []
        lines: list[str] = []
        seen: set[str] = set()
        for src in sources:
            try:
                log = audit.log_path_for(src) if not src.endswith(".log") else src
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
            for e in got:
                row = self._as_row(e, log)
                row["sort"] = (row["sort"], len(entries))
                entries.append(row)
            try:
                v = audit.verify(log)
                if v.ok:
                    lines.append(f"✓ {log}: {v.entries} entries, chain intact")
                else:
                    lines.append(f"✗ {log}: line {v.bad_line}: {v.reason}")
            except Exception as exc:
                lines.append(f"✗ {log}: cannot verify ({exc})")
        if not lines:
            lines.append("No audit log in the watched directories yet.")
        entries.sort(key=lambda r: r["sort"], reverse=True)
        try:
            emit(self.loaded, entries, lines)
        except RuntimeError:  # the dialog was closed meanwhile
            pass

    def _loaded(self, entries: list[dict[str, Any]], lines: list[str]) -> None:
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

    @staticmethod
    def _as_row(e: Any, log: str) -> dict[str, Any]:
        ts = _field(e, "timestamp")
        if isinstance(ts, datetime):
            sort = ts.timestamp()
            text = ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")
        else:
            text = str(ts or "")
            try:
                sort = datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
                text = text.replace("T", " ")[:19]
            except ValueError:
                sort = 0.0
        details = _field(e, "details") or {}
        if isinstance(details, dict):
            parts = []
            for k in ("reason", "decision", "displaced", "holder", "error"):
                if details.get(k):
                    v = details[k]
                    if isinstance(v, dict):
                        v = v.get("holder") or (f"pid {v.get('pid')}" if v.get("pid") else "")
                    parts.append(f"{k}: {v}")
            dtext = "; ".join(parts)
        else:
            dtext = str(details)
        return {
            "sort": sort,
            "time": text,
            "operation": str(_field(e, "operation") or ""),
            "lock": str(_field(e, "lock_path", "lockPath") or ""),
            "user": str(_field(e, "user") or ""),
            "via": str(_field(e, "via") or ""),
            "result": str(_field(e, "result") or ""),
            "details": dtext,
            "log": log,
        }

    def visible_entries(self) -> list[dict[str, Any]]:
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
        self.table.setRowCount(len(rows))
        for i, r in enumerate(rows):
            vals = (r["time"], r["operation"], os.path.basename(r["lock"]) or r["lock"],
                    r["user"], r["via"], r["result"], r["details"])
            for c, v in enumerate(vals):
                item = QTableWidgetItem(v)
                if c == 2:
                    item.setToolTip(r["lock"])
                self.table.setItem(i, c, item)
        self.table.resizeColumnsToContents()
