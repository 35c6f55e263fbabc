"""Undo of the last force release in the main window: an Edit menu entry with the platform's
Undo shortcut (Ctrl+Z), and the status bar's message with an Undo button (docs/gui.md,
"Window"). The work is :meth:`app.actions.commands.Commands.undo_force_release`; this part only
shows what it would do and asks for it.

A line edit takes Ctrl+Z for its own text before any window shortcut sees it, and the filter
box has the focus from the start: in the text boxes the window names, Ctrl+Z undoes the force
release while there is one to undo (what the status bar and the menu promise), and the box's
own text otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QAction, QKeyEvent, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu, QPushButton, QWidget

from app.actions.commands import Commands
from core.text import printable

UNDO_MESSAGE_MS = 60_000
"""How long the status bar says what Undo would do (ms); the Edit menu keeps offering it."""


class UndoBar(QObject):
    """Adds "Undo force release" to ``window``'s Edit menu (``QKeySequence.Undo``: Ctrl+Z) and an
    Undo button to its status bar, both enabled only while ``commands`` has something to undo
    (:attr:`app.actions.commands.Commands.undoChanged`).

    Args:
        window: the main window (its Edit menu and status bar).
        commands: the operations (what can be undone).
        text_boxes: widgets that take Ctrl+Z for themselves (the filter box), where Ctrl+Z
            undoes the force release while one can be undone.
        edit: the window's Edit menu, which lists the entry first (None: an Edit menu is
            added to the window's menu bar).

    Attributes:
        action: the menu entry (and its shortcut). ``button``: the status bar's button.
    """

    def __init__(self, window: QMainWindow, commands: Commands,
                 text_boxes: Sequence[QWidget] = (), edit: QMenu | None = None) -> None:
        super().__init__(window)
        self._window = window
        self._commands = commands
        self.action = QAction("Undo force release", window)
        self.action.setShortcut(QKeySequence(QKeySequence.StandardKey.Undo))
        self.action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        self.action.setToolTip("Put back the file the last force release removed (Ctrl+Z)")
        self.action.setEnabled(False)
        self.action.triggered.connect(self.undo)
        window.addAction(self.action)
        if edit is None:
            edit = window.menuBar().addMenu("&Edit")
        if edit.actions():  # the window's Edit menu (app.frame.menus): first
            first = edit.actions()[0]
            edit.insertAction(first, self.action)
            edit.insertSeparator(first)
        else:
            edit.addAction(self.action)
        self.menu = edit
        self.button = QPushButton("Undo")
        self.button.setAccessibleName("Undo force release")
        self.button.setToolTip(self.action.toolTip())
        self.button.clicked.connect(self.undo)
        self.button.hide()
        window.statusBar().addPermanentWidget(self.button)
        commands.undoChanged.connect(self._changed)
        for box in text_boxes:
            box.installEventFilter(self)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """Qt hook: in a text box, Ctrl+Z is not the box's own while a force release can be
        undone (the event is left unaccepted, so the window's shortcut fires)."""
        if (event.type() == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent)
                and event.matches(QKeySequence.StandardKey.Undo) and self.action.isEnabled()):
            event.ignore()
            return True
        return super().eventFilter(watched, event)

    def undo(self) -> None:
        """Ask for the undo (nothing happens when there is nothing to undo)."""
        self._commands.undo_force_release()

    def _changed(self, text: str) -> None:
        self.action.setEnabled(bool(text))
        self.button.setVisible(bool(text))
        kept = self._commands.last_kept
        name = printable(os.path.basename(kept.original)) if kept is not None else ""
        self.action.setText(f"Undo force release of {name}" if name else "Undo force release")
        if text:
            self._window.statusBar().showMessage(f"{text}. Undo (Ctrl+Z) puts it back.",
                                                 UNDO_MESSAGE_MS)
