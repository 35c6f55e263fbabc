"""``audit --tail`` on another user's sparse log (a hole of NUL bytes before the last line, as
a crash on some file systems or a hostile user leaves) says which lines are not entries and
why; it printed rows of ``None`` (core/cli/output.py ``audit_table``)."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

from tests.support.cli import ENV

LINE = {"timestamp": "2026-11-25T10:00:00.000Z", "operation": "acquire",
        "lockPath": "/x/a.lock", "details": {}, "user": "x", "pid": 1}


def _audit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "core", "audit", *args], capture_output=True,
                          text=True, env=ENV, timeout=60, check=False)


def test_tail_of_a_sparse_foreign_log_names_the_bad_lines(tmp_path: Path) -> None:
    d = tmp_path / "shared"
    d.mkdir()
    log = d / ".lock_audit.log"
    with open(log, "wb") as f:
        f.truncate(2 * 1024 * 1024)  # a hole: 2 MiB of NUL bytes
        f.seek(0, os.SEEK_END)
        f.write((json.dumps(LINE) + "\n").encode())
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(log, nobody.pw_uid, nobody.pw_gid)
    out = _audit(str(d), "--tail", "3")
    assert out.returncode == 0, out.stderr
    assert "None" not in out.stdout
    assert "(line -" in out.stdout and ("longer than" in out.stdout or "JSON" in out.stdout)


def test_a_good_entry_still_shows_its_fields(tmp_path: Path) -> None:
    log = tmp_path / ".lock_audit.log"
    log.write_text(json.dumps(LINE) + "\n")
    out = _audit(str(tmp_path), "--tail", "1")
    assert out.returncode == 0, out.stderr
    row = out.stdout.splitlines()[1].split()
    assert row[:2] == ["2026-11-25T10:00:00.000Z", "acquire"] and row[-1] == "/x/a.lock"
    assert row[3] == "-"  # no 'via' in a Task MCP line: a dash, not 'None'
