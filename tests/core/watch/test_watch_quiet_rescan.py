"""A periodic rescan skips listing a plain directory that has not changed since its last full
listing (core/watch/quiet.py; docs/watching.md, "Rescans"), and still finds what it is there
for: a lock created, removed or renamed in while its inotify events were lost (the directory's
times changed), a lock rewritten in place while events were lost with a queue overflow (the
overflow makes the next rescan full) or without one (the full rescan every
``FULL_RESCAN_INTERVAL`` s). Entries every rescan re-reads, recursive directories (watchdog)
and a directory changed a moment ago are always listed in full.

Real files, a real watcher with its real inotify reader; its events are lost by handing them
to nobody (as the overflow test of test_watch_plain_inotify.py does). The rescans are called
under the watcher's lock, the periodic ones an hour away. The one wait on the clock is the
rule's own: a directory's times must lie ``SETTLE`` s in the past (set to 50 ms here)."""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from core.config import WatchSpec
from core.record import State
from core.watch import quiet, tree
from core.watch.sources import EventHandler
from core.watch.watcher import Watcher
from tests.support.watch import WAIT, Recorder, sema_text, write

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or not tree.available(),
                                reason="the inotify reader is Linux's")

SETTLE = 0.05
"""Seconds (``quiet.SETTLE`` in these tests): longer than a timestamp tick (a jiffy)."""


@pytest.fixture(autouse=True)
def _short_settle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(quiet, "SETTLE", SETTLE)


def settle(d: Path) -> None:
    """Wait until ``d``'s times lie :data:`SETTLE` s in the past (the rule's own clock)."""
    st = os.stat(d)
    left = max(st.st_mtime_ns, st.st_ctime_ns) / 1e9 + 2 * SETTLE - time.time()
    if left > 0:
        time.sleep(left)


def started(watch: Any, d: Path, *locks: str, recursive: bool = False
            ) -> tuple[Watcher, Recorder]:
    """A watcher of ``d`` holding ``locks`` (our own live PID), started once ``d`` settled;
    its periodic rescans and passes an hour away."""
    d.mkdir()
    for name in locks:
        write(d / name, sema_text(os.getpid(), tag="before"))
    settle(d)
    w, rec = watch([WatchSpec(str(d), recursive=recursive)], rescan_interval=3600,
                   liveness_interval=3600)
    return w, rec


def periodic_rescan(w: Watcher) -> bool:
    """The watcher's periodic rescan of its one directory, now; True when it skipped the
    listing."""
    dirs = w._directories
    with w._lock:
        before = dirs.skipped
        dirs.new_round()
        dirs.rescan_dir(dirs.dirs[0])
        return dirs.skipped > before


def events_lost(w: Watcher, change: Callable[[], None], last: str) -> None:
    """Run ``change`` while the reader's hints for the directory reach nobody; returns once
    the hint of path ``last`` (a final one: the file closed, deleted or renamed) was lost."""
    tw = w._directories.sources.tree_obs
    assert tw is not None
    [reg] = tw._regs.values()
    handler = reg.handler
    assert isinstance(handler, EventHandler)
    emit, lost = handler.emit, threading.Event()

    def drop(_d: Any, path: str, _is_dir: bool, done: bool) -> None:
        if path == last and done:
            lost.set()

    handler.emit = drop
    try:
        change()
        assert lost.wait(WAIT)
    finally:
        handler.emit = emit


def tag_of(w: Watcher, path: Path) -> str | None:
    st = next((s for s in w.snapshot() if s.path == str(path)), None)
    return st.record.tag if st is not None and st.record is not None else None


def test_an_unchanged_directory_is_not_listed(watch: Any, tmp_path: Path) -> None:
    d = tmp_path / "locks"
    w, _rec = started(watch, d, "a.lock", "b.lock")
    assert w._directories.dirs[0].listed is not None
    assert periodic_rescan(w)
    assert periodic_rescan(w)
    assert {s.path for s in w.snapshot()} == {str(d / "a.lock"), str(d / "b.lock")}


@pytest.mark.parametrize("how", ["created", "removed", "renamed in", "renamed away"])
def test_a_lock_whose_events_were_lost_is_found_by_the_next_rescan(
        watch: Any, tmp_path: Path, how: str) -> None:
    """A file created, removed or renamed changes the directory's times: the next periodic
    rescan lists it in full and finds what no event said."""
    d = tmp_path / "locks"
    w, _rec = started(watch, d, "a.lock")
    other = tmp_path / "elsewhere.lock"
    if how == "renamed in":
        write(other, sema_text(os.getpid(), tag="moved"))
    lock = d / "new.lock"

    def change() -> None:
        if how == "created":
            write(lock, sema_text(os.getpid(), tag="new"))
        elif how == "removed":
            (d / "a.lock").unlink()
        elif how == "renamed in":
            other.rename(lock)
        else:
            (d / "a.lock").rename(other)

    last = str(lock) if how in ("created", "renamed in") else str(d / "a.lock")
    events_lost(w, change, last)
    assert {s.path for s in w.snapshot()} == {str(d / "a.lock")}  # nothing said it
    assert not periodic_rescan(w)
    want = {"created": {"a.lock", "new.lock"}, "removed": set(),
            "renamed in": {"a.lock", "new.lock"}, "renamed away": set()}[how]
    assert {os.path.basename(s.path) for s in w.snapshot()} == want


