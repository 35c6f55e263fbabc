"""Configuration warnings never carry raw control characters from the file (docs/cli.md,
"Control characters"; core/config/load.py): a key named with an ESC sequence made the warning
line -- printed on stderr by the CLI and shown in the GUI's status bar -- recolour or rewrite the
terminal. Key names, table names and values are escaped (core.text.printable)."""

from __future__ import annotations

from pathlib import Path

from core import config

ESC = "\x1b]0;owned\x07\x1b[2J\x1b[31m"


def _config(tmp_path: Path) -> Path:
    locks = tmp_path / "locks"
    locks.mkdir()
    path = tmp_path / "config.toml"
    key = f'"{ESC}evil"'.replace("\x1b", "\\u001b").replace("\x07", "\\u0007")
    path.write_text(
        f"{key} = 1\n"
        f'"tbl{ESC}"'.replace("\x1b", "\\u001b").replace("\x07", "\\u0007") + " = {}\n"
        f'[[watch]]\npath = "{locks}"\n{key} = true\n'
        "stale_after = \"\\u001b[31m\"\n"
        f"[ui]\n{key} = 1\n"
        f"[notifications]\n{key} = 1\n"
        f"[history]\n{key} = 1\n"
        f'[[redis]]\nurl = "redis://127.0.0.1:1"\n{key} = 1\n'
        f'[[projects]]\npath = "{locks}"\n{key} = 1\n'
    )
    path.chmod(0o600)
    return path


def test_config_warnings_escape_control_characters(tmp_path: Path) -> None:
    cfg = config.load(str(_config(tmp_path)))
    assert len(cfg.warnings) >= 7, cfg.warnings
    for warning in cfg.warnings:
        assert "\x1b" not in warning and "\x07" not in warning, repr(warning)
    assert any("\\x1b" in w and "evil" in w for w in cfg.warnings), cfg.warnings
