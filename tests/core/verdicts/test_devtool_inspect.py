"""The developer tools' locks through core.verdicts.inspect and core.watch.scan: an empty file under
a real kernel lock is held (never stale), an empty git HEAD.lock is a git lock, an Emacs symlink and
a Vim swap over 64 KiB are read by the scanner, and a leftover git lock is judged by
core.verdicts.devtools (docs/verdicts.md, "Developer tools' locks")."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from core.codes import Code
from core.config import WatchSpec
from core.record import LockStatus, State
from core.verdicts.inspect import inspect
from core.verdicts.liveness import hostname
from core.watch.scan import scan_dir

DATA = Path(__file__).parents[2] / "data" / "devtools"
linux = pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux /proc/locks")

HOLD = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.flock(fd, fcntl.LOCK_EX)
print("ready", flush=True)
sys.stdin.read()
"""


def codes(st: LockStatus) -> list[Code]:
    return [r.code for r in st.reasons]


def _old(path: Path, seconds: float = 7200) -> None:
    t = datetime.now(UTC).timestamp() - seconds
    os.utime(path, (t, t), follow_symlinks=False)


@linux
def test_empty_file_under_a_kernel_lock_is_held_not_stale(tmp_path: Path) -> None:
    # a name no tool's anchor rule knows (cargo's .cargo-lock is a known anchor, free when
    # unheld: tests/core/kernel/test_kernel_anchors.py)
    anchor = tmp_path / "build.lock"
    anchor.write_bytes(b"")
    _old(anchor)
    assert inspect(str(anchor)).state is State.FREE  # empty, old, nobody holds it: free
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(anchor)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
        st = inspect(str(anchor))
        assert st.state is State.HELD and codes(st) == [Code.KERNEL_LOCK_HELD]
        assert st.reasons[0].get("pid") == p.pid and st.reasons[0].get("kind") == "FLOCK"
        assert st.evidence.pid == p.pid
    finally:
        p.kill()
        p.wait()
    assert inspect(str(anchor)).state is State.FREE


def test_empty_git_head_lock_is_a_git_lock(tmp_path: Path) -> None:
    gitdir = tmp_path / "repo" / ".git"
    gitdir.mkdir(parents=True)
    lock = gitdir / "HEAD.lock"
    lock.write_bytes(b"")
    _old(lock, 60)
    st = inspect(str(lock))
    assert st.record is not None and st.record.format == "git-lock"
    assert st.state is State.STALE and codes(st) == [Code.NO_GIT_WORKER, Code.GIT_REMOVE_LOCK]


def test_scan_reads_emacs_symlinks_and_big_vim_swaps(tmp_path: Path) -> None:
    link = tmp_path / ".#draft.txt"
    os.symlink(f"me@{hostname()}.{os.getpid()}", link)
    dead = tmp_path / ".#old.txt"
    os.symlink(f"me@{hostname()}.{2**31}:1", dead)
    swap = tmp_path / ".notes.txt.swp"
    swap.write_bytes((DATA / "vim/dead-dirty.notes.txt.swp").read_bytes() + b"\0" * 70_000)
    other = tmp_path / ".#plain"
    os.symlink("/etc/passwd", tmp_path / "x.lock")  # any other symlink stays unreadable
    other.write_text("not a lock")
    _old(other, 60)
    spec = WatchSpec(path=str(tmp_path), patterns=[".#*", ".*.swp", "*.lock"])
    found = {Path(st.path).name: st for st in scan_dir(spec)}
    assert found[".#draft.txt"].state is State.HELD
    assert found[".#draft.txt"].record is not None
    assert found[".#draft.txt"].record.pid == os.getpid()
    assert found[".#old.txt"].state is State.STALE
    vim = found[".notes.txt.swp"]
    assert vim.record is not None and vim.record.format == "vim-swap"
    assert vim.record.metadata["dirty"] is True and vim.record.host == "vm"
    assert found["x.lock"].state is State.UNREADABLE
    assert found[".#plain"].state is State.UNREADABLE


def test_terraform_label_through_inspect(tmp_path: Path) -> None:
    info = tmp_path / ".terraform.tfstate.lock.info"
    info.write_bytes((DATA / "terraform/.terraform.tfstate.lock.info").read_bytes())
    st = inspect(str(info), now=datetime.now(UTC) + timedelta(seconds=1))
    assert st.record is not None and st.record.format == "terraform-lock-info"
    assert st.state is State.STALE and codes(st) == [Code.NO_KERNEL_LOCK]
