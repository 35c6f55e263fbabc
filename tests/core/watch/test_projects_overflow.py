"""An inotify queue overflow on the project trees' watcher (core/watch/tree.py) makes the
watcher rescan each tree -- without detaching it (which would drop every watch of the tree and
set them all again, and drop the known locks to read them again): the watches of the
directories still there are kept, the locks already known stay in the model, and a lock whose
event was lost is found. The overflow is the kernel's event (``IN_Q_OVERFLOW``, wd -1)
handed to the reader's delivery, since filling the kernel's queue (16384 events by default,
a global sysctl) would disturb every other inotify user of the machine."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from core.config.model import ProjectSpec

ROOT = Path(__file__).resolve().parents[3]
SWAP = ROOT / "tests" / "data" / "devtools" / "vim" / "dead-dirty.notes.txt.swp"
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify (Linux)")


@linux
def test_an_overflow_rescans_without_dropping_known_locks(
        watch: Any, tmp_path: Path) -> None:
    inotify_simple = pytest.importorskip("inotify_simple")
    root = tmp_path / "src"
    sub = root / "app" / "src"
    sub.mkdir(parents=True)
    known = sub / ".a.c.swp"
    shutil.copy(SWAP, known)
    w, rec = watch([ProjectSpec(str(root)).watch_spec()], rescan_interval=3600)
    rec.until(lambda m: str(known) in m, what="the known swap file")
    time.sleep(0.3)
    tree = w._directories.sources.tree_obs
    assert tree is not None
    lost = root / "app" / ".lost.c.swp"
    tree.unschedule(w._directories.dirs[0].watches[str(root / "app")].handle)  # its event is lost
    shutil.copy(SWAP, lost)
    time.sleep(0.2)
    assert str(lost) not in rec.model
    kept = {p: wt.handle for p, wt in w._directories.dirs[0].watches.items()}
    tree._deliver([inotify_simple.Event(-1, inotify_simple.flags.Q_OVERFLOW, 0, "")])
    sets = rec.until(lambda m: str(lost) in m, what="the lock whose event was lost")
    assert not any(s.path == str(known) for cs in sets for s in cs.removed)
    now = {p: wt.handle for p, wt in w._directories.dirs[0].watches.items()}
    assert now == {**kept, str(root / "app"): now[str(root / "app")]}
    w.close()
