"""Lockwarden running as root never writes a root-owned ``.lock_audit.log`` into another user's
directory (docs/audit.md, "Where entries go"): ``release --force`` through a symlinked
directory that leads into the second test account's area put one there, which that user could
neither append to nor trust. The entry goes to root's own log, saying why, and the directory
is left as it was. Real accounts, a real symlink, the real command line."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import ENV, LW
from tests.support.second_user import USER2, second_user


@pytest.fixture
def their_area(shared_tmp: Path) -> Iterator[tuple[Path, Path]]:
    """The second account's directory holding its stale lock, and a symlink to it elsewhere
    (as someone could plant in /tmp); yields (symlink, real directory)."""
    uid, gid = second_user()
    area = shared_tmp / "home-of-lwtest2"
    area.mkdir()
    lock = area / "build.lock"
    lock.write_text(f"pid=999999\ntimestamp={int(time.time()) - 7200}\n")
    os.chown(lock, uid, gid)
    os.chown(area, uid, gid)
    area.chmod(0o755)
    link = shared_tmp / "innocent"
    link.symlink_to(area, target_is_directory=True)
    yield link, area


def test_root_forcing_through_a_symlinked_directory_writes_no_log_there(
        their_area: tuple[Path, Path], tmp_path: Path) -> None:
    link, area = their_area
    env = {**ENV, "XDG_STATE_HOME": str(tmp_path / "state")}
    out = subprocess.run([*LW, "release", str(link / "build.lock"), "--force", "--reason",
                          "test"], capture_output=True, text=True, timeout=120, env=env,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert not (area / ".lock_audit.log").exists()
    assert sorted(p.name for p in area.iterdir()) == []  # the lock went to the trash
    own = tmp_path / "state" / "lockwarden" / "log" / "audit.log"
    entries = [json.loads(line) for line in own.read_text().splitlines()]
    assert [e["operation"] for e in entries] == ["force_release"], entries


def test_the_entry_says_why_it_went_to_roots_own_log(
        their_area: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from core.audit import append

    link, area = their_area
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    written = append(str(link / "build.lock"), "force_release", result="ok")
    assert written.fallback and not (area / ".lock_audit.log").exists()
    assert written.reason is not None
    assert f"belongs to another user ({USER2}" in written.reason
    assert f"(really {area})" in written.reason  # the symlink followed is named


def test_root_in_its_own_directory_keeps_the_directory_log(tmp_path: Path) -> None:
    lock = tmp_path / "mine.lock"
    taken = subprocess.run([*LW, "try", str(lock), "--pid", str(os.getpid())],
                           capture_output=True, text=True, timeout=120, env=ENV, check=False)
    assert taken.returncode == 0, taken.stderr
    assert (tmp_path / ".lock_audit.log").exists()
