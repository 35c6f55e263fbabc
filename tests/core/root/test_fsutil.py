"""Safe reads of hostile paths (docs/DESIGN.md, "Formats": lstat first, never open a FIFO)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from core.errors import UnreadableError
from core.fsutil import MAX_LOCK_BYTES, read_lock_file
from core.tempfiles import parse_temp_name, temp_path


def test_reads_regular_file(lockdir: Path) -> None:
    p = lockdir / "a.lock"
    p.write_bytes(b"pid=1\ntimestamp=2\n")
    data, info = read_lock_file(str(p))
    assert data == b"pid=1\ntimestamp=2\n"
    assert info.size == len(data)


def test_fifo_is_refused_without_opening(lockdir: Path) -> None:
    p = lockdir / "x.lock"
    os.mkfifo(p)
    with pytest.raises(UnreadableError, match="FIFO"):
        read_lock_file(str(p))


def test_symlink_is_refused(lockdir: Path) -> None:
    target = lockdir / "real"
    target.write_text("pid=1\n")
    link = lockdir / "l.lock"
    link.symlink_to(target)
    with pytest.raises(UnreadableError, match="symbolic link"):
        read_lock_file(str(link))


def test_directory_and_huge_file_are_refused(lockdir: Path) -> None:
    (lockdir / "d.lock").mkdir()
    with pytest.raises(UnreadableError, match="directory"):
        read_lock_file(str(lockdir / "d.lock"))
    big = lockdir / "big.lock"
    with open(big, "wb") as f:
        f.truncate(MAX_LOCK_BYTES + 1)
    with pytest.raises(UnreadableError, match="larger than"):
        read_lock_file(str(big))


def test_missing_file_raises_file_not_found(lockdir: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_lock_file(str(lockdir / "none.lock"))


def test_temp_names_round_trip(lockdir: Path) -> None:
    token = "0123456789abcdef0123456789abcdef"
    t = temp_path(str(lockdir / "job.lock"), token)
    assert os.path.basename(t) == f".job.lock.{os.getpid()}.{token}.lwtmp"
    assert parse_temp_name(os.path.basename(t)) == ("job.lock", token, "tmp")
    assert parse_temp_name("job.lock") is None
    # names that only look like temp files are locks: no PID, a PID with a leading zero,
    # a short token, the old suffix
    for name in (f".job.lock.{token}.lwtmp", f".job.lock.0{token}.lwtmp",
                 ".job.lock.12.0123.lwtmp", f".job.lock.12.{token}.tmp"):
        assert parse_temp_name(name) is None, name
