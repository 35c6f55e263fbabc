"""The main window's menu bar as a desktop user expects it (docs/gui.md, "Menus"; offscreen Qt,
the real app): File / Edit / View / Lock / Help, every shortcut listed beside its entry, F1
opens the documentation on disk through the desktop (QDesktopServices), About names the
version, the configuration file and where the logs are."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QObject, Qt, QUrl, Slot
from PySide6.QtGui import QAction, QDesktopServices, QKeySequence
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QMenu

import core
from core.audit import fallback_log_path
from core.history.store import default_path as history_path

WAIT_MS = 20000


class UrlCatcher(QObject):
    """Takes the desktop's ``file:`` URLs (QDesktopServices' own hook for a scheme)."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[QUrl] = []

    @Slot(QUrl)
    def open(self, url: QUrl) -> None:
        self.urls.append(url)


@pytest.fixture
def opened() -> Iterator[UrlCatcher]:
    catcher = UrlCatcher()
    QDesktopServices.setUrlHandler("file", catcher, "open")  # type: ignore[arg-type]
    try:
        yield catcher
    finally:
        QDesktopServices.unsetUrlHandler("file")


def submenu(action: QAction) -> QMenu | None:
    menu = action.menu()
    return menu if isinstance(menu, QMenu) else None


def menus(window: Any) -> dict[str, QMenu]:
    return {a.text().replace("&", ""): m for a in window.menuBar().actions()
            if (m := submenu(a)) is not None}


def entries(menu: QMenu) -> dict[str, str]:
    """Entry text -> the shortcut it lists, submenus included."""
    out: dict[str, str] = {}
    for a in menu.actions():
        if (sub := submenu(a)) is not None:
            out.update(entries(sub))
        elif not a.isSeparator():
            out[a.text().replace("&", "")] = a.shortcut().toString(
                QKeySequence.SequenceFormat.PortableText)
    return out


def test_the_menu_bar_lists_every_action_with_its_shortcut(make_app: Any, qtbot: Any,
                                                           lockdir: Path) -> None:
    lw = make_app([lockdir])
    lw.start(show_window=True)
    by_title = menus(lw.window)
    assert list(by_title) == ["File", "Edit", "View", "Lock", "Help"]
    shortcuts = {title: entries(m) for title, m in by_title.items()}
    expected = {
        "File": {"Acquire…": "Ctrl+N", "Settings…": "Ctrl+,", "Audit log…": "Ctrl+L",
                 "Quit": "Ctrl+Q"},
        "Edit": {"Undo force release": "Ctrl+Z", "Copy path": "Ctrl+Shift+C", "Find": "Ctrl+F"},
        "View": {"Rescan": "F5", "Problems": "Ctrl+Shift+P", "Hosts": "Ctrl+Shift+O",
                 "History": "Ctrl+Shift+H"},
        "Lock": {"Release": "Del", "Reclaim": "Ctrl+Shift+R", "Force release…": "Ctrl+Shift+Del",
                 "End holder process…": "", "Audit entries…": "Ctrl+H",
                 "Notify me when free": ""},
        "Help": {"Documentation": "F1", "About Lockwarden": ""},
    }
    for title, want in expected.items():
        got = shortcuts[title]
        for text, keys in want.items():
            assert got.get(text) == keys, (title, text, got)
    assert "Open configuration file" in shortcuts["File"]
    view = by_title["View"]
    [columns] = [m for a in view.actions() if (m := submenu(a)) is not None]
    columns.aboutToShow.emit()
    assert "Holder" in entries(columns)


def test_f1_opens_the_documentation_on_disk(make_app: Any, qtbot: Any, lockdir: Path,
                                            opened: UrlCatcher) -> None:
    lw = make_app([lockdir])
    lw.start(show_window=True)
    w = lw.window
    w.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is w, timeout=WAIT_MS)
    QTest.keyClick(w.table, Qt.Key.Key_F1)
    qtbot.waitUntil(lambda: bool(opened.urls), timeout=WAIT_MS)
    [url] = opened.urls
    doc = Path(url.toLocalFile())
    assert doc.is_file() and doc.name == "gui.md"
    assert doc.parent.name == "docs"


def test_about_names_the_version_the_configuration_and_the_logs(make_app: Any, qtbot: Any,
                                                                lockdir: Path) -> None:
    lw = make_app([lockdir])
    lw.start(show_window=True)
    [about] = [a for a in menus(lw.window)["Help"].actions() if "About" in a.text()]
    about.trigger()
    box = lw.window.menus.about_box
    assert box is not None
    qtbot.waitUntil(box.isVisible, timeout=WAIT_MS)
    text = box.text() + box.informativeText()
    assert f"Lockwarden {core.__version__}" in text
    for path in (lw.config_path, fallback_log_path(), history_path(),
                 lw.settings.fileName()):
        assert path in text, path
    box.close()
