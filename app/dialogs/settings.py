"""The Settings dialog (docs/gui.md "Dialogs"): watched directories, project folders
(:mod:`app.dialogs.projects`), lock servers (shown and
tested: :mod:`app.dialogs.servers`), notifications, appearance, start at login. It edits a
copy; the app saves and applies the result."""

from __future__ import annotations

import os
from dataclasses import replace

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.dialogs.duration import DurationSpinBox
from app.dialogs.projects import ProjectsGroup
from app.dialogs.servers import ServersGroup
from core.config import Config, WatchSpec

DEFAULT_PATTERNS = ["*.lock", "*.pid", "*-lock"]
STALE_DECIMALS = 3
"""Decimals of the stale limit (seconds) in Settings; an unchanged value is kept exactly."""


def _label(w: WatchSpec) -> str:
    return w.path + ("  (recursive)" if w.recursive else "")


class SettingsDialog(QDialog):
    """Settings: watched directories (path, recursive, patterns, stale limit in seconds,
    polling), notifications, appearance, start at login (``autostart``: whether it is on now).
    :meth:`result_config` builds the new :class:`core.config.Config`; the app saves and applies
    it without restart."""

    def __init__(self, config: Config, *, autostart: bool,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Lockwarden settings")
        self.config = config
        self._watches: list[WatchSpec] = list(config.watches)
        self._loading = False
        watched = self._watched_group()
        notes = self._notifications_group(config)
        general = self._general_group(config, autostart)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self.servers = ServersGroup(list(config.servers))
        self.projects = ProjectsGroup(list(config.projects))
        lay = QVBoxLayout(self)
        lay.addWidget(watched, 1)
        middle = QHBoxLayout()  # side by side: the dialog fits a 768-pixel-high screen
        middle.addWidget(self.projects, 1)
        middle.addWidget(self.servers, 1)
        lay.addLayout(middle)
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
        # Qt opens a window at most 2/3 of the screen, which squeezes the fields: open at
        # the size the layout asks for, within the screen's available area
        screen = self.screen()
        want = self.sizeHint()
        self.resize(want.boundedTo(screen.availableGeometry().size()) if screen else want)

    # -- layout -------------------------------------------------------------------------------

    def _watched_group(self) -> QGroupBox:
        self.list = QListWidget()
        self.list.setMinimumWidth(260)
        add = QPushButton("Add…")
        add.clicked.connect(self._browse_add)
        remove = QPushButton("Remove")
        remove.clicked.connect(self.remove_current)
        self.editor = self._editor()
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
        return watched

    def _editor(self) -> QWidget:
        self.path = QLineEdit()
        self.recursive = QCheckBox("Include subdirectories")
        self.patterns = QLineEdit()
        self.patterns.setToolTip("File name patterns, separated by commas")
        self.stale = DurationSpinBox()
        self.stale.setRange(1, 30 * 24 * 3600)
        self.stale.setDecimals(STALE_DECIMALS)
        self.stale.setSingleStep(60)
        self.stale.setToolTip("A foreign lock whose holder is not alive is stale after this "
                              "age: type \"1 h\", \"30 min\", \"1 h 30 min\" or seconds")
        self.polling = QComboBox()
        self.polling.addItems(["auto", "on", "off"])
        self.polling.setToolTip("auto: poll network filesystems; on: always poll; off: events only")
        form = QFormLayout()
        form.addRow("Directory:", self.path)
        form.addRow("", self.recursive)
        form.addRow("Patterns:", self.patterns)
        form.addRow("Stale after:", self.stale)
        form.addRow("Polling:", self.polling)
        editor = QWidget()
        editor.setLayout(form)
        for w in (self.path, self.patterns):
            w.editingFinished.connect(self._store)
        self.recursive.toggled.connect(self._store)
        self.stale.valueChanged.connect(self._store)
        self.polling.currentIndexChanged.connect(self._store)
        return editor

    def _notifications_group(self, config: Config) -> QGroupBox:
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
        return notes

    def _general_group(self, config: Config, autostart: bool) -> QGroupBox:
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
        return general

    # -- the list of watched directories ------------------------------------------------------

    def _refresh_list(self) -> None:
        cur = self.list.currentRow()
        self.list.blockSignals(True)
        self.list.clear()
        for w in self._watches:
            item = QListWidgetItem(_label(w))
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
        patterns = pats or list(DEFAULT_PATTERNS)
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
        self.list.item(row).setText(_label(self._watches[row]))

    def _browse_add(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Watch directory", os.path.expanduser("~"))
        if d:
            self.add_directory(d)

    def add_directory(self, path: str, *, recursive: bool = False) -> None:
        """Add a watched directory with default settings and select it."""
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

    # -- result -------------------------------------------------------------------------------

    @property
    def watches(self) -> list[WatchSpec]:
        """The edited list of watched directories."""
        self._store()
        return list(self._watches)

    def result_config(self) -> Config:
        """The edited :class:`core.config.Config` (same ``path``; ``warnings`` cleared)."""
        c = self.config
        return replace(
            c,
            watches=self.watches,
            projects=list(self.projects.projects),
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
