"""docs/cli.md "Start-up time": ``status`` imports neither ``shutil`` (argparse's help
formatter would, and with it ``bz2`` and ``lzma``; so would platformdirs) nor a TOML writer
(``tomlkit``, or the ``tomli_w`` of earlier versions) nor ``sqlite3`` (the history's store),
with or without a configuration file;
``core.config`` imports ``tomlkit`` only when it saves."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import ENV

PROBE = """
import sys
from core.cli.main import main
code = main(sys.argv[1:])
print("LOADED", sorted({"shutil", "bz2", "lzma", "tomli_w", "tomlkit", "platformdirs",
                        "sqlite3"}
                       & set(sys.modules)), file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.parametrize("with_config", [False, True])
def test_status_imports_no_shutil_nor_a_toml_writer(lockdir: Path, tmp_path: Path,
                                                     with_config: bool) -> None:
    lock = lockdir / "x.lock"
    lock.write_text("pid=1\ntimestamp=1\n")
    cfg = tmp_path / "config.toml"
    if with_config:  # the configured directory's policy is read (tomllib only)
        cfg.write_text(f'[[watch]]\npath = "{lockdir}"\nstale_after = 60\n')
    out = subprocess.run([sys.executable, "-c", PROBE, "status", str(lock)], capture_output=True,
                         text=True, env={**ENV, "LOCKWARDEN_CONFIG": str(cfg)}, timeout=60,
                         check=False)
    assert out.returncode in (0, 1), out.stderr
    assert "LOADED []" in out.stderr


def test_help_still_fits_the_terminal_width(lockdir: Path) -> None:
    env = dict(ENV, COLUMNS="50")
    out = subprocess.run([sys.executable, "-m", "core", "status", "--help"], capture_output=True,
                         text=True, env=env, timeout=60, check=False)
    assert out.returncode == 0
    usage = out.stdout.split("\n\n")[0].splitlines()  # wrapped by argparse (the epilog is not)
    assert len(usage) > 1 and max(len(line) for line in usage) <= 50


def test_config_imports_tomlkit_only_to_save() -> None:
    out = subprocess.run([sys.executable, "-c", "import sys, core.config; "
                          "print('tomlkit' in sys.modules or 'tomli_w' in sys.modules)"],
                         capture_output=True, text=True, env=ENV, timeout=60, check=False)
    assert out.stdout.strip() == "False", out.stderr
