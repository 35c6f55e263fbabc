"""Inside a git directory, the names users choose -- branch names under ``refs/`` (``build/x``,
``logs/y``, ``objects/z/w``), worktree and submodule names under ``worktrees/`` and
``modules/`` -- are never taken for the directories a project walk skips (``build``,
``target``, git's ``logs``, ``hooks``, the object store's sub-directories): a lock git makes
there is listed (core/config/scope.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from core.config.model import ProjectSpec
from core.watch.scan import list_dir

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                   check=True, capture_output=True)


@needs_git
def test_locks_under_user_chosen_names_in_git_are_listed(tmp_path: Path) -> None:
    root = tmp_path / "src"
    repo = root / "app"
    repo.mkdir(parents=True)
    _git("init", "-q", cwd=repo)
    _git("commit", "-q", "--allow-empty", "-m", "one", cwd=repo)
    for branch in ("build/x", "logs/y", "objects/z/w", "target/v"):
        _git("branch", branch, cwd=repo)
    _git("worktree", "add", "-q", str(root / "logs"), "-b", "wt", cwd=repo)
    gitdir = repo / ".git"
    assert (gitdir / "worktrees" / "logs").is_dir()
    locks = [gitdir / "refs" / "heads" / "build" / "x.lock",
             gitdir / "refs" / "heads" / "logs" / "y.lock",
             gitdir / "refs" / "heads" / "objects" / "z" / "w.lock",
             gitdir / "refs" / "heads" / "target" / "v.lock",
             gitdir / "worktrees" / "logs" / "index.lock"]
    for lock in locks:
        lock.write_bytes(b"")
    skipped = [gitdir / "logs" / "HEAD.lock", gitdir / "objects" / "ab" / "x.lock"]
    (gitdir / "objects" / "ab").mkdir(exist_ok=True)
    for lock in skipped:
        lock.write_bytes(b"")
    listing = list_dir(ProjectSpec(str(root)).watch_spec())
    files = set(listing.files)
    assert {str(p) for p in locks} <= files
    assert not {str(p) for p in skipped} & files
