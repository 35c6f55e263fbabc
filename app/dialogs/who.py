""""What's using this?" (docs/gui.md, "What's using this?"): pick or drop a file or folder and see,
live, every process that has it open, mapped, locked, or as its working directory
(:func:`core.kernel.usage.who_uses`, on a worker thread); End process (SIGTERM, then SIGKILL
only after a second confirmation, :func:`core.engine.end_user.end_user`), Open folder, Copy
command line. Opened from the window's File menu, the tray, ``lockwarden-gui --who PATH`` and
the file managers' context menus (:mod:`app.startup.file_managers`)."""

from __future__ import annotations

import os
import shlex
import threading
from datetime import datetime

from PySide6.QtCore import QObject, Qt, QTimer, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QDragEnterEvent, QDropEvent, QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.dialogs.confirm import ConfirmDialog
from core.kernel.usage import Usage, UsageReport, who_uses
from core.text import printable

REFRESH_MS = 2000
"""Milliseconds between two scans while the window is shown (the list is live)."""

HEADERS = ("PID", "Process", "User", "How", "Since", "Command")


class _Results(QObject):
    """Carries a scan's result from the worker thread into the GUI thread (a QObject that
    lives in the GUI thread: its signal is delivered there)."""

    done = Signal(object, str)  # UsageReport | None, error text


