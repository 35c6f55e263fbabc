"""Forced operations never simply unlink a foreign file with content (docs/engine.md, "Nothing
is simply unlinked", "Unsaved work"): the desktop trash (send2trash's XDG trash), else the
quarantine folder, the audit entry and the CLI saying where; a Lockwarden lock or an empty file
is still unlinked; a Vim swap with unsaved changes needs ``--discard-unsaved``; the way back
(``core.engine.trash.restore``) never overwrites a lock taken meanwhile.

Real processes through ``bash -c``, a real Vim, real files; each CLI run gets its own HOME,
XDG_DATA_HOME (the trash and the quarantine) and XDG_STATE_HOME.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from core import audit
from core.errors import LockHeld
from tests.support.cli import cli_env, lw
from tests.support.editors import dirty_vim_swap


class Env:
    """A private user for CLI runs (``lw(..., env=env.vars)``): HOME, XDG_DATA_HOME (trash,
    quarantine), XDG_STATE_HOME (the per-user audit log)."""

    def __init__(self, base: Path) -> None:
        self.home = base / "home"
        self.data = base / "data"
        self.state = base / "state"
        self.home.mkdir()
        self.vars = cli_env(HOME=str(self.home), XDG_DATA_HOME=str(self.data),
                            XDG_STATE_HOME=str(self.state))

    @property
    def trash(self) -> Path:
        return self.data / "Trash"

    @property
    def quarantine(self) -> Path:
        return self.data / "lockwarden" / "quarantine"


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


@pytest.fixture
def sleeper() -> Iterator[int]:
    """A live process whose PID a foreign tool's lock records."""
    p = subprocess.Popen(["sleep", "600"])
    try:
        yield p.pid
    finally:
        p.kill()
        p.wait()


def foreign_lock(path: Path, pid: int) -> bytes:
    """A sema lock written by a shell script, as sema itself writes it (no token: not ours)."""
    subprocess.run(["bash", "-c", 'printf "pid=%s\\ntimestamp=%s\\ntag=deploy v2\\n" "$1" '
                    '"$(date +%s)" > "$0"', str(path), str(pid)], check=True)
    return path.read_bytes()


def last_entry(directory: Path, operation: str) -> Any:
    return [e for e in audit.read(str(directory)) if e.operation == operation][-1]


def test_force_release_moves_a_foreign_lock_to_the_trash_and_says_where(
        env: Env, lockdir: Path, sleeper: int) -> None:
    lock = lockdir / "deploy.lock"
    data = foreign_lock(lock, sleeper)
    out = lw("release", str(lock), "--force", "--reason", "holder hung", env=env.vars)
    assert out.returncode == 0, out.stderr
    assert not lock.exists()
    trashed = env.trash / "files" / "deploy.lock"  # the lock's own name, not a temp name
    assert trashed.read_bytes() == data
    info = (env.trash / "info" / "deploy.lock.trashinfo").read_text()
    assert f"Path={lock}" in unquote(info)  # the file manager's Restore puts it back there
    assert f"the file is in the trash ({trashed})" in out.stdout
    entry = last_entry(lockdir, "force_release")
    st = trashed.stat()  # the very file put away: Undo puts back only it
    assert entry.details["kept"] == {"method": "trash", "path": str(trashed),
                                     "original": str(lock),
                                     "info": str(env.trash / "info" / "deploy.lock.trashinfo"),
                                     "dev": st.st_dev, "ino": st.st_ino,
                                     "sha256": hashlib.sha256(data).hexdigest()}
    assert entry.details["displaced"]["pid"] == sleeper
    assert not [p for p in lockdir.iterdir() if p.name != ".lock_audit.log"]  # no temp name left


@pytest.mark.slow
def test_a_second_trashed_lock_of_the_same_name_keeps_both(env: Env, lockdir: Path,
                                                           sleeper: int) -> None:
    lock = lockdir / "deploy.lock"
    first = foreign_lock(lock, sleeper)
    assert lw("release", str(lock), "--force", "--reason", "one", env=env.vars).returncode == 0
    lock.write_bytes(first + b"# again\n")
    out = lw("release", str(lock), "--force", "--reason", "two", "--json", env=env.vars)
    assert out.returncode == 0, out.stderr
    kept = json.loads(out.stdout)["kept"]
    assert kept["path"] == str(env.trash / "files" / "deploy 1.lock")
    assert (env.trash / "files" / "deploy.lock").read_bytes() == first
    assert (env.trash / "files" / "deploy 1.lock").read_bytes() == first + b"# again\n"