def test_an_overflow_makes_the_next_rescan_full(watch: Any, tmp_path: Path) -> None:
    """A lock rewritten in place changes nothing of the directory; its events lost with a
    queue overflow (the kernel's ``IN_Q_OVERFLOW``, whose own hints are lost too here), the
    next periodic rescan lists and re-reads it all the same."""
    inotify_simple = pytest.importorskip("inotify_simple")
    d = tmp_path / "locks"
    w, _rec = started(watch, d, "a.lock")
    tw = w._directories.sources.tree_obs
    assert tw is not None
    lock = d / "a.lock"

    def change() -> None:
        write(lock, sema_text(os.getpid(), tag="after"))
        tw._deliver([inotify_simple.Event(-1, inotify_simple.flags.Q_OVERFLOW, 0, "")])

    events_lost(w, change, str(lock))
    assert tag_of(w, lock) == "before"
    assert not periodic_rescan(w)
    assert tag_of(w, lock) == "after"
    assert periodic_rescan(w)  # listed again: skipped from then on


def test_a_lock_rewritten_in_place_is_reread_by_the_full_rescan_every_few_minutes(
        watch: Any, tmp_path: Path) -> None:
    """Events lost with no overflow (a write through ``mmap`` makes none) and no change of the
    directory: the rescans skip it until the last full listing is ``FULL_RESCAN_INTERVAL`` s
    old (made so here), then re-read it."""
    d = tmp_path / "locks"
    w, _rec = started(watch, d, "a.lock")
    lock = d / "a.lock"
    events_lost(w, lambda: write(lock, sema_text(os.getpid(), tag="after")), str(lock))
    assert periodic_rescan(w)
    assert tag_of(w, lock) == "before"  # the limit of a skipped rescan
    wd = w._directories.dirs[0]
    with w._lock:
        assert wd.listed is not None
        wd.listed = dataclasses.replace(wd.listed, at=wd.listed.at - quiet.FULL_RESCAN_INTERVAL)
    assert not periodic_rescan(w)
    assert tag_of(w, lock) == "after"


def test_a_directory_with_an_entry_every_rescan_rereads_is_listed(
        watch: Any, tmp_path: Path) -> None:
    """An unreadable entry (a FIFO named like a lock) is re-read by every rescan: the
    directory is never skipped while it is there."""
    d = tmp_path / "locks"
    w, _rec = started(watch, d, "a.lock")
    os.mkfifo(d / "pipe.lock")
    settle(d)
    assert not periodic_rescan(w)  # the directory changed: listed, the FIFO found
    [fifo] = [s for s in w.snapshot() if s.path.endswith("pipe.lock")]
    assert fifo.state is State.UNREADABLE
    assert not periodic_rescan(w)
    assert not periodic_rescan(w)


def test_a_recursive_directory_is_always_listed(watch: Any, tmp_path: Path) -> None:
    """Watched by watchdog (whose queue overflow nobody is told of): never skipped."""
    w, _rec = started(watch, tmp_path / "locks", "a.lock", recursive=True)
    assert w._directories.dirs[0].listed is None
    assert not periodic_rescan(w)


def test_a_directory_changed_a_moment_ago_has_no_signature(tmp_path: Path) -> None:
    """Its times within ``SETTLE`` s of now (or in the future): a later change in the same
    timestamp tick could leave them equal, so none is kept and the next rescan is full."""
    d = tmp_path / "locks"
    d.mkdir()
    st = os.stat(d)
    changed = max(st.st_mtime_ns, st.st_ctime_ns)
    assert quiet.dir_sig(str(d), now_ns=changed) is None
    assert quiet.dir_sig(str(d), now_ns=changed - 1) is None  # a clock set back
    assert quiet.dir_sig(str(d), now_ns=changed + int(SETTLE * 1e9) - 1) is None
    assert quiet.dir_sig(str(d), now_ns=changed + int(SETTLE * 1e9)) == (
        st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_nlink)
    assert quiet.dir_sig(str(tmp_path / "gone"), now_ns=changed + 10**10) is None
