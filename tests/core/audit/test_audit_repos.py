"""Nothing is written into a git repository (docs/audit.md, "Where entries go"): the audit
entries of locks in a working tree, in ``.git``, in a bare repository or in a linked worktree go
to the user's own log, with the reason; ``git status`` stays clean. Real ``git``, real CLI
processes through ``bash -c``; a directory outside any repository keeps its own log."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from core import audit
from tests.support.cli import lw

GIT = shutil.which("git")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(GIT is None, reason="git is not installed (CI installs it)"),
]


def git(*args: str, cwd: Path) -> str:
    assert GIT is not None
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org"}
    return subprocess.run([GIT, "-c", "init.defaultBranch=main", *args], cwd=cwd, env=env,
                          check=True, capture_output=True, text=True, timeout=60).stdout


def user_log(tmp_path: Path) -> Path:
    return tmp_path / "state" / "lockwarden" / "log" / "audit.log"


def logs_under(d: Path) -> list[Path]:
    return sorted(d.rglob(".lock_audit.log"))


def test_locks_in_a_working_tree_and_in_dot_git_are_audited_in_the_users_log(
        tmp_path: Path, private_state: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    (repo / "README").write_text("hello\n")
    git("add", "README", cwd=repo)
    git("commit", "-q", "-m", "first", cwd=repo)
    build = repo / "build"
    build.mkdir()
    lock = build / "b.lock"
    assert lw("try", str(lock), "--tag", "nightly").returncode == 0
    foreign = repo / "deploy.lock"
    foreign.write_text("pid=999999\ntimestamp=1700000000\n")
    assert lw("release", str(foreign), "--force", "--reason", "test").returncode == 0
    index_lock = repo / ".git" / "index.lock"
    index_lock.write_bytes(b"")
    os.utime(index_lock, (1_700_000_000, 1_700_000_000))
    assert lw("release", str(index_lock), "--force", "--reason", "crashed").returncode == 0
    out = lw("release", str(lock), "--pid", str(os.getppid()))  # refused: not ours
    assert out.returncode == 1

    assert git("status", "--porcelain", "--untracked-files=all", cwd=repo) == "?? build/b.lock\n"
    assert logs_under(repo) == []
    ops = [(e.operation, e.lock_path) for e in audit.read(str(user_log(tmp_path)))]
    assert ops == [("acquire", str(lock)), ("force_release", str(foreign)),
                   ("force_release", str(index_lock)), ("release_refused", str(lock))]
    out = lw("audit", str(repo), "--json")  # the repository's entries, from your log
    assert out.returncode == 0, out.stderr
    assert [(e["operation"], e["lockPath"]) for e in json.loads(out.stdout)] == ops
    assert "in a git repository" in out.stderr and str(user_log(tmp_path)) in out.stderr


def test_bare_repositories_and_linked_worktrees_too(tmp_path: Path, private_state: Path) -> None:
    bare = tmp_path / "shared.git"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    main = tmp_path / "main"
    git("clone", "-q", str(bare), str(main), cwd=tmp_path)
    (main / "f").write_text("x\n")
    git("add", "f", cwd=main)
    git("commit", "-q", "-m", "f", cwd=main)
    linked = tmp_path / "linked"
    git("worktree", "add", "-q", str(linked), cwd=main)
    assert (linked / ".git").is_file()  # "gitdir: ..."
    for lock in (bare / "refs" / "x.lock", linked / "sub" / "y.lock"):
        lock.parent.mkdir(parents=True, exist_ok=True)
        out = lw("try", str(lock))
        assert out.returncode == 0, out.stderr
        assert lw("release", str(lock), "--force", "--reason", "t").returncode == 0
    assert logs_under(bare) == [] and logs_under(linked) == [] and logs_under(main) == []
    for tree in (main, linked):
        assert git("status", "--porcelain", "--untracked-files=all", cwd=tree) == ""
    assert len(audit.read(str(user_log(tmp_path)))) == 4


def test_the_reason_is_given_and_other_directories_keep_their_own_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", cwd=repo)
    w = audit.append(str(repo / "x.lock"), "acquire")
    assert w.fallback and w.log_path == str(user_log(tmp_path))
    assert w.reason is not None and f"git repository {repo}" in w.reason
    plain = tmp_path / "plain"
    plain.mkdir()
    w = audit.append(str(plain / "x.lock"), "acquire")
    assert not w.fallback and w.log_path == str(plain / ".lock_audit.log")
    assert audit.repository_of(str(repo / ".git" / "refs" / "heads")) == str(repo / ".git")
    assert audit.repository_of(str(plain)) is None