@pytest.mark.slow
def test_lockwarden_locks_and_empty_files_are_still_unlinked(env: Env, lockdir: Path,
                                                             sleeper: int) -> None:
    ours = lockdir / "ours.lock"
    assert lw("try", str(ours), "--pid", str(sleeper), env=env.vars).returncode == 0
    assert b"token=" in ours.read_bytes()
    out = lw("release", str(ours), "--force", "--reason", "ours", "--json", env=env.vars)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["kept"] is None and not ours.exists()
    empty = lockdir / "empty.lock"
    empty.write_bytes(b"")
    os.utime(empty, (time.time() - 7200, time.time() - 7200))
    out = lw("release", str(empty), "--force", "--reason", "empty", env=env.vars)
    assert out.returncode in (0, 1), out.stderr  # an empty file may be judged free
    assert not empty.exists()
    assert not (env.trash / "files").exists() and not env.quarantine.exists()


def test_force_reclaim_keeps_the_foreign_lock_it_replaces(env: Env, lockdir: Path,
                                                          sleeper: int) -> None:
    lock = lockdir / "deploy.lock"
    data = foreign_lock(lock, sleeper)
    out = lw("reclaim", str(lock), "--force", "--reason", "operator", "--json", env=env.vars)
    assert out.returncode == 0, out.stderr
    kept = json.loads(out.stdout)["kept"]
    assert kept["method"] == "trash"
    assert Path(kept["path"]).read_bytes() == data
    assert b"token=" in lock.read_bytes()  # ours now
    entry = last_entry(lockdir, "reclaim")
    assert entry.details["kept"]["path"] == kept["path"] and entry.details["forced"] is True


def test_without_a_usable_trash_the_file_goes_to_quarantine(env: Env, lockdir: Path,
                                                            sleeper: int) -> None:
    env.data.mkdir()
    env.trash.write_text("not a directory: no trash can be made here\n")
    lock = lockdir / "deploy.lock"
    data = foreign_lock(lock, sleeper)
    out = lw("release", str(lock), "--force", "--reason", "no trash", env=env.vars)
    assert out.returncode == 0, out.stderr
    [kept] = list(env.quarantine.iterdir())
    assert kept.name.endswith("-deploy.lock") and kept.read_bytes() == data
    assert f"the file is in quarantine ({kept})" in out.stdout
    assert oct(env.quarantine.stat().st_mode & 0o777) == "0o700"
    assert last_entry(lockdir, "force_release").details["kept"]["method"] == "quarantine"


def test_a_file_that_cannot_be_kept_is_not_removed(env: Env, lockdir: Path,
                                                   sleeper: int) -> None:
    env.vars["XDG_DATA_HOME"] = "/dev/null/nowhere"  # neither trash nor quarantine can exist
    lock = lockdir / "deploy.lock"
    data = foreign_lock(lock, sleeper)
    out = lw("release", str(lock), "--force", "--reason", "nowhere to keep it", env=env.vars)
    assert out.returncode == 3, out.stderr
    [line] = out.stderr.strip().splitlines()
    assert "could not be kept" in line and "not removed" in line
    assert lock.read_bytes() == data
    assert not [p for p in lockdir.iterdir() if p.name not in (".lock_audit.log", "deploy.lock")]


def test_a_vim_swap_with_unsaved_changes_needs_discard_unsaved(env: Env, tmp_path: Path) -> None:
    swap, edited = dirty_vim_swap(tmp_path)
    data = swap.read_bytes()
    out = lw("release", str(swap), "--force", "--reason", "cleanup", env=env.vars)
    assert out.returncode == 1
    [line] = out.stderr.strip().splitlines()
    assert f"`vim -r {edited}`" in line and "--discard-unsaved" in line
    assert swap.read_bytes() == data
    refused = last_entry(tmp_path, "release_refused")
    assert refused.result == "refused" and refused.details["unsaved"]["tool"] == "Vim"

    out = lw("release", str(swap), "--force", "--discard-unsaved", "--reason", "cleanup",
             env=env.vars)
    assert out.returncode == 0, out.stderr
    trashed = env.trash / "files" / swap.name
    assert trashed.read_bytes() == data and not swap.exists()
    assert f"the file is in the trash ({trashed})" in out.stdout


