"""Plain watched directories on Linux are read by the one inotify reader thread of
core/watch/tree.py (docs/watching.md, "Resources"; docs/performance.md, "Idle tray"): names no
lock has are dropped on that thread before any path is built, the directory's own deletion or
move is seen at once, an event queue overflow rescans, two specs on one directory both hear
its events, a symlinked root reports under its configured path, and the inotify watch limit
(ENOSPC) makes a directory poll and say so, as under watchdog.

Real files, real inotify; waits are on queues and events, never sleeps."""

from __future__ import annotations

import os
import queue
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from core.config import WatchSpec
from core.watch import tree
from core.watch.sources import EventHandler
from core.watch.watched_dir import WatchedDir
from tests.support.watch import WAIT, sema_text, write

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or not tree.available(),
                                reason="the inotify reader is Linux's")


class Counting(EventHandler[WatchedDir]):
    """The real handler, counting every path the reader hands it."""

    def __init__(self, d: WatchedDir) -> None:
        self.emitted: queue.Queue[str] = queue.Queue()
        super().__init__(d, lambda _d, path, _is_dir, _done: self.emitted.put(path))
        self.handed: list[str] = []

    def hint(self, path: str, is_dir: bool, done: bool) -> None:
        self.handed.append(path)
        super().hint(path, is_dir, done)


def test_a_busy_directory_of_other_files_hands_nothing_on(tmp_path: Path) -> None:
    """1,000 files no lock has, written and deleted as a build does in /tmp: not one path is
    built or handed to the handler; the lock written after them is."""
    busy = tmp_path / "tmp"
    busy.mkdir()
    d = WatchedDir(WatchSpec(str(busy)))
    handler = Counting(d)
    tw = tree.TreeWatcher()
    try:
        tw.schedule(handler, str(busy), follow=True)
        for i in range(1000):
            p = busy / f"cc{i}.o.tmp"
            write(p, "x" * 100)
            if i % 2:
                p.unlink()
        write(busy / "after.lock", sema_text(os.getpid()))
        assert handler.emitted.get(timeout=WAIT) == str(busy / "after.lock")
        assert set(handler.handed) == {str(busy / "after.lock")}
    finally:
        tw.stop()


@pytest.mark.slow
@pytest.mark.parametrize("busy_gap", [0.0, tree.BUSY_GAP])
def test_only_a_reader_given_a_busy_gap_waits_in_a_busy_directory(
        tmp_path: Path, busy_gap: float) -> None:
    """The tray app gives the reader ``BUSY_GAP``: a directory busy with other
    files makes it wait between reads. ``lockwarden watch``, the agent and the API give nothing: it
    never waits, so a consumer of ``watch --json`` sees each lock when it comes
    (docs/watching.md, "Latency")."""
    busy = tmp_path / "tmp"
    busy.mkdir()
    handler = Counting(WatchedDir(WatchSpec(str(busy))))
    tw = tree.TreeWatcher(busy_gap=busy_gap)
    try:
        tw.schedule(handler, str(busy), follow=True)
        for i in range(20_000):  # until the reader has waited once, or 20,000 files
            p = busy / f"cc{i % 64}.o.tmp"
            write(p, "x")
            p.unlink()
            if busy_gap and tw.busy_waits and i >= 1000:
                break
        write(busy / "after.lock", sema_text(os.getpid()))
        assert handler.emitted.get(timeout=WAIT) == str(busy / "after.lock")
        assert (tw.busy_waits > 0) == bool(busy_gap), tw.busy_waits
    finally:
        tw.stop()


