"""A configuration path that is a FIFO, a device, huge, or a directory: a clear warning and
defaults, never a hang or an unbounded read; a symlink to a real file is followed (dotfile
managers link it). Rule: docs/DESIGN.md, "Formats" (never open a FIFO, device or socket)."""

from __future__ import annotations

import os

import pytest

from core import config
from core.errors import ConfigError


def test_fifo_config_does_not_hang(tmp_path) -> None:
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    cfg = config.load(str(fifo))  # would block for ever in open() without a writer
    assert cfg.watches_are_default
    assert len(cfg.warnings) == 1 and "not a regular file" in cfg.warnings[0]
    with pytest.raises(OSError):
        config.load_strict(str(fifo))


def test_device_config_is_not_read() -> None:
    cfg = config.load("/dev/zero")  # an endless read without the check
    assert cfg.watches_are_default
    assert "not a regular file" in cfg.warnings[0]


def test_config_over_one_mebibyte_is_refused(tmp_path) -> None:
    big = tmp_path / "config.toml"
    with open(big, "wb") as f:
        f.truncate(config.MAX_CONFIG_BYTES + 1)  # sparse: costs no disk
    cfg = config.load(str(big))
    assert cfg.watches_are_default
    assert "larger than 1 MiB" in cfg.warnings[0]


def test_directory_config_is_refused(tmp_path) -> None:
    cfg = config.load(str(tmp_path))
    assert "is a directory" in cfg.warnings[0]


def test_symlinked_config_is_followed(tmp_path) -> None:
    real = tmp_path / "real.toml"
    real.write_text(f'[[watch]]\npath = "{tmp_path}"\n')
    link = tmp_path / "config.toml"
    link.symlink_to(real)
    cfg = config.load_strict(str(link))
    assert [w.path for w in cfg.watches] == [str(tmp_path)]


def test_strict_load_of_fifo_names_the_problem(tmp_path) -> None:
    fifo = tmp_path / "c.toml"
    os.mkfifo(fifo)
    with pytest.raises(OSError) as err:
        config.load_strict(str(fifo))
    assert not isinstance(err.value, ConfigError)
    assert "not a regular file" in str(err.value)
