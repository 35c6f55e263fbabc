"""Real holder processes and the locks that name them, for the tests of holders' exits
(core/watch/exits.py; docs/watching.md, "Holders' exits"), and a collector that waits for a
watcher's verdict on an Event (no sleeps).

A holder is a real process -- ``sleep`` for one killed by a signal, a Python reading its stdin
for one that exits normally when the test closes it -- and its lock is a sema file written as
Lockwarden writes one (``host``, ``start``, ``token``: stale as soon as its holder is proven
dead, docs/DESIGN.md "Default stale policy")."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil
import pytest

from core.formats import sema
from core.record import LockStatus
from core.verdicts.liveness import hostname
from core.watch.watcher import ChangeSet

WAIT = 20.0
"""Seconds a test waits for a verdict (the machine is shared and loaded)."""


def write_lock(path: Path, pid: int, *, start: float | None = None) -> None:
    """A sema lock at ``path`` naming process ``pid`` as Lockwarden writes one; ``start`` its
    recorded start time (default: the process's own, psutil ``create_time``)."""
    if start is None:
        start = psutil.Process(pid).create_time()
    rec = sema.make_record(str(path), pid=pid, timestamp=datetime.now(UTC), tag="holder",
                           host=hostname(), start=start, token="ab" * 16)
    tmp = path.with_name(path.name + ".partial")
    tmp.write_bytes(sema.serialize(rec))
    os.link(tmp, path)
    tmp.unlink()


def sleeper(**popen: Any) -> subprocess.Popen[bytes]:
    """A ``sleep 600`` process (``popen``: extra ``subprocess.Popen`` arguments, such as
    ``user=``)."""
    return subprocess.Popen(["sleep", "600"], **popen)


def reader() -> subprocess.Popen[bytes]:
    """A Python process that exits normally (status 0) when its stdin is closed."""
    return subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE)


@pytest.fixture
def holders() -> Iterator[list[subprocess.Popen[bytes]]]:
    """The holder processes a test started; killed and reaped after it."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
        p.wait()


class Verdicts:
    """``on_change`` for a :class:`core.watch.watcher.Watcher`: keeps the last status of each
    path and sets an Event when ``until(path, pred)``'s predicate holds."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last: dict[str, LockStatus] = {}
        self._want: tuple[str, Callable[[LockStatus], bool], threading.Event] | None = None

    def on_change(self, cs: ChangeSet) -> None:
        with self.lock:
            for s in [*cs.added, *cs.changed]:
                self.last[s.path] = s
            for s in cs.removed:
                self.last.pop(s.path, None)
            want = self._want
            if want is not None:
                st = self.last.get(want[0])
                if st is not None and want[1](st):
                    want[2].set()

    def expect(self, path: str, pred: Callable[[LockStatus], bool]) -> threading.Event:
        """An Event set when the status of ``path`` delivered next satisfies ``pred``."""
        ev = threading.Event()
        with self.lock:
            self._want = (path, pred, ev)
        return ev
