"""core.verdicts.devtools with real tools and real processes: git (a leftover index.lock; a real
git process working in the repository; a real `git commit -a` killed while its editor was
open), Vim in a pseudo-terminal (its swap while it runs, after :preserve with unsaved changes,
after SIGKILL), Terraform's label judged by a real POSIX lock on the state file, filelock's
SoftFileLock, and the gc.pid / Emacs / LibreOffice rules (docs/specs/devtool-locks.md)."""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import pytest

from core import formats
from core.codes import Code
from core.formats import emacs
from core.reasons import render
from core.record import Liveness, LockStatus, State
from core.verdicts.devtools import (
    GIT_GRACE,
    judge_devtool,
    judge_emacs_lock,
    judge_git_gc,
    judge_libreoffice_lock,
    judge_softfilelock,
    judge_terraform,
    judge_vim_swap,
    worktree_of,
)
from core.verdicts.liveness import hostname

DATA = Path(__file__).parents[2] / "data" / "devtools"
linux = pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux /proc")
needs = {tool: pytest.mark.skipif(shutil.which(tool) is None, reason=f"needs {tool}")
         for tool in ("git", "vim", "terraform", "emacs")}


def codes(st: LockStatus) -> list[Code]:
    return [r.code for r in st.reasons]


def _now_after(path: Path, seconds: float) -> datetime:
    return datetime.fromtimestamp(os.stat(path).st_mtime + seconds, UTC)


def _judge(path: Path, now: datetime | None = None) -> LockStatus:
    """Parse the file and judge it as a scanner would (judge_devtool)."""
    rec = formats.parse(path.read_bytes(), str(path))
    st = judge_devtool(str(path), rec, now=now or datetime.now(UTC),
                       mtime=os.stat(path).st_mtime)
    assert st is not None
    for r in st.reasons:
        assert render(r) and render(r) != r.code.value
    return st


# -- git ---------------------------------------------------------------------------------------

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_NOSYSTEM": "1"}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    env = {**os.environ, **GIT_ENV, "HOME": str(tmp_path)}
    r = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(r)], check=True, env=env)
    (r / "f.txt").write_text("one\n")
    subprocess.run(["git", "add", "f.txt"], cwd=r, check=True, env=env)
    subprocess.run(["git", "commit", "-qm", "init"], cwd=r, check=True, env=env)
    return r


@needs["git"]
def test_leftover_index_lock_without_git_is_stale(repo: Path) -> None:
    lock = repo / ".git" / "index.lock"
    lock.write_bytes((DATA / "git/index.lock.dead-git-commit").read_bytes())
    young = _judge(lock, _now_after(lock, 1))
    assert young.state is State.HELD and codes(young) == [Code.NO_GIT_WORKER, Code.GIT_LOCK_YOUNG]
    st = _judge(lock, _now_after(lock, GIT_GRACE + 1))
    assert st.state is State.STALE and st.liveness is Liveness.DEAD
    assert codes(st) == [Code.NO_GIT_WORKER, Code.GIT_REMOVE_LOCK]
    assert st.reasons[0].get("repo") == str(repo)


