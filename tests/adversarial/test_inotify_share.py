"""A huge project tree takes only Lockwarden's share of the user's inotify watches
(core/watch/tree.py ``TREE_WATCH_SHARE``, docs/watching.md "Resources"): beyond it the tree is
walked every 5 s, its status says so, and a lock made in a directory that is not watched is
still found. Before the cap, ``watch --project`` on a 200,000-directory tree took 192,536
watches: every one the user had, leaving none for editors and build tools."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from core.config.model import ProjectSpec
from core.watch import tree
from core.watch.watcher import ChangeSet, DirStatus, Watcher
from tests.support.cli import ENV

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or not tree.available(),
                                reason="per-directory inotify watches are Linux's")


def _tree(root: Path, repos: int) -> None:
    for i in range(repos):
        (root / f"r{i}" / ".git").mkdir(parents=True)


def test_default_share_is_half_of_the_users_watches(tmp_path: Path) -> None:
    limit = tmp_path / "max_user_watches"
    limit.write_text("1000\n")
    assert tree.default_limit(path=str(limit)) == 500
    assert tree.default_limit(0.1, path=str(limit)) == 100
    assert tree.default_limit(path=str(tmp_path / "absent")) is None


@pytest.mark.slow
def test_a_tree_beyond_the_share_is_walked_and_its_locks_still_found(tmp_path: Path) -> None:
    root = tmp_path / "src"
    _tree(root, 30)  # 61 directories: the root, r*, r*/.git
    statuses: list[list[DirStatus]] = []
    found = threading.Event()
    target = root / "r29" / ".git" / "index.lock"

    def on_change(changes: ChangeSet) -> None:
        if any(s.path == str(target) for s in changes.added):
            found.set()

    w = Watcher([ProjectSpec(str(root)).watch_spec()], on_change, on_dirs=statuses.append,
                tree_watch_limit=8)
    w.start()
    try:
        tree_obs = w._directories.sources.tree_obs
        assert tree_obs is not None
        assert tree_obs.watched() <= 8
        assert statuses and "share of inotify watches" in statuses[-1][0].message
        target.write_bytes(b"")  # git's lock in a directory past the share
        assert found.wait(20), "the lock in an unwatched directory was not found by the walk"
        assert tree_obs.watched() <= 8
    finally:
        w.close()


def test_watch_project_takes_at_most_max_watches(tmp_path: Path) -> None:
    root = tmp_path / "src"
    _tree(root, 20)
    proc = subprocess.Popen([sys.executable, "-m", "core", "watch", str(root), "--project",
                             "--max-watches", "3", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        assert '"event": "ready"' in lines[0]
        assert "share of inotify watches reached (3 directories" in lines[1]
        watches = sum(1 for fd in Path(f"/proc/{proc.pid}/fdinfo").iterdir()
                      for line in fd.read_text().splitlines() if line.startswith("inotify wd:"))
        # the tree's 3, and no more than one watch of watchdog's for the root's own files
        assert watches <= 4, watches
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=30)
    assert "Traceback" not in err
