"""core.watch.watcher: events after which a file is final for now (closed after writing, renamed in,
deleted) are read in the same round, without the debounce (docs/watching.md, "Latency").

The debounce is set to an hour here, so a file is only reported if its event skipped it; the
waits are generous bounds for a loaded machine, not timings."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import core.watch.watcher
from core.config import WatchSpec
from core.watch.watcher import Watcher
from tests.support.watch import Recorder, sema_text, write

Make = Callable[..., tuple[Watcher, Recorder]]


@pytest.fixture(autouse=True)
def _no_debounce_in_sight(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core.watch.watcher, "DEBOUNCE", 3600.0)


def test_a_file_closed_after_writing_is_reported_at_once(watch: Make, lockdir: Path) -> None:
    _w, rec = watch([WatchSpec(str(lockdir))])
    path = lockdir / "a.lock"
    write(path, sema_text(os.getpid()))
    rec.until(lambda m: str(path) in m, what="a.lock added")


def test_renamed_in_and_deleted_are_reported_at_once(watch: Make, lockdir: Path) -> None:
    _w, rec = watch([WatchSpec(str(lockdir))])
    tmp, path = lockdir / "x.tmp", lockdir / "b.lock"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, sema_text(os.getpid()).encode())
    os.close(fd)
    os.rename(tmp, path)
    rec.until(lambda m: str(path) in m, what="b.lock added")
    os.unlink(path)
    rec.until(lambda m: str(path) not in m, what="b.lock removed")


def test_a_later_close_brings_a_debounced_path_forward(watch: Make, lockdir: Path) -> None:
    _w, rec = watch([WatchSpec(str(lockdir))])
    path = lockdir / "c.lock"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)  # IN_CREATE: debounced (an hour)
    try:
        os.write(fd, sema_text(os.getpid()).encode())  # IN_MODIFY: still debounced
    finally:
        os.close(fd)  # IN_CLOSE_WRITE: read now
    got: Any = rec.until(lambda m: str(path) in m, what="c.lock added")
    assert got
