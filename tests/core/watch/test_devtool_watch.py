"""The watcher with developer tools' locks: a git lock held by a real git process turns stale
when that process dies, without any file event (its PID is the record's ``pid_found``, so the
liveness pass re-judges it); a git lock with no git process turns stale when it reaches the
git-lock stale limit (a deadline, no event); an empty file under a real kernel lock is held,
and re-judged when its holder exits."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from core.codes import Code
from core.config import WatchSpec
from core.record import State

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
linux = pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux /proc/locks")


def _old(path: Path, seconds: float) -> None:
    st = os.stat(path)
    os.utime(path, (st.st_atime - seconds, st.st_mtime - seconds))


@needs_git
def test_git_lock_turns_stale_when_its_git_process_dies(watch: Any, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    lock = repo / ".git" / "index.lock"
    lock.write_bytes(b"")
    _old(lock, 60)
    git = subprocess.Popen(["git", "cat-file", "--batch-check"], cwd=repo, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    try:
        assert git.stdin is not None and git.stdout is not None
        git.stdin.write("HEAD\n")
        git.stdin.flush()
        assert git.stdout.readline().strip()
        _w, rec = watch([WatchSpec(str(repo / ".git"), patterns=["*.lock"])],
                        liveness_interval=0.2)
        p = str(lock)
        rec.until(lambda m: p in m and m[p].state is State.HELD, what="held by git")
        held = rec.model[p]
        assert held.reasons[0].code is Code.GIT_WORKER
        assert held.record is not None and held.record.pid == git.pid
        git.kill()
        git.wait()
        rec.until(lambda m: m[p].state is State.STALE, what="stale once git died")
        assert rec.model[p].file == held.file  # no file event: the same file
    finally:
        if git.poll() is None:
            git.kill()
            git.wait()


@needs_git
def test_young_git_lock_turns_stale_at_its_limit(watch: Any, tmp_path: Path) -> None:
    gitdir = tmp_path / "r" / ".git"
    gitdir.mkdir(parents=True)
    lock = gitdir / "HEAD.lock"
    lock.write_bytes(b"")
    spec = WatchSpec(str(gitdir), patterns=["*.lock"], format_stale_after={"git-lock": 0.5})
    _w, rec = watch([spec])
    p = str(lock)
    rec.until(lambda m: p in m and m[p].state is State.STALE, what="stale at 0.5 s")
    assert [r.code for r in rec.model[p].reasons] == [Code.NO_GIT_WORKER, Code.GIT_REMOVE_LOCK]


HOLD = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
print("ready", flush=True)
sys.stdin.read()
"""


@linux
def test_empty_kernel_locked_file_is_held(watch: Any, lockdir: Path) -> None:
    anchor = lockdir / "cargo.lock"
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(anchor)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
        _old(anchor, 7200)
        _w, rec = watch([WatchSpec(str(lockdir))])
        rec.until(lambda m: str(anchor) in m and m[str(anchor)].state is State.HELD,
                  what="held by the kernel lock")
        assert rec.model[str(anchor)].reasons[0].code is Code.KERNEL_LOCK_HELD
        p.kill()
        p.wait()
        # no file event: the liveness pass re-judges it once its holder is gone
        rec.until(lambda m: m[str(anchor)].state is State.FREE, what="free once released")
        assert rec.model[str(anchor)].reasons[0].code is Code.EMPTY_FREE
    finally:
        p.kill()
        p.wait()
