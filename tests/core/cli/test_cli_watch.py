"""``lockwarden watch DIR --json``: the initial inventory, then one JSON line per change until
SIGINT/SIGTERM, exit 0 (docs/cli.md, "``watch``: a headless monitor"). Real files and a real
subprocess."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import ENV, LW, Lines, lw, one_line


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_watch_json_reports_added_and_removed(lockdir: Path, sig: int) -> None:
    (lockdir / "before.lock").write_text("pid=1\ntimestamp=1795289498\ntag=old\n")
    proc = subprocess.Popen([*LW, "watch", str(lockdir), "--json"], env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        lines = Lines(proc)
        initial = lines.next_json()
        assert initial["event"] == "initial" and initial["path"] == str(lockdir / "before.lock")
        assert initial["tag"] == "old" and initial["pid"] == 1
        assert initial["reasons"] and all(  # reasons as data, as in status --json
            isinstance(r["code"], str) and isinstance(r["text"], str) for r in initial["reasons"])
        lines.until(lambda o: o["event"] == "ready")

        new = lockdir / "new.lock"
        new.write_text("pid=1\ntimestamp=1795289499\ntag=fresh\n")
        added = lines.until(lambda o: o.get("path") == str(new))
        assert added["event"] == "added" and added["tag"] == "fresh" and added["locked"] is True

        new.unlink()
        removed = lines.until(lambda o: o.get("path") == str(new))
        assert removed["event"] == "removed"

        proc.send_signal(sig)
        assert proc.wait(timeout=30) == 0
        assert proc.stderr is not None
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def test_watch_missing_directory(tmp_path: Path) -> None:
    out = lw("watch", str(tmp_path / "missing"), "--json")
    assert out.returncode == 3 and "no such directory" in one_line(out.stderr)
