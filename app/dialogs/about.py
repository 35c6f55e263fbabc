"""Help ▸ About Lockwarden (docs/gui.md, "Menus"): the version, and where this app keeps what a
user may look for -- the configuration file, the window's state, this user's own audit log, the
history database and the quarantine folder -- each path selectable so it can be copied.
"""

from __future__ import annotations

import html
import sys

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox, QWidget

import core
from core.audit import fallback_log_path
from core.history.store import default_path as history_path
from core.text import printable


def about_paths(config_path: str, state_path: str) -> list[tuple[str, str]]:
    """(what, path) of every file a user may look for, in the order About lists them: the
    configuration file ``config_path``, the window's state ``state_path``, this user's own
    audit log (entries for directories that cannot take one, docs/audit.md), the history
    database (docs/history.md). Lock directories keep their own ``.lock_audit.log``."""
    return [("Configuration file", config_path),
            ("Window state", state_path),
            ("Your audit log", fallback_log_path()),
            ("History database", history_path())]


def about_box(parent: QWidget | None, *, config_path: str, state_path: str) -> QMessageBox:
    """A non-modal About box (not shown: the caller ``open()``s it): its text names the
    version (``Lockwarden X.Y.Z``), its informative text the paths of :func:`about_paths`,
    selectable."""
    box = QMessageBox(parent)
    box.setWindowTitle("About Lockwarden")
    box.setIcon(QMessageBox.Icon.Information)
    box.setTextFormat(Qt.TextFormat.RichText)
    py = ".".join(str(n) for n in sys.version_info[:3])
    box.setText(f"<b>Lockwarden {core.__version__}</b><br>"
                "Who holds every lock, whether it is stuck, and what to do about it.<br>"
                f"<small>Python {py}</small>")
    rows = "".join(f"<tr><td>{html.escape(what)}:&nbsp;</td>"
                   f"<td><code>{html.escape(printable(path))}</code></td></tr>"
                   for what, path in about_paths(config_path, state_path))
    box.setInformativeText(f"<table>{rows}</table>"
                           "<p>Each lock directory keeps its own <code>.lock_audit.log</code>."
                           "</p>")
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    box.setStandardButtons(QMessageBox.StandardButton.Close)
    box.setModal(False)
    return box