class WhoDialog(QDialog):
    """The window. ``path`` (optional) is scanned at once. :attr:`scanned` is emitted after
    each scan is shown."""

    scanned = Signal()

    def __init__(self, path: str | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("What's using this?")
        self.setAcceptDrops(True)
        self.resize(900, 420)
        self.report: UsageReport | None = None
        self.scans = 0  # finished scans (tests wait on it)
        self._busy = False
        self._pending: tuple[int, float, bool] | None = None  # (pid, start, kill) to confirm
        self._results = _Results()
        self._results.done.connect(self._show)

        self.path = QLineEdit(path or "")
        self.path.setPlaceholderText("A file or folder (or drop one here)")
        self.path.setAccessibleName("File or folder")
        self.path.returnPressed.connect(self.scan)
        pick_file = QPushButton("Choose &file…")
        pick_file.clicked.connect(lambda: self._pick(folder=False))
        pick_dir = QPushButton("Choose f&older…")
        pick_dir.clicked.connect(lambda: self._pick(folder=True))
        top = QHBoxLayout()
        top.addWidget(self.path, 1)
        top.addWidget(pick_file)
        top.addWidget(pick_dir)

        self.table = QTableWidget(0, len(HEADERS))
        self.table.setHorizontalHeaderLabels(HEADERS)
        self.table.setAccessibleName("Processes using it")
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.table.itemSelectionChanged.connect(self._enable)

        self.note = QLabel("Choose a file or folder.")
        self.note.setWordWrap(True)
        self.note.setTextFormat(Qt.TextFormat.PlainText)
        self.end_button = QPushButton("&End process…")
        self.end_button.clicked.connect(lambda: self.ask_end(kill=False))
        self.open_button = QPushButton("Open f&older")
        self.open_button.clicked.connect(self.open_folder)
        self.copy_button = QPushButton("&Copy command line")
        self.copy_button.clicked.connect(self.copy_command)
        close = QPushButton("Close")
        close.clicked.connect(self.reject)
        buttons = QHBoxLayout()
        for b in (self.end_button, self.open_button, self.copy_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        buttons.addWidget(close)

        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(self.table, 1)
        lay.addWidget(self.note)
        lay.addLayout(buttons)

        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self.scan)
        self._enable()
        if path:
            self.scan()

    # -- scanning ---------------------------------------------------------------------------

    def scan(self) -> None:
        """Scan the path now on a worker thread (skipped while a scan runs)."""
        path = self.path.text().strip()
        if not path or self._busy:
            return
        self._busy = True
        self.timer.start()

        def work() -> None:
            try:
                report, error = who_uses([os.path.expanduser(path)]), ""
            except OSError as exc:
                report, error = None, f"{path}: {exc.strerror or exc}"
            self._results.done.emit(report, error)

        threading.Thread(target=work, name="lockwarden-who", daemon=True).start()

    def _show(self, report: UsageReport | None, error: str) -> None:
        self._busy = False
        self.scans += 1
        self.report = report
        selected = self.selected()
        self.table.setRowCount(0)
        if report is None:
            self.note.setText(error)
            self._enable()
            self.scanned.emit()
            return
        uses = sorted(report.uses.values(), key=lambda u: u.pid)
        for u in uses:
            row = self.table.rowCount()
            self.table.insertRow(row)
            since = (datetime.fromtimestamp(u.started).strftime("%Y-%m-%d %H:%M:%S")
                     if u.started is not None else "?")
            cells = (str(u.pid), u.name, u.user or "?", ", ".join(u.how), since,
                     " ".join(u.cmdline) or u.name)
            for col, text in enumerate(cells):
                item = QTableWidgetItem(printable(text))
                item.setData(Qt.ItemDataRole.UserRole, u.pid)
                item.setToolTip(printable("\n".join(u.files)))
                self.table.setItem(row, col, item)
            if selected is not None and u.pid == selected.pid:
                self.table.selectRow(row)
        target = report.targets[0].real
        one = len(uses) == 1
        words = [f"Nothing uses {target}." if not uses else
                 f"{len(uses)} process{'' if one else 'es'} use{'s' if one else ''} {target}."]
        if report.uninspected:
            n = len(report.uninspected)
            users = sorted({u or "?" for u in report.uninspected.values()})
            words.append(f"{n} process{'' if n == 1 else 'es'} of other users "
                         f"({', '.join(users[:5])}) could not be inspected.")
        self.note.setText(printable(" ".join(words)))
        self._enable()
        self.scanned.emit()

    # -- selection and actions -------------------------------------------------------------

    def selected(self) -> Usage | None:
        """The process of the selected row, or None."""
        rows = self.table.selectionModel().selectedRows()
        if not rows or self.report is None:
            return None
        item = self.table.item(rows[0].row(), 0)
        return None if item is None else self.report.uses.get(
            int(item.data(Qt.ItemDataRole.UserRole)))

    def _enable(self) -> None:
        use = self.selected()
        for b in (self.end_button, self.copy_button):
            b.setEnabled(use is not None)
        self.open_button.setEnabled(bool(self.path.text().strip()))

    def ask_end(self, *, kill: bool) -> ConfirmDialog | None:
        """Ask to end the selected process (``kill``: with SIGKILL, the second confirmation);
        the dialog is returned (opened, not executed) so that tests can accept it."""
        use = self.selected()
        if use is None or use.started is None:
            return None
        how = "Kill (SIGKILL)" if kill else "End (SIGTERM)"
        text = (f"{how} PID {use.pid} ({use.name}, user {use.user or '?'}), which uses "
                f"{self.path.text().strip()} ({', '.join(use.how)})?\n\n"
                + ("It did not exit when asked to. Unsaved work in it is lost."
                   if kill else "It is asked to exit and may save its work first."))
        dialog = ConfirmDialog("Kill process" if kill else "End process", printable(text),
                               "Kill" if kill else "End process", parent=self)
        pid, start = use.pid, use.started
        dialog.accepted.connect(lambda: self._end(pid, start, kill))
        dialog.open()
        return dialog

    def _end(self, pid: int, start: float, kill: bool) -> None:
        from core.engine.end_user import TERM_GRACE, NotUsing, end_user, wait_for_exit

        path = os.path.expanduser(self.path.text().strip())
        try:
            end_user(path, pid, start, kill=kill, reason="What's using this? (the app)")
        except (NotUsing, OSError) as exc:
            self.note.setText(printable(f"Not ended: {exc}"))
            self.scan()
            return
        if not kill and not wait_for_exit(pid, start, TERM_GRACE):
            self.note.setText(f"PID {pid} did not exit within {TERM_GRACE:g} s.")
            self.ask_end(kill=True)
            return
        self.scan()

    def open_folder(self) -> None:
        """Open the folder (of the file) in the file manager."""
        path = os.path.expanduser(self.path.text().strip())
        folder = path if os.path.isdir(path) else os.path.dirname(path)
        QDesktopServices.openUrl(QUrl.fromLocalFile(folder))

    def copy_command(self) -> None:
        """Copy the selected process's command line, shell-quoted."""
        use = self.selected()
        if use is not None:
            QGuiApplication.clipboard().setText(shlex.join(use.cmdline) or use.name)

    def _pick(self, *, folder: bool) -> None:
        start = os.path.dirname(self.path.text().strip()) or os.path.expanduser("~")
        chosen = (QFileDialog.getExistingDirectory(self, "Choose a folder", start) if folder
                  else QFileDialog.getOpenFileName(self, "Choose a file", start)[0])
        if chosen:
            self.set_path(chosen)

    def set_path(self, path: str) -> None:
        """Show what uses ``path`` (a scan starts at once)."""
        self.path.setText(path)
        self.scan()

    # -- drops and lifetime -----------------------------------------------------------------

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if event.mimeData().hasUrls():
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        urls = [u for u in event.mimeData().urls() if u.isLocalFile()]
        if urls:
            self.set_path(urls[0].toLocalFile())
            event.acceptProposedAction()

    def done(self, result: int) -> None:
        """Stop scanning when the window closes."""
        self.timer.stop()
        super().done(result)
