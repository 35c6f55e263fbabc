"""A file only the kernel locks (flock(1), Python's fcntl; filelock's FileLock, dpkg...) is never
deleted or replaced by a forced release or reclaim: that would not release the kernel lock and
would let a second holder in (docs/engine.md, "What force may remove"). It is shown with its
tool, kind and holder PID (``--json`` ``tool``/``kind``; the ``list`` table's KIND column) and
a safe action in words. Real flock(1) processes on real files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import lw, one_line

pytestmark = pytest.mark.skipif(shutil.which("flock") is None or not os.path.exists("/proc/locks"),
                                reason="flock(1) and /proc/locks (Linux) are needed")


@pytest.fixture
def held(lockdir: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """An empty file held by a real ``flock(1)`` until the test ends; yields it and the holder
    (the kernel names the flock process: it took the lock before exec'ing ``cat``)."""
    path = lockdir / "cargo.lock"
    path.write_bytes(b"")
    proc = subprocess.Popen(["flock", str(path), "sh", "-c", "echo locked; exec cat"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    try:
        yield path, proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@pytest.mark.slow
def test_kernel_lock_is_shown_with_tool_kind_and_pid(held: tuple[Path, subprocess.Popen[str]]
                                                     ) -> None:
    path, _proc = held
    st = json.loads(lw("status", str(path), "--json").stdout)
    assert (st["state"], st["tool"], st["kind"]) == ("held", "kernel", "kernel")
    assert [r["code"] for r in st["reasons"]] == ["kernel_lock_held"]
    pid = st["reasons"][0]["pid"]
    assert isinstance(pid, int) and pid > 0
    text = lw("status", str(path)).stdout
    assert "kind: kernel" in text and "safe action: leave it" in text
    table = lw("list", str(path.parent)).stdout.splitlines()
    assert table[0].split()[:6] == ["STATE", "AGE", "PID", "LIVENESS", "FORMAT", "KIND"]
    row = next(r for r in table if r.endswith(str(path)))
    assert row.split()[2] == str(pid) and row.split()[5] == "kernel"


@pytest.mark.parametrize("verb", ["release", "reclaim"])
def test_force_never_deletes_a_kernel_held_file(held: tuple[Path, subprocess.Popen[str]],
                                                verb: str) -> None:
    path, proc = held
    ino = path.stat().st_ino
    out = lw(verb, str(path), "--force", "--reason", "looks stuck")
    assert out.returncode == 1, out.stderr
    assert "holds a kernel lock" in one_line(out.stderr)
    assert path.stat().st_ino == ino and proc.poll() is None


def test_once_the_holder_exits_it_is_an_ordinary_empty_file(
        held: tuple[Path, subprocess.Popen[str]]) -> None:
    path, proc = held
    assert proc.stdin is not None
    proc.stdin.close()  # cat ends, flock(1) exits: the kernel drops the lock
    assert proc.wait(timeout=30) == 0
    out = lw("status", str(path), "--json")
    st = json.loads(out.stdout)
    assert out.returncode == 0 and st["state"] == "free" and not st["locked"]
    assert [r["code"] for r in st["reasons"]] == ["empty_free"]
    assert lw("release", str(path), "--force", "--reason", "left over").returncode == 0
    assert not path.exists()


@pytest.mark.slow
def test_kill_holder_ends_the_holder_and_a_child_keeps_the_inherited_lock(
        held: tuple[Path, subprocess.Popen[str]]) -> None:
    """``kill-holder`` (confirmed with ``--yes``) ends the process the kernel names; flock(1)'s
    child, which inherited the locked descriptor, still holds the lock and is named next;
    ending it frees the file. Without a terminal and without ``--yes`` nothing is ended."""
    import psutil

    path, proc = held
    assert lw("kill-holder", str(path)).returncode == 2  # no terminal, no --yes
    assert proc.poll() is None
    first = json.loads(lw("status", str(path), "--json").stdout)["reasons"][0]["pid"]
    out = lw("kill-holder", str(path), "--yes", "--reason", "hung")
    assert out.returncode == 0 and f"PID {first}" in out.stdout, out.stderr
    assert proc.wait(timeout=30) != 0  # flock(1) itself was ended
    child = json.loads(lw("status", str(path), "--json").stdout)
    assert child["kind"] == "kernel", child  # the child's inherited descriptor keeps it held
    second = child["reasons"][0]["pid"]
    assert second != first and psutil.Process(second).name() == "cat"
    assert lw("kill-holder", str(path), "--yes", "--reason", "hung too").returncode == 0
    psutil.Process(second).wait(timeout=30)
    assert json.loads(lw("status", str(path), "--json").stdout)["state"] == "free"
    from core import audit

    ops = [(e.operation, e.details.get("pid")) for e in audit.read(str(path.parent))]
    assert ops == [("end_holder", first), ("end_holder", second)]


def test_a_flocked_file_with_content_is_never_forced_either(lockdir: Path) -> None:
    """Not only empty anchors: a daemon's pidfile it keeps flock'ed (content and a kernel lock)
    is refused too -- deleting it would let a second instance start."""
    path = lockdir / "daemon.pid"
    path.write_text("4242\n")
    proc = subprocess.Popen(["flock", str(path), "sh", "-c", "echo locked; exec cat"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        out = lw("release", str(path), "--force", "--reason", "looks stale")
        assert out.returncode == 1 and "holds a kernel lock" in one_line(out.stderr)
        assert path.read_text() == "4242\n"
    finally:
        proc.kill()
        proc.wait()


def test_end_holder_signals_only_the_confirmed_pid(
        held: tuple[Path, subprocess.Popen[str]]) -> None:
    from core.engine.end_holder import NotKernelHeld, end_holder

    path, proc = held
    with pytest.raises(NotKernelHeld):
        end_holder(str(path), reason="test", expected_pid=proc.pid + 1_000_000)
    assert proc.poll() is None  # nothing was signalled
