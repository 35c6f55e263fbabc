"""``release --force`` / ``reclaim --force`` never delete or overwrite what is not a lock
(docs/engine.md, "What force may remove"): a text file, a binary, a file over 64 KiB, the
audit log, the guard file, a directory, a FIFO, a device. Real CLI processes on real files;
each refusal leaves the file byte for byte as it was and audits nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core import audit
from core.codes import ReadOnlyKind
from core.engine.operations import force_release
from core.errors import ReadOnlyLock
from core.fsutil import AUDIT_LOG_NAME, GUARD_FILE_NAME
from tests.support.cli import dead_pid, lw, one_line

OLD = 1_700_000_000  # mtime long past the writing grace


def _operations(d: Path) -> list[str | None]:
    if not (d / AUDIT_LOG_NAME).exists():
        return []
    return [e.operation for e in audit.read(str(d))]


@pytest.mark.parametrize("content", [
    b"meeting notes: do not delete\n",           # text no format reads
    bytes(range(256)) * 4,                        # binary
    b"x" * (64 * 1024 + 1),                       # over the 64 KiB a lock can be
], ids=["text", "binary", "huge"])
@pytest.mark.parametrize("verb", ["release", "reclaim"])
def test_force_refuses_a_file_no_format_reads(lockdir: Path, content: bytes, verb: str) -> None:
    victim = lockdir / "notes.lock"
    victim.write_bytes(content)
    os.utime(victim, (OLD, OLD))
    out = lw(verb, str(victim), "--force", "--reason", "cleanup")
    assert out.returncode == 3, out.stderr
    one_line(out.stderr)
    assert victim.read_bytes() == content
    assert _operations(lockdir) == []


def test_force_refuses_a_young_file_being_written(lockdir: Path) -> None:
    """A non-empty file no format reads yet (a writer half-way): not a lock, not removed."""
    victim = lockdir / "half.lock"
    victim.write_bytes(b"pid=")
    assert lw("release", str(victim), "--force").returncode == 3
    assert victim.read_bytes() == b"pid="


@pytest.mark.slow
@pytest.mark.parametrize("name", [AUDIT_LOG_NAME, GUARD_FILE_NAME])
def test_force_never_touches_the_engines_own_files(lockdir: Path, name: str) -> None:
    holder = lockdir / "a.lock"
    assert lw("try", str(holder), "--pid", str(os.getpid()), "-q").returncode == 0
    own = lockdir / name
    if not own.exists():
        own.write_bytes(b"")
    before = own.read_bytes()
    for verb in ("release", "reclaim"):
        out = lw(verb, str(own), "--force", "--reason", "x")
        assert out.returncode == 3 and "never a lock" in out.stderr, out.stderr
    assert own.read_bytes() == before


@pytest.mark.slow
def test_force_never_touches_a_directory_fifo_or_device(lockdir: Path) -> None:
    d = lockdir / "d.lock"
    d.mkdir()
    (d / "inside").write_text("keep")
    fifo = lockdir / "p.lock"
    os.mkfifo(fifo)
    for path in (d, fifo, Path("/dev/null")):
        for verb in ("release", "reclaim"):
            out = lw(verb, str(path), "--force", "--reason", "x", timeout=30)
            assert out.returncode == 3, (path, out.stderr)
    assert (d / "inside").read_text() == "keep" and fifo.is_fifo()
    assert Path("/dev/null").is_char_device()


@pytest.mark.slow
def test_force_removes_an_empty_lock_and_a_real_one(lockdir: Path) -> None:
    """What force is for: an empty lock file (flock-style) and a lock of a dead holder."""
    empty = lockdir / "empty.lock"
    empty.write_bytes(b"")
    os.utime(empty, (OLD, OLD))
    assert lw("release", str(empty), "--force", "--reason", "left over").returncode == 0
    assert not empty.exists()
    real = lockdir / "real.lock"
    real.write_text(f"pid={dead_pid()}\ntimestamp={OLD}\n")
    assert lw("release", str(real), "--force", "--reason", "crashed").returncode == 0
    assert not real.exists()
    assert _operations(lockdir) == ["force_release", "force_release"]


def test_api_refusal_is_data(lockdir: Path) -> None:
    victim = lockdir / "x.lock"
    victim.write_text("just text\n")
    os.utime(victim, (OLD, OLD))
    with pytest.raises(ReadOnlyLock) as exc:
        force_release(victim, reason="x")
    assert exc.value.kind is ReadOnlyKind.NOT_A_LOCK
    assert exc.value.status is not None and exc.value.status.record is None
    assert victim.read_text() == "just text\n"