@needs["git"]
def test_real_git_process_in_repo_holds_it(repo: Path) -> None:
    lock = repo / ".git" / "refs" / "heads" / "main.lock"
    lock.write_bytes((DATA / "git/refs-heads-main.lock.dead-git-commit").read_bytes())
    later = _now_after(lock, GIT_GRACE + 60)
    for cwd, extra in ((repo, {}), (repo.parent, {"GIT_DIR": str(repo / ".git")})):
        git = subprocess.Popen(["git", "cat-file", "--batch-check"], cwd=cwd,
                               env={**os.environ, **extra}, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
        try:
            assert git.stdin is not None and git.stdout is not None
            git.stdin.write("HEAD\n")
            git.stdin.flush()
            assert git.stdout.readline().strip()  # git answered: it runs, in its directory
            st = _judge(lock, later)
            assert st.state is State.HELD and st.liveness is Liveness.ALIVE
            assert st.reasons[0].code is Code.GIT_WORKER and st.reasons[0].get("pid") == git.pid
        finally:
            git.kill()
            git.wait()
    assert _judge(lock, later).state is State.STALE


@needs["git"]
def test_real_git_commit_killed_with_editor_open(repo: Path, tmp_path: Path) -> None:
    """`git commit -a` holds index.lock while its editor is open (spec §2.1, observed); held
    while git runs; SIGKILLed, the lock it leaves is stale."""
    (repo / "f.txt").write_text("two\n")
    env = {**os.environ, **GIT_ENV, "HOME": str(tmp_path),
           "GIT_EDITOR": "echo editor-open; read x; true"}
    git = subprocess.Popen(["git", "commit", "-a"], cwd=repo, env=env, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True, start_new_session=True)
    lock = repo / ".git" / "index.lock"
    try:
        assert git.stdout is not None and git.stdout.readline() == "editor-open\n"
        assert lock.exists()
        st = _judge(lock, _now_after(lock, GIT_GRACE + 5))
        assert st.state is State.HELD and st.reasons[0].get("pid") == git.pid
        old = _judge(lock, _now_after(lock, 7200))
        assert codes(old) == [Code.GIT_WORKER, Code.GIT_LOCK_SUSPICIOUS]
        os.killpg(git.pid, signal.SIGKILL)
        git.wait()
    finally:
        if git.poll() is None:
            os.killpg(git.pid, signal.SIGKILL)
            git.wait()
    assert lock.exists()
    st = _judge(lock, _now_after(lock, GIT_GRACE + 5))
    assert st.state is State.STALE and Code.GIT_REMOVE_LOCK in codes(st)


@needs["git"]
def test_worktrees_and_submodules_are_found(repo: Path, tmp_path: Path) -> None:
    env = {**os.environ, **GIT_ENV, "HOME": str(tmp_path)}
    wt = tmp_path / "linked"
    subprocess.run(["git", "worktree", "add", "-q", str(wt)], cwd=repo, check=True, env=env,
                   capture_output=True)
    gitdir = repo / ".git" / "worktrees" / "linked"
    assert worktree_of(str(gitdir)) == str(wt)
    assert worktree_of(str(repo / ".git")) == str(repo)
    module = repo / ".git" / "modules" / "sub"
    module.mkdir(parents=True)
    (module / "config").write_text("[core]\n\tworktree = ../../../sub\n")
    assert worktree_of(str(module)) == str(repo / "sub")
    lock = gitdir / "index.lock"
    lock.write_bytes(b"")
    git = subprocess.Popen(["git", "cat-file", "--batch-check"], cwd=wt, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, text=True)
    try:
        assert git.stdin is not None and git.stdout is not None
        git.stdin.write("HEAD\n")
        git.stdin.flush()
        assert git.stdout.readline().strip()
        st = _judge(lock, _now_after(lock, 60))
        assert st.state is State.HELD and st.reasons[0].get("pid") == git.pid
    finally:
        git.kill()
        git.wait()


def test_git_gc_pid_rules(tmp_path: Path) -> None:
    gitdir = tmp_path / ".git"
    gitdir.mkdir()
    gc = gitdir / "gc.pid"
    gc.write_text(f"{os.getpid()} {hostname()}")
    assert _judge(gc).state is State.HELD
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    gc.write_text(f"{int(dead.stdout)} {hostname()}")
    st = _judge(gc)
    assert st.state is State.STALE and codes(st) == [Code.HOLDER_DEAD]
    gc.write_text("1 otherhost")
    st = _judge(gc)
    assert st.state is State.HELD and codes(st) == [Code.REMOTE_HOST, Code.GC_PID_REMOTE]
    st = _judge(gc, _now_after(gc, 13 * 3600))
    assert st.state is State.STALE and codes(st) == [Code.GC_PID_OLD]
    rec = formats.parse(gc.read_bytes(), str(gc))
    assert judge_git_gc(str(gc), rec, now=datetime.now(UTC), mtime=None).state is State.HELD


# -- Vim ---------------------------------------------------------------------------------------


def _read_until(fd: int, marker: bytes, seen: bytearray, timeout: float = 15.0) -> None:
    """Read the pseudo-terminal until ``marker`` appears (select: an event, no sleep)."""
    deadline = datetime.now(UTC) + timedelta(seconds=timeout)
    while marker not in seen:
        left = (deadline - datetime.now(UTC)).total_seconds()
        assert left > 0, f"{marker!r} never came; got {bytes(seen[-300:])!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:  # the terminal's other end closed
                break


@pytest.fixture
def vim(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    edited = tmp_path / "notes.txt"
    edited.write_text("hello\n")
    master, slave = os.openpty()
    env = {**os.environ, "TERM": "xterm", "HOME": str(tmp_path)}
    p = subprocess.Popen(["vim", "-u", "NONE", "-N", "-i", "NONE", str(edited)], cwd=tmp_path,
                         stdin=slave, stdout=slave, stderr=slave, env=env,
                         start_new_session=True)
    os.close(slave)
    try:
        yield p, master, edited
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
        os.close(master)


@needs["vim"]
def test_real_vim_swap_live_then_dead_dirty(vim: tuple[subprocess.Popen[bytes], int, Path]
                                            ) -> None:
    p, master, edited = vim
    seen = bytearray()
    _read_until(master, b"notes.txt", seen)
    swap = edited.parent / ".notes.txt.swp"
    assert swap.exists()
    st = _judge(swap)
    assert st.record is not None and st.record.pid == p.pid
    assert st.record.metadata["file"].endswith("notes.txt")
    assert st.record.metadata["dirty"] is False
    assert st.state is State.HELD and st.liveness is Liveness.ALIVE
    assert codes(st) == [Code.HOLDER_ALIVE] and st.reasons[0].get("name") == "vim"

    os.write(master, b"ichanged \x1b:preserve\r")
    _read_until(master, b"preserved", seen)
    live_dirty = _judge(swap)
    assert live_dirty.record is not None and live_dirty.record.metadata["dirty"] is True
    assert live_dirty.state is State.HELD

    p.send_signal(signal.SIGKILL)
    p.wait()
    dead = _judge(swap)
    assert dead.state is State.STALE and dead.liveness is Liveness.DEAD
    assert codes(dead) == [Code.HOLDER_DEAD, Code.SWAP_RECOVER]
    assert "vim -r" in render(dead.reasons[1]) and str(edited) in render(dead.reasons[1])


@needs["vim"]
def test_real_vim_killed_before_any_edit_is_clean(vim: tuple[subprocess.Popen[bytes], int, Path]
                                                  ) -> None:
    p, master, edited = vim
    _read_until(master, b"notes.txt", bytearray())
    swap = edited.parent / ".notes.txt.swp"
    p.kill()
    p.wait()
    st = _judge(swap)
    assert st.state is State.STALE and codes(st) == [Code.HOLDER_DEAD, Code.SWAP_CLEAN]


def test_vim_swap_fixture_rules(tmp_path: Path) -> None:
    rec = formats.parse((DATA / "vim/dead-dirty.notes.txt.swp").read_bytes(), "/x/.n.swp")
    now = datetime.now(UTC)
    import dataclasses

    remote = judge_vim_swap("/x/.n.swp", dataclasses.replace(rec, host="elsewhere"), now=now,
                            mtime=now.timestamp())
    assert remote.state is State.HELD and remote.liveness is Liveness.REMOTE

    mine = dataclasses.replace(rec, host=hostname(), pid=os.getpid())
    st = judge_vim_swap("/x/.n.swp", mine, now=now, mtime=now.timestamp())
    assert st.state is State.STALE and codes(st) == [Code.NOT_THE_TOOL, Code.SWAP_RECOVER]
    boot = now.timestamp() - 100
    st = judge_vim_swap("/x/.n.swp", mine, now=now, mtime=boot - 50, boot=boot)
    assert st.state is State.STALE and codes(st) == [Code.PREDATES_BOOT, Code.SWAP_RECOVER]


# -- Emacs, LibreOffice, SoftFileLock, Terraform -----------------------------------------------


def test_emacs_lock_rules(tmp_path: Path) -> None:
    link = tmp_path / ".#draft.txt"
    os.symlink(f"me@{hostname()}.{os.getpid()}", link)
    rec = emacs.parse_path(str(link))
    now = datetime.now(UTC)
    assert judge_emacs_lock(str(link), rec, now=now, mtime=None).state is State.HELD
    other_boot = emacs.parse(f"me@{hostname()}.{os.getpid()}:1000".encode(), str(link))
    st = judge_emacs_lock(str(link), other_boot, now=now, mtime=None, boot=5000.0)
    assert st.state is State.STALE and codes(st) == [Code.OTHER_BOOT]
    fixture = emacs.parse((DATA / "emacs/example-with-boottime.txt").read_bytes(), str(link))
    assert fixture.host == "laptop"
    assert judge_emacs_lock(str(link), fixture, now=now, mtime=None).liveness is Liveness.REMOTE
    dead = emacs.parse((DATA / "emacs/.#draft.txt").read_bytes(), str(link))
    import dataclasses

    st = judge_emacs_lock(str(link), dataclasses.replace(dead, host=hostname(), pid=2**31),
                          now=now, mtime=None)
    assert st.state is State.STALE and codes(st) == [Code.HOLDER_DEAD]


def test_libreoffice_lock_rules(tmp_path: Path) -> None:
    lock = tmp_path / ".~lock.report.odt#"
    lock.write_bytes((DATA / "libreoffice/.~lock.report.odt#").read_bytes().replace(
        b",vm,", b",elsewhere,"))
    assert _judge(lock).liveness is Liveness.REMOTE
    lock.write_text(f",nobody-here,{hostname()},23.11.2026 19:26,file:///p;")
    rec = formats.parse(lock.read_bytes(), str(lock))
    st = judge_libreoffice_lock(str(lock), rec, now=datetime.now(UTC), mtime=None)
    assert st.state is State.STALE and codes(st) == [Code.NO_OFFICE_PROCESS]
    profile = tmp_path / "libreoffice" / "4" / ".lock"
    profile.parent.mkdir(parents=True)
    profile.write_bytes((DATA / "libreoffice/profile-dot-lock.txt").read_bytes().replace(
        b"Host=vm", b"Host=" + hostname().encode()).replace(b"User=root", b"User=nobody-here"))
    st = _judge(profile)
    assert st.record is not None and st.record.format == "libreoffice-profile"
    assert st.state is State.STALE and codes(st) == [Code.NO_OFFICE_PROCESS]


SOFT = r"""
import sys
from filelock import SoftFileLock
lock = SoftFileLock(sys.argv[1])
lock.acquire()
print("ready", flush=True)
sys.stdin.read()
"""


@linux
def test_real_softfilelock_holder(tmp_path: Path) -> None:
    pytest.importorskip("filelock")
    path = tmp_path / "soft.lock"
    p = subprocess.Popen([sys.executable, "-c", SOFT, str(path)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
        st = _judge(path)
        assert st.record is not None and st.record.format == "softfilelock"
        assert st.record.pid == p.pid and st.state is State.HELD
        p.kill()
        p.wait()
        st = _judge(path)
        assert st.state is State.STALE and codes(st) == [Code.HOLDER_DEAD]
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
    import dataclasses

    assert st.record is not None
    reused = dataclasses.replace(st.record, pid=os.getpid(), metadata={"start_token": 12345})
    st2 = judge_softfilelock(str(path), reused, now=datetime.now(UTC), mtime=None)
    assert st2.state is State.STALE and codes(st2) == [Code.START_TOKEN_MISMATCH]


LOCKF = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
fcntl.lockf(fd, fcntl.LOCK_EX)
print("ready", flush=True)
sys.stdin.read()
"""


@linux
def test_terraform_label_judged_by_the_kernel_lock(tmp_path: Path) -> None:
    info = tmp_path / ".terraform.tfstate.lock.info"
    info.write_bytes((DATA / "terraform/.terraform.tfstate.lock.info").read_bytes())
    state = tmp_path / "terraform.tfstate"
    state.write_text("{}")
    st = _judge(info)
    assert st.state is State.STALE and codes(st) == [Code.NO_KERNEL_LOCK]
    p = subprocess.Popen([sys.executable, "-c", LOCKF, str(state)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
        st = _judge(info)
        assert st.state is State.HELD and codes(st) == [Code.KERNEL_LOCK_HELD]
        assert (st.reasons[0].get("pid"), st.reasons[0].get("kind")) == (p.pid, "POSIX")
        rec = st.record
        assert rec is not None
        st2 = judge_terraform(str(info), rec, now=datetime.now(UTC), mtime=None,
                              locks_text="")
        assert st2.state is State.STALE
    finally:
        p.kill()
        p.wait()


@needs["terraform"]
@linux
def test_real_terraform_apply_at_its_prompt(tmp_path: Path) -> None:
    """`terraform apply` waiting at its prompt holds a POSIX lock on terraform.tfstate and has
    written the label (held); SIGKILLed, the label stays and the kernel lock is gone (stale:
    a leftover label, spec §2.5)."""
    (tmp_path / "main.tf").write_text('output "x" {\n  value = 1\n}\n')
    env = {**os.environ, "TF_CLI_CONFIG_FILE": os.devnull, "CHECKPOINT_DISABLE": "1",
           "HOME": str(tmp_path)}
    subprocess.run(["terraform", "init", "-input=false", "-no-color"], cwd=tmp_path, env=env,
                   check=True, capture_output=True)
    tf = subprocess.Popen(["terraform", "apply", "-no-color"], cwd=tmp_path, env=env,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, start_new_session=True)
    info = tmp_path / ".terraform.tfstate.lock.info"
    try:
        assert tf.stdout is not None
        _read_until(tf.stdout.fileno(), b"Enter a value:", bytearray(), timeout=60)
        st = _judge(info)
        assert st.record is not None and st.record.metadata["operation"] == "OperationTypeApply"
        assert st.record.host == hostname()
        assert st.state is State.HELD and codes(st) == [Code.KERNEL_LOCK_HELD]
        family = {tf.pid} | {c.pid for c in psutil.Process(tf.pid).children(recursive=True)}
        assert st.reasons[0].get("pid") in family
    finally:
        os.killpg(tf.pid, signal.SIGKILL)
        tf.wait()
    st = _judge(info)
    assert st.state is State.STALE and codes(st) == [Code.NO_KERNEL_LOCK]


@needs["emacs"]
def test_real_emacs_lock_symlink(tmp_path: Path) -> None:
    """Emacs locks a file on its first modification with a symlink .#name ->
    USER@HOST.PID (spec §2.3); held while it runs, stale once SIGKILLed (the link stays)."""
    (tmp_path / "draft.txt").write_text("hi\n")
    code = '(progn (find-file "draft.txt") (insert "x") (princ "locked\\n") (read-string ""))'
    em = subprocess.Popen(["emacs", "-Q", "--batch", "--eval", code], cwd=tmp_path,
                          env={**os.environ, "HOME": str(tmp_path)}, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    link = tmp_path / ".#draft.txt"
    try:
        assert em.stdout is not None and em.stdout.readline() == b"locked\n"
        assert link.is_symlink()
        rec = emacs.parse_path(str(link))
        assert (rec.pid, rec.host, rec.metadata["symlink"]) == (em.pid, hostname(), True)
        st = judge_emacs_lock(str(link), rec, now=datetime.now(UTC), mtime=None)
        assert st.state is State.HELD and codes(st) == [Code.HOLDER_ALIVE]
    finally:
        em.kill()
        em.wait()
    assert link.is_symlink()
    st = judge_emacs_lock(str(link), emacs.parse_path(str(link)), now=datetime.now(UTC),
                          mtime=None)
    assert st.state is State.STALE and codes(st) == [Code.HOLDER_DEAD]
