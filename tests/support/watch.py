"""The in-process watcher as the tests drive it (core.watch.watcher, docs/watching.md): a
recorder of its change sets and directory statuses (the ``watch`` fixture of tests/conftest.py
makes watchers that report to one), lock-file text, a real holder that dies, and every odd kind
of entry a watched directory can hold.

Waits use queues with generous timeouts (the machine is shared and loaded); nothing asserts on
wall-clock speed (figures are in tests/benchmarks/bench_watch_*.py)."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from core.record import Liveness, LockStatus, State
from core.watch.watcher import ChangeSet, DirStatus
from tests.support.cli import cli_env

WAIT = 20.0
"""Seconds to wait for an event: generous, the machine is shared."""

OLD = time.time() - 600
"""An mtime (seconds since the epoch) well past the 2 s writing grace."""


def sema_text(pid: int, tag: str = "t", timestamp: float | None = None) -> str:
    """A sema lock file's text: ``pid``, ``timestamp`` (seconds since the epoch, default now)
    and ``tag``."""
    ts = int(time.time() if timestamp is None else timestamp)
    return f"pid={pid}\ntimestamp={ts}\ntag={tag}\n"


def write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` in place (open, write, close: the events a tool makes)."""
    with open(path, "w") as f:
        f.write(text)


class Recorder:
    """Collects change sets and directory statuses; keeps a model of the inventory."""

    def __init__(self) -> None:
        self.q: queue.Queue[ChangeSet] = queue.Queue()
        self.dq: queue.Queue[list[DirStatus]] = queue.Queue()
        self.sets: list[ChangeSet] = []
        self.model: dict[str, LockStatus] = {}
        self.dirs: list[DirStatus] = []

    def on_change(self, cs: ChangeSet) -> None:
        self.q.put(cs)

    def on_dirs(self, dirs: list[DirStatus]) -> None:
        self.dq.put(dirs)

    def apply(self, cs: ChangeSet) -> None:
        self.sets.append(cs)
        for s in cs.added:
            assert s.path not in self.model, f"added twice: {s.path}"
            self.model[s.path] = s
        for s in cs.changed:
            assert s.path in self.model, f"changed before added: {s.path}"
            self.model[s.path] = s
        for s in cs.removed:
            assert s.path in self.model, f"removed but never added: {s.path}"
            del self.model[s.path]

    def until(self, pred: Callable[[dict[str, LockStatus]], bool], timeout: float = WAIT,
              what: str = "") -> list[ChangeSet]:
        """Apply change sets until ``pred(model)``; return the sets that arrived meanwhile."""
        got: list[ChangeSet] = []
        deadline = time.monotonic() + timeout
        while not pred(self.model):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out waiting for {what or pred}; model: "
                                     f"{ {p: s.state.value for p, s in self.model.items()} }")
            try:
                cs = self.q.get(timeout=left)
            except queue.Empty:
                continue
            self.apply(cs)
            got.append(cs)
        return got

    def until_dirs(self, pred: Callable[[list[DirStatus]], bool], timeout: float = WAIT) -> None:
        deadline = time.monotonic() + timeout
        while not pred(self.dirs):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out waiting for directory status; last {self.dirs}")
            try:
                self.dirs = self.dq.get(timeout=left)
            except queue.Empty:
                continue


HOLDER = """
import os, sys, time
from datetime import UTC, datetime
import psutil
from core.formats import sema
from core.verdicts.liveness import hostname
path = sys.argv[1]
rec = sema.make_record(path, pid=os.getpid(), timestamp=datetime.now(UTC), tag="holder",
                       host=hostname(), start=psutil.Process().create_time(), token="ab" * 16)
tmp = path + ".partial"
with open(tmp, "wb") as f:
    f.write(sema.serialize(rec))
    f.flush()
    os.fsync(f.fileno())
os.link(tmp, path)
os.unlink(tmp)
print("ready", flush=True)
time.sleep(600)
"""
"""A real holder: ``python -c HOLDER PATH`` writes a lockwarden lock at PATH for itself,
prints ``ready`` and sleeps."""


def holder_dies(rec: Recorder, p: str) -> int:
    """A real process takes the lock ``p`` (:data:`HOLDER`); once ``rec`` (the ``watch``
    fixture's recorder) sees it alive, it is SIGKILLed, and this returns its PID when ``rec``
    sees the lock stale with its holder dead."""
    child = subprocess.Popen([sys.executable, "-c", HOLDER, p], stdout=subprocess.PIPE,
                             text=True, env=cli_env())
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        rec.until(lambda m: p in m and m[p].liveness is Liveness.ALIVE, what="live holder")
        child.kill()
        child.wait(timeout=WAIT)
        rec.until(lambda m: m[p].state is State.STALE, what="stale after the next pass")
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert rec.model[p].liveness is Liveness.DEAD
    return child.pid


def make_hostile(d: Path) -> dict[str, str]:
    """Create every odd entry in ``d`` (a FIFO, dangling and looping symbolic links, a sparse
    100 MB file, binary garbage, a directory, a directory symlink loop); return name -> words
    its reason must contain."""
    os.mkfifo(d / "x.lock")
    (d / "dangling.lock").symlink_to(d / "nowhere")
    (d / "loop-a.lock").symlink_to(d / "loop-b.lock")
    (d / "loop-b.lock").symlink_to(d / "loop-a.lock")
    with open(d / "big.lock", "wb") as f:
        f.truncate(100 * 1024 * 1024)  # sparse 100 MB
    (d / "garbage.lock").write_bytes(bytes(range(256)) * 4)
    os.utime(d / "garbage.lock", (OLD, OLD))
    (d / "y.lock").mkdir()
    (d / "loopdir").symlink_to(d)  # a directory symlink loop for recursive walks
    return {
        "x.lock": "FIFO",
        "dangling.lock": "symbolic link",
        "loop-a.lock": "symbolic link",
        "loop-b.lock": "symbolic link",
        "big.lock": "larger than",
        "garbage.lock": "",
        "y.lock": "directory",
    }
