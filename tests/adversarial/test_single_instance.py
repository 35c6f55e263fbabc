"""The GUI's single-instance socket lives in this user's private runtime directory, never in a
place another user could take first (app/startup/single.py; docs/gui.md, "Start"). The other user is
a real second account; the directories are real. ``XDG_RUNTIME_DIR`` is always a 0700
directory of ours here: platformdirs itself ignores one that is not (and falls back to
``/tmp/runtime-<uid>``, which is then checked the same way)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from app.startup.single import InstanceLocationError, private_dir, server_name
from tests.support.second_user import second_user

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX runtime directories")


def _runtime(tmp_path: Path) -> Path:
    runtime = tmp_path / "run"
    runtime.mkdir()
    runtime.chmod(0o700)
    return runtime


def test_socket_is_in_a_private_0700_directory(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = _runtime(tmp_path)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    name = server_name("/home/me/.config/lockwarden/config.toml")
    assert Path(name).parent == runtime / "lockwarden"
    assert stat.S_IMODE(os.stat(runtime / "lockwarden").st_mode) == 0o700
    assert server_name("/other.toml") != name  # one per configuration


def test_a_too_open_directory_of_ours_is_made_private(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = _runtime(tmp_path)
    (runtime / "lockwarden").mkdir()
    (runtime / "lockwarden").chmod(0o777)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    private_dir()
    assert stat.S_IMODE(os.stat(runtime / "lockwarden").st_mode) == 0o700


def test_a_directory_another_user_prepared_is_refused(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    uid, gid = second_user()
    runtime = _runtime(tmp_path)
    theirs = runtime / "lockwarden"
    theirs.mkdir(mode=0o777)
    os.chown(theirs, uid, gid)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    with pytest.raises(InstanceLocationError, match=f"owned by UID {uid}"):
        server_name("/c.toml")


def test_a_symlink_in_its_place_is_refused(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = _runtime(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (runtime / "lockwarden").symlink_to(elsewhere)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    with pytest.raises(InstanceLocationError, match="not a directory"):
        private_dir()
