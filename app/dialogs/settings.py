"""The Settings dialog (docs/gui.md "Dialogs"): watched directories, project folders
(:mod:`app.dialogs.projects`), lock servers (added, edited, removed and tested:
:mod:`app.dialogs.servers`), notifications, appearance, start at login. It edits a copy.

With a :class:`app.bridges.config_store.ConfigStore`, OK saves before the dialog closes
(docs/DESIGN.md, "Nothing lost"): only what the dialog changed is edited into the file, which
is read again first. When that cannot be done the dialog stays open with everything typed and
says why in its problem bar: a file that does not parse (never overwritten: the parser's line
and column, **Open file**, **Reload** once fixed; OK is off meanwhile), or a file changed on disk
in the same keys (each conflict named: **Use my values** or **Reload from file**); a file that
stops parsing while Settings are open turns OK off until it parses again (read every second),
the edits kept. On a screen too small for every group, the groups scroll: the problem bar and
OK/Cancel stay in view and no help text is cut. The app then applies what the file holds."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING

from PySide6.QtCore import QSize, Qt, QTimer, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.dialogs.duration import DurationSpinBox
from app.dialogs.projects import ProjectsGroup
from app.dialogs.servers import ServersGroup
from core.config import Config, WatchSpec
from core.errors import ConfigError
from core.text import printable

if TYPE_CHECKING:
    from app.bridges.config_store import ConfigStore

DEFAULT_PATTERNS = ["*.lock", "*.pid", "*-lock"]
STALE_DECIMALS = 3
"""Decimals of the stale limit (seconds) in Settings; an unchanged value is kept exactly."""


RECHECK_MS = 1000
"""How often (ms) Settings read a configuration file that stopped parsing while they were open,
to turn OK back on once it is fixed."""

FRAME_ALLOWANCE = 48
"""Pixels of height left for the window manager's title bar and borders when the dialog opens
on a screen too small for it (the frame is not known before the window is shown)."""


class FittingScrollArea(QScrollArea):
    """A scroll area that asks for its whole content's size (Qt's own asks for at most 36 × 24
    characters), so the dialog opens at the size its groups want and scrolls them only when the
    screen is smaller."""

    def __init__(self, content: QWidget) -> None:
        super().__init__()
        self.setWidget(content)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

    def sizeHint(self) -> QSize:
        """Qt hook: the content's size hint, and room for the vertical scroll bar."""
        content = self.widget()
        hint = content.sizeHint() if content is not None else super().sizeHint()
        bar = self.verticalScrollBar().sizeHint().width()
        return QSize(hint.width() + bar + 2 * self.frameWidth(),
                     hint.height() + 2 * self.frameWidth())

    def minimumSizeHint(self) -> QSize:
        """Qt hook: as wide as the content must be, and a few lines tall (it scrolls)."""
        content = self.widget()
        width = content.minimumSizeHint().width() if content is not None else 0
        return QSize(width + self.verticalScrollBar().sizeHint().width(),
                     6 * self.fontMetrics().lineSpacing())


def _label(w: WatchSpec) -> str:
    return w.path + ("  (recursive)" if w.recursive else "")


