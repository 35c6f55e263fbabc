"""Light/dark appearance. ``auto`` follows the platform's colour scheme; ``dark`` (or ``auto``
on a dark desktop whose style does not darken itself) uses the Fusion style with a dark
palette. Widgets take their colours from the palette, so both themes stay readable."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QStyleFactory


def dark_palette() -> QPalette:
    """A Fusion dark palette (text #e6e6e6 on #2b2b2b, links and highlight in blue)."""
    p = QPalette()
    base, window, text = QColor("#232323"), QColor("#2d2d2d"), QColor("#e6e6e6")
    disabled = QColor("#7c7c7c")
    R = QPalette.ColorRole
    p.setColor(R.Window, window)
    p.setColor(R.WindowText, text)
    p.setColor(R.Base, base)
    p.setColor(R.AlternateBase, QColor("#2a2a2a"))
    p.setColor(R.ToolTipBase, QColor("#3a3a3a"))
    p.setColor(R.ToolTipText, text)
    p.setColor(R.PlaceholderText, QColor("#9a9a9a"))
    p.setColor(R.Text, text)
    p.setColor(R.Button, QColor("#353535"))
    p.setColor(R.ButtonText, text)
    p.setColor(R.BrightText, QColor("#ff6b6b"))
    p.setColor(R.Link, QColor("#6cb4ff"))
    p.setColor(R.Highlight, QColor("#2f6fb8"))
    p.setColor(R.HighlightedText, QColor("#ffffff"))
    p.setColor(R.Light, QColor("#454545"))
    p.setColor(R.Midlight, QColor("#3a3a3a"))
    p.setColor(R.Mid, QColor("#2a2a2a"))
    p.setColor(R.Dark, QColor("#1a1a1a"))
    p.setColor(R.Shadow, QColor("#0d0d0d"))
    G = QPalette.ColorGroup.Disabled
    for role in (R.WindowText, R.Text, R.ButtonText):
        p.setColor(G, role, disabled)
    return p


DARK_STYLESHEET = """
QCheckBox::indicator, QMenu::indicator:non-exclusive {
    width: 12px; height: 12px; border: 1px solid #9a9a9a; border-radius: 2px;
    background: #1e1e1e;
}
QCheckBox::indicator:checked, QMenu::indicator:non-exclusive:checked {
    background: #4a90e2; border-color: #8cc0ff;
}
QCheckBox::indicator:disabled { border-color: #5a5a5a; }
QCheckBox { spacing: 6px; }
QToolBar QCheckBox { margin-left: 4px; margin-right: 8px; }
QLineEdit, QPlainTextEdit {
    border: 1px solid #5c5c5c; border-radius: 3px; background: #1e1e1e;
}
QLineEdit { padding: 2px 4px; }
QLineEdit:focus, QPlainTextEdit:focus { border-color: #4a90e2; }
QBalloonTip QLabel { color: black; }
"""
"""Fusion draws checkbox frames and line-edit borders with ``window.darker()``, invisible on a
dark window; this makes them visible in the dark theme only. Qt's tray notification balloon
(``QBalloonTip``, used where the desktop has no notification service) paints a light
background of its own, so its labels keep black text in the dark theme."""


def system_is_dark() -> bool:
    """True when the platform reports a dark colour scheme (Qt >= 6.5)."""
    hints = QGuiApplication.styleHints()
    return hints.colorScheme() == Qt.ColorScheme.Dark


def apply_theme(app: QApplication, theme: str) -> str:
    """Apply ``theme`` (``auto``, ``light`` or ``dark``) to ``app``; returns the theme in
    effect (``light`` or ``dark``)."""
    want_dark = theme == "dark" or (theme == "auto" and system_is_dark())
    if want_dark:
        app.setStyle(QStyleFactory.create("Fusion"))
        app.setPalette(dark_palette())
        app.setStyleSheet(DARK_STYLESHEET)
        return "dark"
    app.setStyleSheet("")
    if theme == "light":
        app.setStyle(QStyleFactory.create("Fusion"))
        app.setPalette(app.style().standardPalette())
    else:
        app.setPalette(app.style().standardPalette())
    return "light"
