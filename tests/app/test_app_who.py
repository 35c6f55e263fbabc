""""What's using this?" in the app (app/dialogs/who.py): a live list of the processes using a
file, End process through the engine's end_user (audited), Copy command line (docs/gui.md,
"What's using this?"). Real processes, real Qt offscreen."""

from __future__ import annotations

import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication

from app.dialogs.who import WhoDialog

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

READER = "import sys; f = open(sys.argv[1]); print('ready', flush=True); sys.stdin.read()"


@pytest.fixture
def reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[subprocess.Popen[str]]:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    f = tmp_path / "busy.txt"
    f.write_text("x")
    p = subprocess.Popen([sys.executable, "-c", READER, str(f)], text=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    yield p
    p.kill()
    p.wait()


def test_the_list_names_the_process_and_end_process_ends_it(qtbot, tmp_path: Path,
                                                            reader) -> None:
    dialog = WhoDialog(str(tmp_path / "busy.txt"))
    qtbot.addWidget(dialog)
    qtbot.waitUntil(lambda: dialog.scans >= 1, timeout=10_000)
    assert dialog.table.rowCount() == 1
    pid, how = dialog.table.item(0, 0), dialog.table.item(0, 3)
    assert pid is not None and pid.text() == str(reader.pid)
    assert how is not None and how.text() == "read"
    assert "1 process uses" in dialog.note.text()
    assert not dialog.end_button.isEnabled()  # nothing selected yet
    dialog.table.selectRow(0)
    assert dialog.end_button.isEnabled()
    dialog.copy_command()
    assert QGuiApplication.clipboard().text() == shlex.join(
        [sys.executable, "-c", READER, str(tmp_path / "busy.txt")])
    confirm = dialog.ask_end(kill=False)
    assert confirm is not None and "End (SIGTERM)" in confirm.label.text()
    confirm.accept()
    assert reader.wait(timeout=30) == -15
    qtbot.waitUntil(lambda: dialog.table.rowCount() == 0, timeout=10_000)
    assert dialog.note.text().startswith("Nothing uses")
    log = tmp_path / "state" / "lockwarden" / "log" / "audit.log"
    assert '"operation":"end_user"' in log.read_text().replace(" ", "")


def test_a_missing_path_is_said_and_nothing_is_listed(qtbot, tmp_path: Path) -> None:
    dialog = WhoDialog()
    qtbot.addWidget(dialog)
    assert dialog.note.text() == "Choose a file or folder."
    dialog.set_path(str(tmp_path / "gone"))
    qtbot.waitUntil(lambda: dialog.scans >= 1, timeout=10_000)
    assert "No such file" in dialog.note.text()
    assert dialog.table.rowCount() == 0


def test_file_menu_and_tray_open_the_window(make_app, qtbot, lockdir: Path) -> None:
    """File ▸ What's using this… (Ctrl+Shift+U) and the tray's entry open it, non-modal."""
    lw = make_app([lockdir], tray=True)
    lw.start(show_window=True)
    file_menu = next(a.menu() for a in lw.window.menuBar().actions()
                     if a.text().replace("&", "") == "File")
    [entry] = [a for a in file_menu.actions() if a.text() == "What's using this…"]
    assert entry.shortcut().toString() == "Ctrl+Shift+U"
    entry.trigger()
    qtbot.waitUntil(lambda: any(isinstance(w, WhoDialog) and w.isVisible()
                                for w in QApplication.topLevelWidgets()), timeout=10_000)
    assert lw.tray is not None
    lw.tray.rebuild_menu()
    [tray_entry] = [a for a in lw.tray.menu.actions() if a.text() == "What's using this…"]
    tray_entry.trigger()
    qtbot.waitUntil(lambda: sum(isinstance(w, WhoDialog) and w.isVisible()
                                for w in QApplication.topLevelWidgets()) == 2, timeout=10_000)
