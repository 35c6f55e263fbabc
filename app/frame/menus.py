"""The main window's menu bar (docs/gui.md, "Menus"): File, Edit, View, Lock and Help, holding
the window's own actions, so that each entry lists its shortcut beside it and every action can
be found without knowing a key. Other parts add theirs to its menus: the Undo of a
force release (:mod:`app.actions.undo`) to Edit, the History pane and "Notify me when free"
(:mod:`app.history_setup`) to View and Lock.

Help ▸ Documentation (F1) opens the documentation found on disk (``docs/gui.md``, else
``README.md`` of the source tree this app runs from) with the desktop's viewer for it
(QDesktopServices); a copy without them says where to read it instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from PySide6.QtCore import QObject, QUrl
from PySide6.QtGui import QAction, QDesktopServices, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu, QMessageBox

from app.dialogs.about import about_box
from app.frame.actions import ActionsWindow
from core.text import printable

SOURCE_ROOT = Path(__file__).resolve().parents[2]
"""The source tree this app runs from (its ``docs/`` and ``README.md``, when present)."""

DOC_FILES = ("docs/gui.md", "README.md")
"""The documentation F1 opens, the first that exists under :data:`SOURCE_ROOT`."""


def docs_path(root: Path = SOURCE_ROOT) -> Path | None:
    """The first of :data:`DOC_FILES` under ``root`` that is a file, or None."""
    for name in DOC_FILES:
        path = root / name
        if path.is_file():
            return path
    return None


def open_docs(window: QMainWindow) -> bool:
    """Open the documentation (:func:`docs_path`) in the desktop's viewer; True when one
    opened it. Otherwise the status bar says why (10 s)."""
    path = docs_path()
    if path is None:
        window.statusBar().showMessage(
            "The documentation is not installed with this copy: read docs/gui.md and "
            "README.md of Lockwarden's source.", 10000)
        return False
    if not QDesktopServices.openUrl(QUrl.fromLocalFile(str(path))):
        window.statusBar().showMessage(printable(
            f"No application could open {path}: open it in a text editor or a browser."),
            10000)
        return False
    return True


def _fill(menu: QMenu, actions: Sequence[QAction | None]) -> None:
    for a in actions:
        if a is None:
            menu.addSeparator()
        else:
            menu.addAction(a)


class MenuBar(QObject):
    """Builds ``window``'s menu bar from its actions (:class:`app.frame.actions.ActionsWindow`).

    Args:
        window: the main window.
        open_config: File ▸ Open configuration file's slot.
        panels: View's entries that show or hide a dock (Problems, Hosts).
        columns: a fresh column chooser (:meth:`app.table.view.LockTable.column_menu`),
            listed as View ▸ Columns each time it opens.
        config_path, state_path: the configuration file and the window's state file, named
            by Help ▸ About (:func:`app.dialogs.about.about_box`).

    Attributes:
        file, edit, view, lock, help: the menus, for the parts that add entries to them.
        about_box: the About box once opened (non-modal), else None.
    """

    def __init__(self, window: ActionsWindow, *, open_config: Callable[[], object],
                 panels: Sequence[QAction], columns: Callable[[], QMenu], config_path: str,
                 state_path: str) -> None:
        super().__init__(window)
        self._window = window
        self._paths = (config_path, state_path)
        self.about_box: QMessageBox | None = None
        bar = window.menuBar()
        act_open = QAction("Open configuration file", window)
        act_open.setToolTip(printable(config_path))
        act_open.triggered.connect(lambda: open_config())
        self.file = bar.addMenu("&File")
        _fill(self.file, [window.act_acquire, window.act_who, None, window.act_audit, act_open,
                          window.act_settings, None, window.act_close, window.act_quit])
        self.edit = bar.addMenu("&Edit")
        _fill(self.edit, [window.act_copy, window.act_find])
        self.view = bar.addMenu("&View")
        _fill(self.view, [window.act_rescan, None, *panels, None])
        cols = self.view.addMenu("&Columns")
        shown: list[QMenu] = []  # the chooser listed now, replaced each time the menu opens

        def refill() -> None:
            cols.clear()
            for old in shown:
                old.deleteLater()
            shown[:] = [columns()]
            for a in shown[0].actions():
                cols.addAction(a)

        cols.aboutToShow.connect(refill)
        self.lock = bar.addMenu("&Lock")
        _fill(self.lock, [window.act_release_key, window.act_reclaim, window.act_force,
                          window.act_end_holder, None, window.act_open_folder,
                          window.act_history])
        self.help = bar.addMenu("&Help")
        act_docs = QAction("&Documentation", window)
        act_docs.setShortcut(QKeySequence(QKeySequence.StandardKey.HelpContents))
        act_docs.setToolTip("Open the documentation (F1)")
        act_docs.triggered.connect(lambda: open_docs(window))
        window.addAction(act_docs)
        act_about = QAction("&About Lockwarden", window)
        act_about.setMenuRole(QAction.MenuRole.AboutRole)
        act_about.triggered.connect(self.show_about)
        _fill(self.help, [act_docs, None, act_about])

    def show_about(self) -> None:
        """Help ▸ About Lockwarden: the version, the configuration file and the logs,
        non-modal (:attr:`about_box`)."""
        if self.about_box is None:
            self.about_box = about_box(self._window, config_path=self._paths[0],
                                       state_path=self._paths[1])
        self.about_box.show()
        self.about_box.raise_()
