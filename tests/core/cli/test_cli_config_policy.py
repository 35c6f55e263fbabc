"""One verdict everywhere (docs/cli.md, "One verdict: the configured directory's policy"):
``list``, ``status`` and ``watch`` judge a lock under the stale policy of the configured
directory it is in, as the app does, and say when they use the defaults. Real configuration
files, real lock files, real subprocesses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import ENV, LW, Lines, cli_env, dead_pid, lw
from tests.support.clock import age_after_boot

AGE = age_after_boot(1200)
"""Seconds: the locks' age, 1,200 s unless this host booted more recently (an older lock would
predate the boot, and be stale under any policy)."""
LIMIT = AGE / 2
"""The configured directory's ``stale_after`` (600 s): the locks are stale under it and held
under the default 3,600 s."""


def _old_lock(path: Path, pid: int) -> Path:
    when = int(time.time() - AGE) + 1
    path.write_text(f"pid={pid}\ntimestamp={when}\n")
    os.utime(path, (when, when))
    return path


@pytest.fixture
def setup(tmp_path: Path) -> dict[str, Path]:
    watched = tmp_path / "watched"
    other = tmp_path / "other"
    watched.mkdir()
    other.mkdir()
    pid = dead_pid()
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'# hand written\n[[watch]]\npath = "{watched}"\nstale_after = {LIMIT}\n')
    return {"watched": _old_lock(watched / "b.lock", pid),
            "other": _old_lock(other / "b.lock", pid), "config": cfg, "home": tmp_path / "home"}


def test_status_uses_the_configured_directorys_policy(setup: dict[str, Path]) -> None:
    lock, cfg = setup["watched"], setup["config"]
    for how in (["--config", str(cfg)], []):
        out = lw("status", str(lock), "--json", *how, env=cli_env(LOCKWARDEN_CONFIG=str(cfg)))
        st = json.loads(out.stdout)
        assert st["state"] == "stale", out.stderr  # as the app, which reads the same file
        assert st["policy"] == {"source": "config", "stale_after": LIMIT,
                                "directory": str(lock.parent), "config": str(cfg)}
        assert out.returncode == 1 and out.stderr == ""
    # the default file (platformdirs' place) is read too
    home_cfg = setup["home"] / ".config" / "lockwarden" / "config.toml"
    home_cfg.parent.mkdir(parents=True)
    home_cfg.write_text(cfg.read_text())
    out = lw("status", str(lock), "--json",
             env=cli_env(HOME=str(setup["home"]), XDG_CONFIG_HOME="", LOCKWARDEN_CONFIG=""))
    assert json.loads(out.stdout)["policy"]["config"] == str(home_cfg), out.stderr


def test_stale_after_on_the_command_line_wins(setup: dict[str, Path]) -> None:
    out = lw("status", str(setup["watched"]), "--json", "--config", str(setup["config"]),
             "--stale-after", "5000")
    st = json.loads(out.stdout)
    assert st["state"] == "held" and st["policy"]["source"] == "option"
    assert st["policy"]["stale_after"] == 5000.0 and out.stderr == ""


def test_a_lock_outside_the_configured_directories_says_it_uses_defaults(
        setup: dict[str, Path]) -> None:
    lock, cfg = setup["other"], setup["config"]
    out = lw("status", str(lock), "--json", "--config", str(cfg))
    st = json.loads(out.stdout)
    assert st["state"] == "held"
    assert st["policy"] == {"source": "default", "stale_after": 3600.0, "directory": None,
                            "config": str(cfg)}
    assert out.stderr == (f"lockwarden: {lock}: judged with the default stale policy (stale "
                          f"after 3600 s): not in a directory watched by {cfg}\n")
    assert lw("-q", "status", str(lock), "--config", str(cfg)).stderr == ""


def test_no_configuration_file_means_defaults_without_a_note(setup: dict[str, Path],
                                                             tmp_path: Path) -> None:
    out = lw("status", str(setup["watched"]), "--json",
             env=cli_env(LOCKWARDEN_CONFIG=str(tmp_path / "none.toml")))
    st = json.loads(out.stdout)
    assert st["state"] == "held" and st["policy"]["source"] == "default"
    assert st["policy"]["config"] is None and out.stderr == ""


def test_a_broken_configuration_is_named_and_defaults_are_used(setup: dict[str, Path],
                                                               tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(f'[[watch]\npath = "{setup["watched"].parent}"\n')
    out = lw("status", str(setup["watched"]), "--config", str(bad))
    assert out.returncode == 1 and "state: held" in out.stdout
    assert "the configuration file cannot be used: bad.toml line 1, column 8" in out.stderr
    missing = lw("status", str(setup["watched"]), "--config", str(tmp_path / "nope.toml"))
    assert missing.returncode == 3 and "no such file" in missing.stderr


def test_list_judges_each_lock_under_its_directorys_policy(setup: dict[str, Path]) -> None:
    watched, other, cfg = setup["watched"], setup["other"], setup["config"]
    out = lw("list", str(watched.parent), str(other.parent), "--json", "--config", str(cfg))
    assert out.returncode == 0, out.stderr
    by_path = {item["path"]: item for item in json.loads(out.stdout)}
    assert by_path[str(watched)]["state"] == "stale"
    assert by_path[str(watched)]["policy"]["source"] == "config"
    assert by_path[str(other)]["state"] == "held"
    assert by_path[str(other)]["policy"]["source"] == "default"
    assert out.stderr.splitlines() == [
        f"lockwarden: {other.parent}: judged with the default stale policy (stale after "
        f"3600 s): not in a directory watched by {cfg}"]
    # the text table says the same, also from a shell
    text = subprocess.run(["bash", "-c", f'"$@" list "{watched.parent}"', "_", *LW],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**ENV, "LOCKWARDEN_CONFIG": str(cfg)})
    assert text.stdout.splitlines()[1].startswith("stale"), text.stdout + text.stderr


def test_list_recursive_finds_a_configured_subdirectory(setup: dict[str, Path]) -> None:
    """``list -r`` of a parent: the lock in the configured sub-directory is judged by it."""
    out = lw("list", "-r", str(setup["watched"].parent.parent), "--json", "--config",
             str(setup["config"]))
    by_path = {item["path"]: item for item in json.loads(out.stdout)}
    assert by_path[str(setup["watched"])]["state"] == "stale"
    assert by_path[str(setup["other"])]["state"] == "held"


def test_watch_uses_the_configured_directorys_policy(setup: dict[str, Path]) -> None:
    lock, cfg = setup["watched"], setup["config"]
    proc = subprocess.Popen([*LW, "watch", str(lock.parent), "--json", "--config", str(cfg)],
                            env=ENV, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        lines = Lines(proc)
        initial: dict[str, Any] = lines.until(lambda o: o.get("path") == str(lock))
        assert initial["event"] == "initial" and initial["state"] == "stale"
        assert initial["policy"]["source"] == "config"
        lines.until(lambda o: o["event"] == "ready")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert proc.stderr is not None and proc.stderr.read() == ""
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.parametrize("env", [
    {}, {"XDG_CONFIG_HOME": "/opt/xdg"}, {"XDG_CONFIG_HOME": "relative/xdg"},
    {"LOCKWARDEN_CONFIG": "~/lw.toml"},
])
def test_the_command_lines_config_path_is_the_apps(tmp_path: Path, env: dict[str, str]) -> None:
    """core.cli.common.config_path avoids importing platformdirs; it must name the same file
    as core.config.default_config_path."""
    probe = ("from core.cli.common import config_path\n"
             "from core.config import default_config_path\n"
             "print(config_path() == default_config_path(), config_path())")
    clean = {k: v for k, v in ENV.items() if k not in ("XDG_CONFIG_HOME", "LOCKWARDEN_CONFIG")}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         env={**clean, "HOME": str(tmp_path), **env}, check=True, timeout=60)
    assert out.stdout.startswith("True "), out.stdout + out.stderr


def test_a_file_with_only_projects_keeps_the_default_directories_watched(
        tmp_path: Path) -> None:
    """A file with ``[[projects]]`` and no ``[[watch]]`` watches the default directories too
    (docs/watching.md, "Configuration"): a lock in ``/tmp`` is in one, judged under its policy
    without a note that it is not watched."""
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'[[projects]]\npath = "{tmp_path / "src"}"\n')
    fd, name = tempfile.mkstemp(prefix="lw-test-", suffix=".lock", dir="/tmp")
    os.close(fd)
    lock = Path(name)
    try:
        _old_lock(lock, dead_pid())
        out = lw("status", str(lock), "--json", "--config", str(cfg))
        st = json.loads(out.stdout)
        assert st["policy"] == {"source": "config", "stale_after": 3600.0,
                                "directory": "/tmp", "config": str(cfg)}
        assert out.stderr == "", out.stderr
    finally:
        lock.unlink()
