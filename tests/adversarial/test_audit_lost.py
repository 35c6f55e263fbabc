"""An audit entry that can be written nowhere -- neither the lock directory's log nor the
per-user log (a full disk, a read-only file system) -- is said where the user looks
(core/audit/write.py ``add_lost_listener``; docs/audit.md, "When an entry cannot be
written"): one line on the CLI's stderr, an entry in the app's Problems panel. Before, it went
to Python logging only. Here both logs are made unwritable for real: the directory's log is a
directory, and the per-user log's parent is a regular file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.cli import ENV


def _no_log_anywhere(lockdir: Path, tmp_path: Path) -> dict[str, str]:
    (lockdir / ".lock_audit.log").mkdir()
    blocker = tmp_path / "state-is-a-file"
    blocker.write_text("")
    return {"XDG_STATE_HOME": str(blocker / "state")}


def test_the_cli_says_an_entry_was_written_nowhere(lockdir: Path, tmp_path: Path) -> None:
    env = dict(ENV, **_no_log_anywhere(lockdir, tmp_path))
    lock = lockdir / "a.lock"
    out = subprocess.run([sys.executable, "-m", "core", "try", str(lock)], capture_output=True,
                         text=True, env=env, timeout=60, check=False)
    assert out.returncode == 0, out.stderr  # the lock was taken: that is not undone
    lines = [ln for ln in out.stderr.splitlines() if ln]
    assert len(lines) == 1, out.stderr  # one line, not a second one from logging
    assert f"acquire of {lock} was done, but its audit entry could not be written" in lines[0]
    assert lock.exists()


def test_the_app_lists_it_in_the_problems_panel(make_app: Any, lockdir: Path, tmp_path: Path,
                                                qtbot: Any, monkeypatch: Any) -> None:
    lw = make_app([lockdir])
    lw.start(show_window=False)
    qtbot.waitUntil(lambda: lw.inventory.initial_done)
    for name, value in _no_log_anywhere(lockdir, tmp_path).items():
        monkeypatch.setenv(name, value)
    lock = lockdir / "b.lock"
    lw.actions.acquire(str(lock))
    panel = lw.window.problems
    qtbot.waitUntil(lambda: panel.problems("audit") != [], timeout=10_000)
    assert f"acquire of {lock} was done" in panel.problems("audit")[0]
    assert os.path.exists(lock)
