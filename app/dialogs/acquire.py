"""The Acquire dialog (docs/gui.md "Dialogs"): directory, name, format, tag, TTL of a lock the
app's process will hold."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLayout,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.dialogs.duration import DurationSpinBox
from core.formats.taskmcp import default_ttl
from core.record import WRITABLE_FORMATS
from core.text import human_duration, printable_lines


@dataclass(frozen=True)
class AcquireRequest:
    """What the Acquire dialog asks the engine for: ``path`` of the lock file, ``format``
    name, ``tag`` or ``None``, ``ttl`` in seconds or ``None``."""

    path: str
    format: str
    tag: str | None
    ttl: float | None


class AcquireDialog(QDialog):
    """Acquire a lock held by the app: directory (watched ones or browse), name, format, tag,
    TTL (seconds, 0 = none). :meth:`values` returns what to pass to the engine.

    With :attr:`submit` set (the app does), Acquire hands the values over and the dialog stays
    open until :meth:`succeeded` closes it or :meth:`failed` shows the error (fields kept)."""

    def __init__(self, directories: list[str], parent: QWidget | None = None,
                 *, directory: str | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Acquire lock")
        self.submit: Callable[[AcquireRequest], None] | None = None
        self.directory = QComboBox()
        self.directory.setEditable(True)
        self.directory.addItems(directories)
        if directory:
            self.directory.setCurrentText(directory)
        self.directory.setMinimumWidth(320)
        self.name = QLineEdit("my-task.lock")
        self.format = QComboBox()
        self.format.addItems(list(WRITABLE_FORMATS))
        self.tag = QLineEdit()
        self.tag.setPlaceholderText("what the lock protects (optional)")
        self.ttl = DurationSpinBox()
        self.ttl.setRange(0, 7 * 24 * 3600)
        self.ttl.setSingleStep(60)
        self.ttl.setSpecialValueText("no TTL")
        self.ttl.setToolTip("Lease length (\"5 min\", \"1 h\"); Lockwarden refreshes it at 75% "
                            "while it holds the lock")
        self.ttl_note = QLabel()
        self.ttl_note.setWordWrap(True)
        self.ttl_note.hide()
        self.format.currentTextChanged.connect(self._format_changed)
        self.error = QLabel()
        self.error.setWordWrap(True)
        self.error.setStyleSheet("color: #d23c3c;")
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error.setAccessibleName("Error")
        self.error.hide()
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        self.ok = buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok.setText("Acquire")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        # the dialog grows to fit an error instead of squashing the fields above it
        lay.setSizeConstraint(QLayout.SizeConstraint.SetMinimumSize)
        lay.addLayout(self._form())
        lay.addWidget(self.error)
        lay.addWidget(buttons)

    def _form(self) -> QFormLayout:
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        drow = QHBoxLayout()
        drow.addWidget(self.directory, 1)
        drow.addWidget(browse)
        form = QFormLayout()
        form.addRow("Directory:", drow)
        form.addRow("Lock name:", self.name)
        form.addRow("Format:", self.format)
        form.addRow("Tag:", self.tag)
        form.addRow("TTL:", self.ttl)
        form.addRow("", self.ttl_note)
        return form

    def _browse(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Lock directory", self.directory.currentText())
        if d:
            self.directory.setCurrentText(d)

    def _format_changed(self, fmt: str) -> None:
        if fmt == "task-mcp":
            default = default_ttl("local", "interactive")
            self.ttl.setSpecialValueText(f"spec default ({default:g} s)")
            lease = human_duration(max(0.0, default))
            self.ttl_note.setText(
                f"Task MCP locks always carry a lease: with no TTL given, its specification's "
                f"default of {lease} applies, renewed while Lockwarden runs.")
            self.ttl_note.show()
        else:
            self.ttl.setSpecialValueText("no TTL")
            self.ttl_note.hide()

    def values(self) -> AcquireRequest:
        """The lock to acquire, from the fields (TTL 0 means none)."""
        ttl = float(self.ttl.value())
        return AcquireRequest(
            path=os.path.join(os.path.expanduser(self.directory.currentText().strip()),
                              self.name.text().strip()),
            format=self.format.currentText(),
            tag=self.tag.text().strip() or None,
            ttl=ttl if ttl > 0 else None,
        )

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
        self.error.setText(printable_lines(message))  # its own line breaks stay breaks
        self.error.show()
        lay = self.layout()
        assert lay is not None  # set in __init__
        lay.activate()
        # a wrapped error's height depends on the width: grow to what this width needs
        need = (lay.totalHeightForWidth(self.width()) if lay.hasHeightForWidth()
                else lay.totalSizeHint().height())
        if need > self.height():
            self.resize(self.width(), need)
        self.ok.setEnabled(True)
        self.ok.setText("Acquire")
