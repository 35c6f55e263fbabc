"""``lockwarden list`` at scale (docs/performance.md, "Listing and watching 100,000 locks"):
it streams (rows are printed as directories are read, nothing holds every row), reads each
regular lock file with ``open``/``fstat``/``read``/``close`` and no ``lstat`` (the directory
listing already gave its type), and still refuses what is not a regular file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.cli.output import TableWriter, table
from core.codes import UnreadableKind
from core.errors import UnreadableError
from core.fsutil import read_lock_file
from core.record import LockStatus, State

ROOT = Path(__file__).resolve().parents[3]
LW = [sys.executable, "-m", "core"]


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT),
            "LOCKWARDEN_CONFIG": str(tmp_path / "no-config.toml")}


def _sema(path: Path, pid: int = 4_000_001, tag: str = "t") -> None:
    path.write_bytes(f"pid={pid}\ntimestamp={int(time.time())}\ntag={tag}\n".encode())


def _blocked_writing(pid: int) -> bool:
    """True when process ``pid`` sleeps in a write to a full pipe (Linux ``wchan``:
    ``pipe_write``, ``anon_pipe_write`` on newer kernels)."""
    try:
        return "pipe_write" in Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/PID/wchan")
def test_list_streams_rows_before_the_walk_ends(tmp_path: Path) -> None:
    """With stdout a pipe nobody reads, ``list -r --json`` blocks on a full pipe after the
    first directories: a lock made then in the last directory of the walk is still listed.
    A listing that judged the whole tree before printing would block only after the walk,
    and miss it."""
    tree = tmp_path / "tree"
    for i in range(40):  # ~40 x 25 rows of ~1.3 KB of JSON: far more than a 64 KiB pipe
        d = tree / f"a{i:03d}"
        d.mkdir(parents=True)
        for j in range(25):
            _sema(d / f"l{j:02d}.lock", tag=f"{i}/{j}")
    last = tree / "z"
    last.mkdir()
    proc = subprocess.Popen([*LW, "list", "-r", "--json", str(tree)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env(tmp_path))
    try:
        give_up = time.monotonic() + 60
        while not _blocked_writing(proc.pid):  # no event says "blocked": poll its wchan
            assert proc.poll() is None, "list ended without filling the pipe"
            assert time.monotonic() < give_up, "list never blocked on the pipe"
            time.sleep(0.005)
        _sema(last / "late.lock", tag="late")
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    rows = json.loads(out)
    assert len(rows) == 40 * 25 + 1
    assert rows[-1]["path"] == str(last / "late.lock") and rows[-1]["tag"] == "late"
    paths = [r["path"] for r in rows]
    assert paths == sorted(paths)  # directories in order, each sorted by path


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace(1)")
def test_list_reads_a_lock_file_without_stat_calls(tmp_path: Path) -> None:
    """Each regular lock file costs ``open`` + ``fstat`` + ``read`` + ``close``: no ``lstat``
    or ``stat`` of its path (the directory listing gave its type), one read."""
    d = tmp_path / "locks"
    d.mkdir()
    for j in range(3):
        _sema(d / f"l{j}.lock")
    trace = tmp_path / "trace.txt"
    out = subprocess.run(["strace", "-f", "-qq", "-e", "trace=%file,%desc", "-o", str(trace),
                          *LW, "list", "--json", str(d)], capture_output=True, text=True,
                         env=_env(tmp_path), timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert len(json.loads(out.stdout)) == 3
    lines = trace.read_text().splitlines()
    for j in range(3):
        path = f'"{d / f"l{j}.lock"}"'
        calls = [line.split(None, 1)[1].split("(", 1)[0] for line in lines if path in line]
        assert calls == ["openat"], (path, calls)
    fds = [line for line in lines if "read(" in line and "timestamp=" in line]
    assert len(fds) == 3  # one read per file, none to see the end


def test_a_regular_hint_still_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    """``regular=True`` skips the ``lstat``; a name replaced since the listing by a FIFO or a
    symlink is still refused, without blocking and without following the link."""
    fifo = tmp_path / "f.lock"
    os.mkfifo(fifo)
    with pytest.raises(UnreadableError) as exc:
        read_lock_file(str(fifo), regular=True)
    assert exc.value.kind is UnreadableKind.CHANGED
    target = tmp_path / "target"
    _sema(target)
    link = tmp_path / "l.lock"
    link.symlink_to(target)
    with pytest.raises(UnreadableError) as exc:
        read_lock_file(str(link), regular=True)
    assert exc.value.kind is UnreadableKind.SYMLINK
    big = tmp_path / "big.lock"
    big.write_bytes(b"x" * (64 * 1024 + 1))
    with pytest.raises(UnreadableError) as exc:
        read_lock_file(str(big), regular=True)
    assert exc.value.kind is UnreadableKind.TOO_LARGE
    data, info = read_lock_file(str(target), regular=True)
    assert data.startswith(b"pid=") and info.size == len(data)


def _status(i: int, tag: str = "") -> LockStatus:
    return LockStatus(f"/d/{i:04d}{tag}.lock", State.FREE)


def test_table_writer_prints_table_then_streams(tmp_path: Path) -> None:
    """Up to ``hold`` rows the stream is exactly :func:`core.cli.output.table`; past them
    rows are printed per batch, the header once, every row once."""
    written: list[str] = []
    statuses = [_status(i) for i in range(5)]
    w = TableWriter(written.append, hold=10)
    w.rows(statuses[:2])
    w.rows(statuses[2:])
    assert written == []  # held back: widths not known yet
    w.close()
    assert "".join(written) == table(statuses) + "\n"

    written.clear()
    w = TableWriter(written.append, hold=3)
    w.rows([_status(i) for i in range(4)])
    assert len(written) == 1  # past hold: printed at once
    w.rows([_status(i) for i in range(4, 6)])
    w.close()
    lines = "".join(written).splitlines()
    assert lines[0].split() == ["STATE", "AGE", "PID", "LIVENESS", "FORMAT", "KIND",
                                "HOLDER/TAG", "PATH"]
    assert [line.split()[-1] for line in lines[1:]] == [f"/d/{i:04d}.lock" for i in range(6)]

    written.clear()
    w = TableWriter(written.append)
    w.rows([])
    w.close()
    assert written == ["(no lock files)\n"]


WATCH_START = r"""
import sys
from core.config import WatchSpec
from core.watch.watcher import Watcher
w = Watcher([WatchSpec(sys.argv[1], recursive=True)], lambda changes: None)
w.start()
print(len(w.snapshot()))
w.close()
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace(1)")
def test_watcher_start_reads_each_lock_once_without_stat(tmp_path: Path) -> None:
    """``Watcher.start`` on a tree: every lock file is opened once and never ``lstat``ed
    (its identity for later rescans is the read's own ``fstat``)."""
    tree = tmp_path / "tree"
    for i in range(2):
        (tree / f"d{i}").mkdir(parents=True)
        for j in range(3):
            _sema(tree / f"d{i}" / f"l{j}.lock")
    trace = tmp_path / "trace.txt"
    out = subprocess.run(["strace", "-f", "-qq", "-e", "trace=%file,%desc", "-o", str(trace),
                          sys.executable, "-c", WATCH_START, str(tree)], capture_output=True,
                         text=True, env=_env(tmp_path), timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["6"]
    lines = trace.read_text().splitlines()
    for i in range(2):
        for j in range(3):
            path = f'"{tree / f"d{i}" / f"l{j}.lock"}"'
            calls = [line.split(None, 1)[1].split("(", 1)[0] for line in lines if path in line]
            assert calls == ["openat"], (path, calls)


def test_equal_reasons_and_times_are_shared() -> None:
    """Verdicts share what is equal (docs/performance.md, "Listing and watching 100,000
    locks"): one object per equal reason without ticking parameters, shared parameters in
    the others, one datetime per whole second; equal values of other types stay apart."""
    from core.codes import Code
    from core.formats._common import from_unix
    from core.reasons import Reason

    a = Reason.of(Code.HOLDER_DEAD, pid=4_000_001)
    assert Reason.of(Code.HOLDER_DEAD, pid=4_000_001) is a
    assert Reason.of(Code.HOLDER_DEAD, pid=4_000_002) is not a
    young = [Reason.of(Code.YOUNGER_THAN_STALE_AFTER, age_s=float(n), holder="dead",
                       limit_s=3600.0) for n in (1, 2)]
    assert young[0] is not young[1] and young[0].get("age_s") == 1.0
    assert young[0].params[1] is young[1].params[1]  # ("holder", "dead") shared
    flag = Reason.of(Code.EXPIRED_HOLDER_UNKNOWABLE, remote=True)
    one = Reason.of(Code.EXPIRED_HOLDER_UNKNOWABLE, remote=1)
    assert flag.get("remote") is True and type(one.get("remote")) is int
    assert flag.to_dict()["text"] == Reason.of(Code.EXPIRED_HOLDER_UNKNOWABLE,
                                               remote=True).to_dict()["text"]
    assert from_unix(1_700_000_000, "timestamp") is from_unix(1_700_000_000, "timestamp")
