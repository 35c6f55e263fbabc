"""A configuration file someone else controls is refused (core/config/read.py
``foreign_config``; docs/watching.md, "Configuration"): one owned by another user, or writable
by other users, loads as the defaults with one line saying why, and a ``password_env`` in any
configuration file names only ``LOCKWARDEN_*`` variables (core/config/servers.py), so a
file cannot send ``AWS_SECRET_ACCESS_KEY`` to a server of its choosing. Before: such a file
loaded silently and its ``password_env`` sent that secret."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from core.config import load
from tests.support.cli import ENV

HOSTILE = ('[[watch]]\npath = "/srv/elsewhere"\n\n[[redis]]\nurl = "redis://127.0.0.1:1/0"\n'
           'password_env = "AWS_SECRET_ACCESS_KEY"\n')


def test_a_world_writable_config_is_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(HOSTILE)
    cfg.chmod(0o666)
    c = load(str(cfg))
    assert c.load_error is not None and "can be written by other users" in c.load_error.message
    assert [w.path for w in c.watches] != ["/srv/elsewhere"] and c.servers == []
    out = subprocess.run([sys.executable, "-m", "core", "status", str(tmp_path / "x.lock"),
                          "--config", str(cfg)], capture_output=True, text=True, env=ENV,
                         timeout=60, check=False)
    assert "refused; chmod go-w it" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_another_users_config_is_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(HOSTILE)
    cfg.chmod(0o644)
    nobody = pwd.getpwnam("nobody")
    os.chown(cfg, nobody.pw_uid, nobody.pw_gid)
    c = load(str(cfg))
    assert c.load_error is not None and "belongs to nobody" in c.load_error.message
    assert c.servers == []


def test_password_env_names_only_lockwarden_variables(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(HOSTILE + '\n[[postgres]]\ndsn = "postgresql://u@127.0.0.1:1/db"\n'
                   'password_env = "LOCKWARDEN_PG_PASSWORD"\n'
                   '\n[fleet]\ndsn = "postgresql://u@127.0.0.1:1/fleet"\n'
                   'password_env = "HOME"\n')
    cfg.chmod(0o600)
    c = load(str(cfg))
    assert c.load_error is None
    by_kind = {s.kind: s.password_env for s in c.servers}
    assert by_kind == {"redis": None, "postgres": "LOCKWARDEN_PG_PASSWORD"}
    assert c.fleet is not None and c.fleet.password_env is None
    assert any("redis[1].password_env" in w and "LOCKWARDEN_*" in w for w in c.warnings)
    assert any("fleet.password_env" in w for w in c.warnings)
