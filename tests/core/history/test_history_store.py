"""The observation store and the recorder (docs/history.md, "The store"): retention, schema
versions, a recorder SIGKILLed mid-write, and a damaged, read-only or full data directory that
pauses history with a visible reason while the monitor keeps working. Real SQLite files, real
processes, a real read-only bind mount and a real full tmpfs (root: in a mount namespace)."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.config import loads
from core.config.history import parse_span
from core.history.model import HistoryUnavailable, Observation, gone
from core.history.recorder import Recorder
from core.history.store import SCHEMA_VERSION, HistoryStore
from tests.support.cli import ENV, Watch, lw

DAY = 86400.0


def obs(lock: str, t: float, state: str = "held", pid: int = 1) -> Observation:
    return Observation(lock=lock, t=t, state=state, pid=pid, ident=f"{state}{pid}")


def test_retention_drops_rows_older_than_keep_and_beyond_the_size(tmp_path: Path) -> None:
    store = HistoryStore(str(tmp_path / "h.sqlite3"))
    now = time.time()
    store.record([obs("/l/old.lock", now - 40 * DAY), gone("/l/old.lock", now - 39 * DAY),
                  obs("/l/new.lock", now - DAY)])
    assert store.prune(now, parse_span("30d"), None) == 2
    assert [(t.lock, t.event) for t in store.transitions()] == [("/l/new.lock", "acquired")]

    store.record([obs(f"/l/{i}.lock", now - 3600 + i, pid=i) for i in range(3000)])
    big = store.size_bytes()
    store.prune(now, None, big // 4)
    assert store.size_bytes() <= big // 4
    left = store.transitions()
    assert 0 < len(left) < 3001
    assert left[-1].lock == "/l/2999.lock"  # the oldest went first
    assert store.prune(now, None, None) == 0


def test_config_keep_and_max_mb(tmp_path: Path) -> None:
    cfg = loads('[history]\nkeep = "12h"\nmax_mb = 5\n')
    assert cfg.history.keep_s == 12 * 3600 and cfg.history.max_bytes == 5 * 1024 * 1024
    bad = loads('[history]\nkeep = "soon"\nenabled = 3\n')
    assert bad.history.keep == "30d" and bad.history.enabled is True
    assert any("history.keep" in w for w in bad.warnings)
    assert any("history.enabled" in w for w in bad.warnings)


def test_the_schema_version_is_set_and_a_newer_file_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    HistoryStore(str(path)).close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    with pytest.raises(HistoryUnavailable, match="newer Lockwarden"):
        HistoryStore(str(path))
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1  # untouched


def test_a_damaged_file_pauses_history_with_a_reason(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    path.write_bytes(b"this is not a database, it is a shopping list\n" * 100)
    told: list[str | None] = []
    rec = Recorder(str(path), on_status=told.append)
    rec.start()
    rec.observe([], removed=[])
    assert rec.flush()
    assert rec.paused is not None and "damaged" in rec.paused
    assert told == [rec.paused]
    rec.close()
    assert path.read_bytes().startswith(b"this is not a database")  # nothing lost


WRITER = """
import sys, time
from core.history.model import Observation
from core.history.store import HistoryStore
store = HistoryStore(sys.argv[1])
n = 0
while True:
    t = time.time()
    store.record([Observation(f"/l/{n}-{i}.lock", t, "held", pid=i, ident=str(i))
                  for i in range(500)])
    n += 1
    print(n, flush=True)
"""


@pytest.mark.timeout(120)
def test_a_recorder_killed_mid_write_leaves_the_store_intact(tmp_path: Path) -> None:
    path = tmp_path / "h.sqlite3"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], env=ENV, text=True,
                            stdout=subprocess.PIPE)
    assert proc.stdout is not None
    committed = 0
    while committed < 20:
        committed = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)  # most likely inside the next transaction
    proc.wait()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rows = db.execute("SELECT count(*) FROM transitions").fetchone()[0]
    assert rows >= committed * 500 and rows % 500 == 0  # whole transactions only
    db.close()
    store = HistoryStore(str(path))  # and a recorder goes on writing
    assert store.record([obs("/l/after.lock", time.time())])


def _in_namespace(setup: str) -> tuple[str, ...]:
    """A prefix running a command as root in a new mount namespace after ``setup`` (sh)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) for a private mount")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip(f"unshare -m refused: {probe.stderr!r}")
    return ("unshare", "-m", "--propagation", "private", "sh", "-c", f'{setup} && exec "$@"',
            "sh")


