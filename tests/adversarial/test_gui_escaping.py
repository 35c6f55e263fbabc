"""The GUI shows what a lock file says without letting it draw (docs/cli.md, "Control
characters"): a tag or path holding a terminal escape, a newline or a bidi override is escaped
in the table, the detail pane, the tray's notifications and the confirmations; the force-release
confirmation of a Task MCP lock warns that Task MCP's own release_lock does not check the
owner (docs/formats.md, "task-mcp: what Lockwarden writes"). Real files, real offscreen Qt."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from app.dialogs import force_dialog
from app.table.columns import Col
from core.verdicts.inspect import inspect
from tests.support.app_spies import SignalSpy

EVIL = "deploy\x1b[2J\nrm -rf \u202eevil"
TAG = "deploy\x1b[2J \u202eevil"  # one line: a sema tag ends at the newline


def _no_raw(text: str) -> None:
    assert "\x1b" not in text and "\n" not in text and "\u202e" not in text, text


def test_table_and_detail_escape_a_hostile_tag(make_app: Any, lockdir: Path,
                                              qtbot: Any) -> None:
    path = lockdir / "evil.lock"
    path.write_text(f"pid={os.getpid()}\ntimestamp={int(time.time())}\ntag={TAG}\n")
    # sema replaces control characters by spaces when parsing; the bidi override stays
    lw = make_app([lockdir])
    lw.start(show_window=True)
    qtbot.waitUntil(lambda: lw.model.status_of(str(path)) is not None, timeout=10_000)
    row = next(r for r in range(lw.model.rowCount())
               if lw.model.data(lw.model.index(r, Col.LOCK)) is not None
               and "evil" in lw.model.data(lw.model.index(r, Col.LOCK)))
    for col in range(lw.model.columnCount()):
        text = lw.model.data(lw.model.index(row, col))
        if isinstance(text, str):
            _no_raw(text)
    assert lw.window.select_path(str(path))
    for label in lw.window.detail.values.values():
        _no_raw(label.text())
    assert "\\u202e" in lw.window.detail.values["Tag"].text()


def test_notifications_are_escaped(make_app: Any, lockdir: Path) -> None:
    lw = make_app([lockdir], tray=True)
    spy = SignalSpy(lw.tray.notified)
    lw.tray.notify(f"Lock {EVIL}", f"held by {EVIL}")
    (title, body, _icon), = spy.calls
    _no_raw(title)
    _no_raw(body)
    assert "\\x1b" in title and "\\u202e" in body


def test_force_release_of_a_task_mcp_lock_warns_about_its_release(lockdir: Path,
                                                                  qtbot: Any) -> None:
    path = lockdir / "change.lock"
    path.write_text(json.dumps({"owner": f"pid-{os.getpid()}@elsewhere",
                                "since": int(time.time() * 1000), "ttl": 3600}))
    dlg = force_dialog(inspect(str(path)), reclaim=False)
    qtbot.addWidget(dlg)
    assert "release_lock deletes a lock without checking who holds it" in dlg.label.text()
    sema = lockdir / "s.lock"
    sema.write_text(f"pid={os.getpid()}\ntimestamp={int(time.time())}\n")
    other = force_dialog(inspect(str(sema)), reclaim=False)
    qtbot.addWidget(other)
    assert "release_lock" not in other.label.text()