def test_plain_directories_need_no_watchdog_thread(watch: Any, tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    w, rec = watch([WatchSpec(str(a)), WatchSpec(str(b))])
    assert w._events_obs is None  # no watchdog observer: its three threads per event are gone
    tw = w._directories.sources.tree_obs
    assert tw is not None and tw.watched() == 2
    write(b / "x.lock", sema_text(os.getpid()))
    rec.until(lambda m: str(b / "x.lock") in m, what="the lock's event")
    os.unlink(b / "x.lock")
    rec.until(lambda m: not m, what="its deletion")


def test_the_root_moved_away_is_seen_at_once(watch: Any, tmp_path: Path) -> None:
    """No liveness pass or rescan comes (both an hour away): the root's own move is the
    event that detaches it (watchdog never reported a watched root's move)."""
    d = tmp_path / "locks"
    d.mkdir()
    write(d / "a.lock", sema_text(os.getpid()))
    _w, rec = watch([WatchSpec(str(d))], rescan_interval=3600, liveness_interval=3600)
    assert str(d / "a.lock") in rec.model
    os.rename(d, tmp_path / "elsewhere")
    rec.until(lambda m: not m, what="the moved directory's locks removed")
    rec.until_dirs(lambda ds: bool(ds) and ds[0].mode == "missing")


@pytest.mark.slow
def test_the_root_deleted_and_made_again_is_watched_again(watch: Any, tmp_path: Path) -> None:
    d = tmp_path / "locks"
    d.mkdir()
    write(d / "a.lock", sema_text(os.getpid()))
    _w, rec = watch([WatchSpec(str(d))], rescan_interval=3600)
    shutil.rmtree(d)
    rec.until(lambda m: not m, what="the deleted directory's locks removed")
    d.mkdir()
    write(d / "b.lock", sema_text(os.getpid()))
    rec.until(lambda m: str(d / "b.lock") in m, what="the directory made again")
    write(d / "c.lock", sema_text(os.getpid()))  # its events arrive again
    rec.until(lambda m: str(d / "c.lock") in m, what="an event in the new directory")


def test_an_overflow_rescans_a_plain_directory(watch: Any, tmp_path: Path) -> None:
    """A lock whose event was lost (the kernel's queue overflowed: handed to the reader's
    delivery as the kernel's ``IN_Q_OVERFLOW``, wd -1) is found by the rescan the overflow
    starts, long before the periodic one (an hour away)."""
    inotify_simple = pytest.importorskip("inotify_simple")
    d = tmp_path / "locks"
    d.mkdir()
    w, rec = watch([WatchSpec(str(d))], rescan_interval=3600, liveness_interval=3600)
    tw = w._directories.sources.tree_obs
    assert tw is not None
    [reg] = tw._regs.values()
    handler = reg.handler
    assert isinstance(handler, EventHandler)
    emit, dropped = handler.emit, threading.Event()
    lost = d / "lost.lock"

    def drop(_d: Any, path: str, _is_dir: bool, done: bool) -> None:
        if path == str(lost) and done:
            dropped.set()  # the lock's last event, lost

    handler.emit = drop
    write(lost, sema_text(os.getpid()))
    assert dropped.wait(WAIT)
    handler.emit = emit
    assert str(lost) not in rec.model
    tw._deliver([inotify_simple.Event(-1, inotify_simple.flags.Q_OVERFLOW, 0, "")])
    rec.until(lambda m: str(lost) in m, what="the lock whose event was lost")


def test_two_specs_on_one_directory_both_hear_it(watch: Any, tmp_path: Path) -> None:
    """One inotify watch descriptor for the directory, two handlers on it."""
    d = tmp_path / "locks"
    d.mkdir()
    w, rec = watch([WatchSpec(str(d), patterns=["*.lock"]),
                    WatchSpec(str(d), patterns=["*.pid"])], rescan_interval=3600)
    tw = w._directories.sources.tree_obs
    assert tw is not None and tw.watched() == 1
    write(d / "a.pid", f"{os.getpid()}\n")
    write(d / "b.lock", sema_text(os.getpid()))
    rec.until(lambda m: {str(d / "a.pid"), str(d / "b.lock")} <= set(m), what="both files")
    w.set_specs([WatchSpec(str(d), patterns=["*.pid"])])  # the first spec's watch goes
    rec.until(lambda m: set(m) == {str(d / "a.pid")}, what="the *.lock spec dropped")
    write(d / "c.pid", f"{os.getpid()}\n")
    rec.until(lambda m: str(d / "c.pid") in m, what="the other spec still hears the directory")


def test_a_symlinked_root_reports_under_its_configured_path(watch: Any, tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    _w, rec = watch([WatchSpec(str(link))], rescan_interval=3600)
    write(real / "a.lock", sema_text(os.getpid()))
    rec.until(lambda m: str(link / "a.lock") in m, what="the lock under the link's path")
    assert str(real / "a.lock") not in rec.model


LIMIT_SCRIPT = r"""
import json, os, queue, sys, time
sys.path.insert(0, sys.argv[2])
from core.config import WatchSpec
from core.watch.watcher import Watcher
dirs = sys.argv[1].split(",")
q = queue.Queue()
w = Watcher([WatchSpec(d) for d in dirs], q.put, rescan_interval=3600)
w.start()
print(json.dumps([[s.mode, s.message] for s in w.dir_status()]), flush=True)
with open(os.path.join(dirs[-1], "n.lock"), "w") as f:
    f.write(f"pid={os.getpid()}\ntimestamp={int(time.time())}\ntag=t\n")
cs = q.get(timeout=30)
print(json.dumps([s.path for s in cs.added]), flush=True)
w.close()
"""


@pytest.mark.skipif(shutil.which("unshare") is None
                    or not os.path.exists("/proc/sys/user/max_inotify_watches"),
                    reason="needs Linux user namespaces")
def test_the_watch_limit_makes_a_directory_poll_and_say_so(tmp_path: Path) -> None:
    """In a user namespace whose ``user.max_inotify_watches`` is 2 (the machine's limit is not
    touched), the third plain directory gets ENOSPC: it polls, its status names the limit, and
    a lock written there is still found (by polling: no rescan comes within the hour)."""
    dirs = [tmp_path / n for n in ("a", "b", "c")]
    for d in dirs:
        d.mkdir()
    probe = subprocess.run(["unshare", "-U", "-r", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("user namespaces are not allowed here")
    cmd = (f"echo 2 > /proc/sys/user/max_inotify_watches && exec {sys.executable} -c "
           '"$0" "$1" "$2"')
    out = subprocess.run(["unshare", "-U", "-r", "sh", "-c", cmd, LIMIT_SCRIPT,
                          ",".join(map(str, dirs)), str(ROOT)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    import json

    statuses, added = (json.loads(line) for line in out.stdout.splitlines()[:2])
    assert [m for m, _ in statuses] == ["events", "events", "polling"]
    assert "inotify watch limit reached (fs.inotify.max_user_watches)" in statuses[2][1]
    assert added == [str(dirs[2] / "n.lock")]
