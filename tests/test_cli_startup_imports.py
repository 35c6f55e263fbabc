"""docs/cli.md "Start-up time": ``status`` imports neither ``shutil`` (argparse's help
formatter would, and with it ``bz2`` and ``lzma``) nor ``tomli_w`` nor ``sqlite3`` (the
history's store); ``core.config`` imports ``tomli_w`` only when it saves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.test_cli import ENV

PROBE = """
import sys
from core.cli.main import main
code = main(sys.argv[1:])
heavy = {"shutil", "bz2", "lzma", "tomli_w", "sqlite3"}
print("LOADED", sorted(heavy & set(sys.modules)), file=sys.stderr)
sys.exit(code)
"""


def test_status_imports_no_shutil_nor_tomli_w_nor_sqlite3(lockdir: Path) -> None:
    lock = lockdir / "x.lock"
    lock.write_text("pid=1\ntimestamp=1\n")
    out = subprocess.run([sys.executable, "-c", PROBE, "status", str(lock)], capture_output=True,
                         text=True, env=ENV, timeout=60, check=False)
    assert out.returncode in (0, 1), out.stderr
    assert "LOADED []" in out.stderr


def test_help_still_fits_the_terminal_width(lockdir: Path) -> None:
    env = dict(ENV, COLUMNS="50")
    out = subprocess.run([sys.executable, "-m", "core", "status", "--help"], capture_output=True,
                         text=True, env=env, timeout=60, check=False)
    assert out.returncode == 0
    usage = out.stdout.split("\n\n")[0].splitlines()  # wrapped by argparse (the epilog is not)
    assert len(usage) > 1 and max(len(line) for line in usage) <= 50


def test_config_imports_tomli_w_only_to_save() -> None:
    out = subprocess.run([sys.executable, "-c", "import sys, core.config; "
                          "print('tomli_w' in sys.modules)"], capture_output=True, text=True,
                         env=ENV, timeout=60, check=False)
    assert out.stdout.strip() == "False", out.stderr