class SettingsDialog(QDialog):
    """Settings: watched directories (path, recursive, patterns, stale limit in seconds,
    polling), project folders, lock servers, notifications, appearance, start at login
    (``autostart``: whether it is on now). :meth:`result_config` builds the new
    :class:`core.config.Config`.

    Args:
        config: the configuration in effect (the base of the edit).
        autostart: whether start at login is on now.
        store: where OK saves (see the module); None: OK only closes, the caller saves.
        parent: Qt parent.

    Attributes:
        config: the configuration the dialog started from (after **Reload**: the file's).
        problem: the problem bar's text ("" when hidden).
    """

    def __init__(self, config: Config, *, autostart: bool, file_menus: bool = False,
                 store: ConfigStore | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Lockwarden settings")
        self.config = config
        self._config_store = store
        self._watches: list[WatchSpec] = list(config.watches)
        self._loading = False
        self.problem = ""
        self._reloaded = False
        watched = self._watched_group()
        notes = self._notifications_group(config)
        general = self._general_group(config, autostart, file_menus)
        self.buttons = buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                                  | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self.ok_button = buttons.button(QDialogButtonBox.StandardButton.Ok)
        self._recheck = QTimer(self)
        self._recheck.setInterval(RECHECK_MS)
        self._recheck.timeout.connect(self._file_parses_again)
        self.servers = ServersGroup(list(config.servers))
        self.projects = ProjectsGroup(list(config.projects))
        body = QWidget()
        groups = QVBoxLayout(body)
        groups.setContentsMargins(0, 0, 0, 0)
        groups.addWidget(watched, 1)
        middle = QHBoxLayout()  # side by side: the dialog fits a 768-pixel-high screen
        middle.addWidget(self.projects, 1)
        middle.addWidget(self.servers, 1)
        groups.addLayout(middle)
        row = QHBoxLayout()
        row.addWidget(notes)
        row.addWidget(general)
        groups.addLayout(row)
        # the groups scroll on a screen too small for them (with the problem bar): squeezed,
        # their wrapped help texts would be cut; the problem bar and OK/Cancel stay in view
        self.body = FittingScrollArea(body)
        lay = QVBoxLayout(self)
        lay.addWidget(self._problem_bar())
        lay.addWidget(self.body, 1)
        lay.addWidget(buttons)
        self._refresh_list()
        if self._watches:
            self.list.setCurrentRow(0)
        else:
            self.editor.setEnabled(False)
        self._show_load_error()
        # Qt opens a window at most 2/3 of the screen, which squeezes the fields: open at
        # the size the layout asks for, within the screen's available area less the window
        # manager's title bar and borders
        screen = self.screen()
        want = self.sizeHint()
        room = screen.availableGeometry().size() - QSize(16, FRAME_ALLOWANCE) if screen else want
        self.resize(want.boundedTo(room))

    # -- the problem bar -----------------------------------------------------------------------

    def _problem_bar(self) -> QFrame:
        self.problem_frame = QFrame()
        self.problem_frame.setFrameShape(QFrame.Shape.StyledPanel)
        self.problem_frame.setStyleSheet("QFrame { background: #fbe3e3; color: #1b1b1b; "
                                         "border-radius: 3px; }")
        self.problem_label = QLabel()
        self.problem_label.setWordWrap(True)
        self.problem_label.setTextFormat(Qt.TextFormat.PlainText)
        self.problem_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.problem_label.setAccessibleName("Configuration problem")
        self.open_file = QPushButton("&Open file")
        self.open_file.setToolTip("Open the configuration file to fix it by hand")
        self.open_file.clicked.connect(self.open_config_file)
        self.reload = QPushButton("&Reload")
        self.reload.setToolTip("Read the configuration file again (your edits here are "
                               "dropped)")
        self.reload.clicked.connect(self.reload_from_file)
        self.use_mine = QPushButton("&Use my values")
        self.use_mine.setToolTip("Save, with your values where the file was changed too")
        self.use_mine.clicked.connect(lambda: self._save_and_close(prefer_mine=True))
        row = QHBoxLayout()
        row.addStretch(1)
        for b in (self.use_mine, self.open_file, self.reload):
            row.addWidget(b)
        lay = QVBoxLayout(self.problem_frame)
        lay.addWidget(self.problem_label)
        lay.addLayout(row)
        self.problem_frame.hide()
        return self.problem_frame

    def _show_problem(self, text: str, *, conflict: bool = False) -> None:
        self.problem = text
        self.problem_label.setText("\n".join(printable(line) for line in text.split("\n")))
        self.use_mine.setVisible(conflict)
        self.open_file.setVisible(self._path() is not None)
        self.reload.setVisible(self._path() is not None)
        self.reload.setText("&Reload from file" if conflict else "&Reload")
        self.problem_frame.show()

    def _hide_problem(self) -> None:
        self.problem = ""
        self.problem_frame.hide()

    def _file_parses_again(self) -> None:
        """(every :data:`RECHECK_MS` while a file that broke under Settings is not fixed)
        Once it parses, OK is on again and the bar says so; the edits made here are kept."""
        path = self._path()
        if path is None or not self.isVisible():
            self._recheck.stop()
            return
        from core.config import load

        if load(path).load_error is None:
            self._recheck.stop()
            self.ok_button.setEnabled(True)
            self._show_problem("The configuration file parses again: OK saves your changes "
                               "into it.")
    def _path(self) -> str | None:
        return self._config_store.path if self._config_store is not None else self.config.path

    def _show_load_error(self) -> None:
        """A file that cannot be used: say where and what to fix; OK stays off (it would
        write over the file)."""
        err = self.config.load_error
        self._recheck.stop()  # what the file holds now decides
        self.ok_button.setEnabled(err is None)
        if err is None:
            self._hide_problem()
            self.ok_button.setToolTip("")
            return
        self.ok_button.setToolTip("The configuration file must be fixed first: Settings "
                                  "never write over a file that does not parse")
        self._show_problem(
            f"The configuration file cannot be used, so Lockwarden runs on its defaults and "
            f"Settings will not save over it.\n{err.text()}\nFile: {err.path}\nFix it by hand "
            "(Open file), then Reload.")

    def open_config_file(self) -> bool:
        """Open the configuration file in the desktop's editor for it; True when one
        opened."""
        path = self._path()
        if path is None:
            return False
        if QDesktopServices.openUrl(QUrl.fromLocalFile(path)):
            return True
        self.problem_label.setText(self.problem_label.text()
                                   + f"\nNo application could open {printable(path)}: open it "
                                   "in a text editor.")
        return False

    def reload_from_file(self) -> None:
        """Read the file again and show what it says (the edits made here are dropped)."""
        if self._config_store is not None:
            fresh = self._config_store.reload()
        else:
            from core.config import load

            fresh = load(self.config.path) if self.config.path else self.config
        self._reloaded = True
        self.populate(fresh)

    def populate(self, config: Config) -> None:
        """Show ``config`` in every field and make it the base of the edit."""
        self.config = config
        self._watches = list(config.watches)
        self._refresh_list()
        self.list.setCurrentRow(0 if self._watches else -1)
        self.editor.setEnabled(bool(self._watches))
        self.projects.set_projects(list(config.projects))
        self.servers.set_servers(list(config.servers))
        n = config.notifications
        for box, on in ((self.on_stale, n.on_stale), (self.on_expired, n.on_expired),
                        (self.on_acquire, n.on_acquire), (self.on_release, n.on_release)):
            box.setChecked(on)
        self.theme.setCurrentText(config.ui.theme)
        self.start_minimized.setChecked(config.ui.start_minimized)
        self._show_load_error()

    # -- OK -----------------------------------------------------------------------------------

    def accept(self) -> None:
        """OK: save (with a store) and close; on a problem stay open and say it (see the
        module). Without a store: close, the caller saves :meth:`result_config`."""
        if self.config.load_error is not None:
            self._show_load_error()
            return
        self._save_and_close(prefer_mine=False)

    def _save_and_close(self, *, prefer_mine: bool) -> None:
        if self._config_store is not None:
            from core.config.edit import ConfigConflict, ConfigUnparsable

            try:
                self._config_store.commit(self.result_config(), base=self.config,
                                   prefer_mine=prefer_mine, reloaded=self._reloaded)
            except ConfigConflict as exc:
                self._show_problem(
                    "The configuration file was changed by something else since Settings "
                    "opened. Your changes and the file's were merged, except where both "
                    "changed the same thing; nothing was saved:\n"
                    + "\n".join(f"• {c.text()}" for c in exc.conflicts), conflict=True)
                return
            except ConfigUnparsable as exc:
                self._show_problem(f"Not saved: the configuration file no longer parses, and "
                                   f"Settings never write over it.\n{exc}\nFix it (Open "
                                   "file): OK comes back on once it parses, with your "
                                   "changes here kept.")
                self.ok_button.setEnabled(False)
                self._recheck.start()
                return
            except (ConfigError, OSError) as exc:
                why = (f"{exc.filename or self._path()}: {exc.strerror}"
                       if isinstance(exc, OSError) and exc.strerror else str(exc))
                self._show_problem(f"Not saved: {why}")
                return
        self._hide_problem()
        super().accept()

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
        self.readable = QCheckBox("Other users may read lock files written here")
        self.readable.setAccessibleName("Other users may read lock files written here")
        self.readable.setToolTip(
            "Off (default): lock files Lockwarden writes here are readable by you only (0600).\n"
            "On: every user who can enter the directory sees the holder's PID, host, tag and\n"
            "token, and can open the file (docs/engine.md, \"Who can read a lock file\").")
        form = QFormLayout()
        form.addRow("Directory:", self.path)
        form.addRow("", self.recursive)
        form.addRow("Patterns:", self.patterns)
        form.addRow("Stale after:", self.stale)
        form.addRow("Polling:", self.polling)
        form.addRow("", self.readable)
        editor = QWidget()
        editor.setLayout(form)
        for w in (self.path, self.patterns):
            w.editingFinished.connect(self._store)
        self.recursive.toggled.connect(self._store)
        self.stale.valueChanged.connect(self._store)
        self.polling.currentIndexChanged.connect(self._store)
        self.readable.toggled.connect(self._store)
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

    def _general_group(self, config: Config, autostart: bool, file_menus: bool) -> QGroupBox:
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
        self.file_menus = QCheckBox("Add \u201cWhat's using this?\u201d to the file manager's menu")
        self.file_menus.setToolTip("A right-click entry in Files (Nautilus), Dolphin, Nemo and "
                                   "Thunar (Explorer on Windows) that shows every process "
                                   "using the file or folder")
        self.file_menus.setChecked(file_menus)
        gform.addRow("", self.file_menus)
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
        self.readable.setChecked(w.readable_lock_files)
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
            readable_lock_files=self.readable.isChecked(),
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
            servers=list(self.servers.servers),
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