@pytest.mark.timeout(120)
def test_a_read_only_data_directory_gives_a_reason_and_watch_keeps_working(
        tmp_path: Path, private_env: dict[str, str], lockdir: Path) -> None:
    env = private_env
    data = tmp_path / "data"
    data.mkdir()
    prefix = _in_namespace(f"mount --bind {data} {data} && mount -o remount,bind,ro {data}")
    watch = Watch(env, lockdir, prefix=prefix)
    try:
        lock = lockdir / "a.lock"
        assert lw("try", str(lock), "--pid", "1").returncode == 0
        assert watch.saw(lock)["state"] == "held"  # the monitor reports on
        lock.unlink()
        watch.saw(lock, event="removed")
        err = watch.stop()
    finally:
        watch.kill()
    assert "history paused:" in err and "read-only" in err, err
    assert not (data / "lockwarden").exists()


@pytest.mark.timeout(120)
def test_a_full_disk_pauses_history_and_watch_keeps_working(
        tmp_path: Path, private_env: dict[str, str], lockdir: Path) -> None:
    env = private_env
    data = tmp_path / "data"
    data.mkdir()
    prefix = _in_namespace(f"mount -t tmpfs -o size=128k lw-full {data}")
    watch = Watch(env, lockdir, prefix=prefix)
    try:
        tag = "x" * 3000  # ~6 KB a row (the tag and the stored line): 128 KiB fill up fast
        for i in range(40):
            lock = lockdir / f"{i}.lock"
            lock.write_text(f"pid=1\ntimestamp={i + 1}\ntag={tag}\n")
            watch.saw(lock)
            lock.unlink()
            watch.saw(lock, event="removed")
        assert "is full" in watch.err_line("history paused")
        lock = lockdir / "after.lock"
        lock.write_text("pid=1\ntimestamp=1\n")
        assert watch.saw(lock)["event"] == "added"  # the monitor goes on
        watch.stop()
    finally:
        watch.kill()



@pytest.mark.slow
def test_the_size_bound_holds_while_the_history_grows(tmp_path: Path) -> None:
    """Locks churning in a watched directory (a neighbour's, in /tmp) cannot push the history
    past its size until the hourly retention pass: the recorder checks the size every
    SIZE_CHECK_ROWS transitions. Real lock files, judged as the watcher judges them, handed to
    a real recorder and store."""
    from core.history.recorder import SIZE_CHECK_ROWS
    from core.verdicts.inspect import inspect

    locks = tmp_path / "shared"
    locks.mkdir()
    bound = 256 * 1024
    rec = Recorder(str(tmp_path / "h.sqlite3"), keep_s=None, max_bytes=bound)
    rec.start()
    try:
        for holder in range(40):  # 100 locks, each taken by 40 holders in turn
            statuses = []
            for i in range(100):
                lock = locks / f"churn-{i:03d}.lock"
                lock.write_text(f"pid={100000 + holder}\ntimestamp={int(time.time())}\n"
                                f"tag=round {holder}\n")
                statuses.append(inspect(str(lock)))
            rec.observe(statuses)
            assert rec.flush(30)
            store = HistoryStore(str(tmp_path / "h.sqlite3"))
            try:
                size, rows = store.size_bytes(), store.count()
            finally:
                store.close()
            # never more than the transitions of one check past the bound (~600 B each)
            assert size <= bound + SIZE_CHECK_ROWS * 1024, (holder, size)
        assert rec.written == 4000 and rows < 4000, (rec.written, rows)  # the oldest went
        print(f"{rec.written} transitions written, {rows} kept in {size:,} bytes "
              f"(bound {bound:,})")
    finally:
        rec.close()
