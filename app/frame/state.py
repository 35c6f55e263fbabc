"""What the main window remembers between runs (docs/gui.md "Window"): geometry, splitter,
column widths, hidden columns and sort order (the header's state), the filter text and the
quick filters, in the app's QSettings."""

from __future__ import annotations

from typing import NamedTuple

from PySide6.QtCore import QAbstractItemModel, QByteArray, QSettings
from PySide6.QtWidgets import QCheckBox, QHeaderView, QLineEdit, QMainWindow, QSplitter

DEFAULT_SPLIT = [420, 260]
"""Table and detail pane heights in pixels before the user moves the splitter."""


class Parts(NamedTuple):
    """The widgets whose state is kept."""

    window: QMainWindow
    splitter: QSplitter
    header: QHeaderView
    proxy: QAbstractItemModel  # app.table.proxy.LockFilterProxy: sort() is all this needs
    filter: QLineEdit
    stale_only: QCheckBox
    held_by_me: QCheckBox


def _true(value: object) -> bool:
    return value in (True, "true")


def restore(s: QSettings, p: Parts) -> None:
    """Restore what :func:`save` stored; defaults where nothing (or something else) is."""
    geo = s.value("window/geometry")
    if isinstance(geo, QByteArray | bytes):
        p.window.restoreGeometry(QByteArray(geo))
    split = s.value("window/splitter")
    if isinstance(split, QByteArray | bytes):
        p.splitter.restoreState(QByteArray(split))
    else:
        p.splitter.setSizes(DEFAULT_SPLIT)
    header = s.value("window/header")
    if isinstance(header, QByteArray | bytes):
        p.header.restoreState(QByteArray(header))
        p.proxy.sort(p.header.sortIndicatorSection(), p.header.sortIndicatorOrder())
    text = s.value("window/filter", "")
    p.filter.setText(text if isinstance(text, str) else "")
    p.stale_only.setChecked(_true(s.value("window/stale_only", False)))
    p.held_by_me.setChecked(_true(s.value("window/held_by_me", False)))


def save(s: QSettings, p: Parts) -> None:
    """Store the window's geometry, splitter, header, filter text and quick filters."""
    s.setValue("window/geometry", p.window.saveGeometry())
    s.setValue("window/splitter", p.splitter.saveState())
    s.setValue("window/header", p.header.saveState())
    s.setValue("window/filter", p.filter.text())
    s.setValue("window/stale_only", p.stale_only.isChecked())
    s.setValue("window/held_by_me", p.held_by_me.isChecked())
    s.sync()