def test_an_emacs_lock_whose_auto_save_file_exists_needs_discard_unsaved(
        env: Env, lockdir: Path) -> None:
    lock = lockdir / ".#notes.txt"  # where symlinks fail, Emacs writes the text to a file
    lock.write_text(f"dev@{os.uname().nodename}.999999:1\n")
    auto_save = lockdir / "#notes.txt#"
    auto_save.write_text("the changes Emacs auto-saved\n")
    out = lw("release", str(lock), "--force", "--reason", "emacs crashed", env=env.vars)
    assert out.returncode == 1
    assert "recover-file" in out.stderr and str(auto_save) in out.stderr
    assert lock.exists() and auto_save.exists()
    auto_save.unlink()
    out = lw("release", str(lock), "--force", "--reason", "emacs crashed", env=env.vars)
    assert out.returncode == 0, out.stderr
    assert (env.trash / "files" / lock.name).exists()


def test_the_api_refuses_unsaved_work_and_restores_a_kept_file(tmp_path: Path) -> None:
    from core.engine.operations import force_release_kept
    from core.engine.trash import restore
    from core.errors import UnsavedChanges

    swap, _edited = dirty_vim_swap(tmp_path)
    data = swap.read_bytes()
    with pytest.raises(UnsavedChanges) as refused:
        force_release_kept(swap, reason="test")
    assert refused.value.reason.get("recover") == f"vim -r {tmp_path / 'notes.txt'}"
    done = force_release_kept(swap, reason="test", discard_unsaved=True)
    assert done.kept is not None and not swap.exists()
    assert Path(done.kept.path).read_bytes() == data
    back = restore(done.kept, reason="undo")
    assert swap.read_bytes() == data and not Path(done.kept.path).exists()
    assert back.record is not None and back.record.format == "vim-swap"
    entry = last_entry(tmp_path, "restore")
    assert entry.details["kept"]["path"] == done.kept.path


def test_restore_never_overwrites_a_lock_taken_meanwhile(lockdir: Path, sleeper: int) -> None:
    from core.engine.operations import force_release_kept
    from core.engine.trash import restore

    lock = lockdir / "deploy.lock"
    data = foreign_lock(lock, sleeper)
    done = force_release_kept(lock, reason="test")
    assert done.kept is not None
    successor = foreign_lock(lock, os.getpid())
    with pytest.raises(LockHeld, match="taken again"):
        restore(done.kept)
    assert lock.read_bytes() == successor
    assert Path(done.kept.path).read_bytes() == data  # still in the trash


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs mounted at a fresh directory: another file system than the home's (root only;
    skipped where mounting is not allowed)."""
    top = tmp_path / "mnt"
    top.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs",
                                            str(top)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield top
    finally:
        audit.close_logs()  # this process keeps its logs open a moment
        subprocess.run(["umount", str(top)], check=True)


def test_on_another_mount_the_trash_is_the_mounts_own_but_never_in_a_repository(
        env: Env, mounted: Path, sleeper: int) -> None:
    lock = mounted / "deploy.lock"
    data = foreign_lock(lock, sleeper)
    out = lw("release", str(lock), "--force", "--reason", "other mount", env=env.vars)
    assert out.returncode == 0, out.stderr
    trashed = mounted / f".Trash-{os.getuid()}" / "files" / "deploy.lock"
    assert trashed.read_bytes() == data  # send2trash's rule: the mount's own trash
    shutil.rmtree(mounted / f".Trash-{os.getuid()}")
    (mounted / ".lock_audit.log").unlink()  # written before there was a repository
    subprocess.run(["git", "init", "-q", str(mounted)], check=True)  # the mount is a repository
    foreign_lock(lock, sleeper)
    out = lw("release", str(lock), "--force", "--reason", "in a repository", env=env.vars)
    assert out.returncode == 0, out.stderr
    assert "the file is in quarantine" in out.stdout
    assert subprocess.run(["git", "-C", str(mounted), "status", "--porcelain"],
                          capture_output=True, text=True, check=True).stdout == ""
