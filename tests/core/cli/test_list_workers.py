"""``lockwarden list`` of a large tree judges its directories in forked worker processes
(core/cli/list_workers.py; docs/performance.md, "Listing and watching 100,000 locks"): the
text is exactly what this process would print, and exactly ``status --json`` of each file."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.cli.common import cli_policies, json_text
from core.cli.list_workers import JsonItems, judged, table_cells
from core.cli.listing import Judge, walk
from core.cli.output import TableWriter
from core.config import DEFAULT_PATTERNS
from core.verdicts.inspect import inspect
from core.watch.scan import name_matcher

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="workers are forked on Linux only")

ROOT = Path(__file__).resolve().parents[3]


def _mixed_tree(root: Path) -> None:
    """Locks of many kinds over a few directories: sema (alive, dead, another host's), a
    pidfile, empty files, garbage, a FIFO, a symlink, a git lock, non-ASCII and undecodable
    names, a lock too large."""
    now = int(time.time())
    me = os.getpid()
    for i in range(6):
        d = root / f"d{i}"
        d.mkdir(parents=True)
        for j in range(12):
            pid = me if j % 3 == 0 else 4_000_000 + j
            (d / f"l{j:02d}.lock").write_bytes(
                f"pid={pid}\ntimestamp={now - 90 * j}\ntag=t {i}/{j} é\n".encode())
    d = root / "d2" / "mixed"
    d.mkdir()
    (d / "remote.lock").write_bytes(f"pid=123\ntimestamp={now}\nhost=elsewhere.example\n".encode())
    (d / "app.pid").write_bytes(f"{me}\n".encode())
    (d / "empty.lock").write_bytes(b"")
    (d / "garbage.lock").write_bytes(b"\x00\xff not a lock \x01" * 3)
    (d / "big.lock").write_bytes(b"x" * (64 * 1024 + 1))
    os.mkfifo(d / "fifo.lock")
    (d / "link.lock").symlink_to(root / "d0" / "l00.lock")
    (d / "naïve.lock").write_bytes(f"pid={me}\ntimestamp={now}\n".encode())
    (d / os.fsdecode(b"raw\xff.lock")).write_bytes(b"pid=4000009\ntimestamp=1\n")
    git = root / "d4" / "repo" / ".git"
    git.mkdir(parents=True)
    (git / "index.lock").write_bytes(b"")


def _listing(root: Path, now: datetime, render: object, parallel_after: int) -> list[object]:
    args = argparse.Namespace(config=None, stale_after=None)
    policies = cli_policies(args)
    judge = Judge(policies, None, now=now)
    batches = walk([str(root)], recursive=True, match=name_matcher(list(DEFAULT_PATTERNS)),
                   errors=[])
    return list(judged(batches, judge, render, parallel_after=parallel_after,  # type: ignore[arg-type]
                       workers=2))


def test_list_json_is_status_json_of_each_file(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The JSON items of a listing judged by workers (past 0 files), and of one judged here,
    are byte for byte ``status --json`` of each file (``{**inspect().to_dict(), "policy"}``)
    at the same moment; a batch holding another host's lock is judged here, in its place."""
    monkeypatch.setenv("LOCKWARDEN_CONFIG", str(tmp_path / "none.toml"))
    root = tmp_path / "tree"
    _mixed_tree(root)
    now = datetime.now(UTC)
    in_workers = ", ".join(t for t in _listing(root, now, JsonItems(), 0) if t)  # type: ignore[misc]
    here = ", ".join(t for t in _listing(root, now, JsonItems(), 10**9) if t)  # type: ignore[misc]
    assert in_workers == here
    rows = json.loads(f"[{in_workers}]")
    assert len(rows) == 6 * 12 + 9 + 1  # every file (the big one unreadable, none lost)
    policy = cli_policies(argparse.Namespace(config=None, stale_after=None)).for_dir(str(root))
    expected = ", ".join(
        json_text({**inspect(r["path"], policy=policy.policy, now=now).to_dict(),
                   "policy": policy.to_dict()}) for r in rows)
    assert in_workers == expected
    states = {r["path"].rsplit("/", 1)[1]: (r["state"], r["liveness"]) for r in rows}
    assert states["remote.lock"] == ("held", "remote")
    assert states["fifo.lock"][0] == states["big.lock"][0] == "unreadable"


def test_list_table_in_workers_is_the_table_here(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The table rows workers send back print the same table as rows judged here."""
    monkeypatch.setenv("LOCKWARDEN_CONFIG", str(tmp_path / "none.toml"))
    root = tmp_path / "tree"
    _mixed_tree(root)
    now = datetime.now(UTC)
    texts = []
    for after in (0, 10**9):
        out: list[str] = []
        w = TableWriter(out.append, hold=10)
        for cells in _listing(root, now, table_cells, after):
            w.cells(cells)  # type: ignore[arg-type]
        w.close()
        texts.append("".join(out))
    assert texts[0] == texts[1]
    assert texts[0].count("\n") == 1 + 6 * 12 + 9 + 1


def _sema_tree(root: Path, dirs: int) -> None:
    """``dirs`` directories of 100 sema locks each under ``root``, taken now by PIDs that do
    not exist."""
    now = int(time.time())
    for i in range(dirs):
        d = root / f"d{i:03d}"
        d.mkdir(parents=True)
        for j in range(100):
            (d / f"l{j:03d}.lock").write_bytes(f"pid={4_000_000 + j}\ntimestamp={now}\n".encode())


@pytest.mark.slow
def test_large_list_prints_each_lock_once_in_order(tmp_path: Path) -> None:
    """``list -r --json`` of 2,500 locks (past the threshold: workers) prints every lock once,
    in the order of the walk, and the note printed before the fork once."""
    root = tmp_path / "tree"
    _sema_tree(root, 25)
    config = tmp_path / "empty.toml"  # a file without policies: a note that defaults apply
    config.write_text("")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LOCKWARDEN_CONFIG": str(config)}
    for fmt in (["--json"], []):
        out = subprocess.run([sys.executable, "-m", "core", "list", "-r", *fmt, str(root)],
                             capture_output=True, text=True, env=env, timeout=300, check=False)
        assert out.returncode == 0, out.stderr
        assert len(out.stderr.splitlines()) == 1 and str(root) in out.stderr, out.stderr
        expected = sorted(str(p) for p in root.rglob("*.lock"))
        if fmt:
            assert [r["path"] for r in json.loads(out.stdout)] == expected
        else:
            lines = out.stdout.splitlines()
            assert lines[0].startswith("STATE")
            assert [line.rsplit(None, 1)[1] for line in lines[1:]] == expected


def test_a_batch_whose_worker_dies_is_judged_here(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that dies while rendering a batch (killed: its process exits) loses nothing:
    that batch and every one after it are judged in the listing's process, in order."""
    monkeypatch.setenv("LOCKWARDEN_CONFIG", str(tmp_path / "none.toml"))
    root = tmp_path / "tree"
    _mixed_tree(root)
    now = datetime.now(UTC)
    listing = os.getpid()
    render = JsonItems()

    def dying(judged_batch: list[tuple[object, object]]) -> str:
        if os.getpid() != listing and any("/d3/" in s.path for s, _c in judged_batch):  # type: ignore[attr-defined]
            os._exit(9)
        return render(judged_batch)  # type: ignore[arg-type]

    got = ", ".join(t for t in _listing(root, now, dying, 0) if t)  # type: ignore[misc]
    assert got == ", ".join(t for t in _listing(root, now, JsonItems(), 10**9) if t)  # type: ignore[misc]
    assert got.count('"path": ') == 6 * 12 + 9 + 1


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2,
                    reason="list workers: Linux with 2 CPUs or more")
def test_a_listing_killed_alone_leaves_no_worker_holding_its_output(tmp_path: Path) -> None:
    """SIGTERM to the listing only (a supervisor, `kill PID`): its workers end with it, and
    the reader of its output sees the end of it (a worker kept the pipe open for ever)."""
    import fcntl
    import select
    import signal

    import psutil

    root = tmp_path / "tree"
    _sema_tree(root, 100)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LOCKWARDEN_CONFIG": str(tmp_path / "no")}
    r, w = os.pipe()
    fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ: room for the rows judged before the workers
    proc = subprocess.Popen([sys.executable, "-m", "core", "list", "-r", str(root)], stdout=w,
                            stderr=subprocess.DEVNULL, env=env)
    os.close(w)
    workers: list[psutil.Process] = []
    try:
        listing = psutil.Process(proc.pid)
        deadline = time.monotonic() + 60
        while not workers and proc.poll() is None and time.monotonic() < deadline:
            workers = listing.children()  # the pool forks once 2,000 files are judged
            select.select([], [], [], 0.05)
        assert workers, "no worker started (the pipe filled before 2,000 rows?)"
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        end = time.monotonic() + 30
        while time.monotonic() < end:  # read to the end: EOF once no process holds the pipe
            ready, _, _ = select.select([r], [], [], max(0.0, end - time.monotonic()))
            if ready and not os.read(r, 1 << 16):
                break
        else:
            pytest.fail("the listing's output never ended: a worker holds it")
        _gone, alive = psutil.wait_procs(workers, timeout=30)
        assert not alive, alive
    finally:
        os.close(r)
        for p in workers:
            if p.is_running():
                p.kill()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
