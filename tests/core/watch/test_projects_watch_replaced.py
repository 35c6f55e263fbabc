"""A project tree's per-directory watches (core/watch/tree.py, core/watch/directories.py) follow a
sub-directory that is deleted or moved away and made again at the same path before the
watcher's next rescan: the new directory gets a watch of its own, so a lock made in it
arrives by its event (no periodic rescan in these tests). A root that is a symlink to its
directory is watched too (not reported missing)."""

from __future__ import annotations

import os
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


def _start(watch: Any, tmp_path: Path) -> tuple[Any, Any, Path, Path]:
    root = tmp_path / "src"
    sub = root / "app" / "sub"
    sub.mkdir(parents=True)
    first = sub / ".a.c.swp"
    shutil.copy(SWAP, first)
    w, rec = watch([ProjectSpec(str(root)).watch_spec()], rescan_interval=3600)
    rec.until(lambda m: str(first) in m, what="the first swap file")
    time.sleep(0.3)  # the watches of the walk are set
    return w, rec, root, sub


@pytest.mark.slow
@linux
@pytest.mark.parametrize("how", ["deleted", "moved away"])
def test_a_directory_made_again_at_a_watched_path_is_watched(
        watch: Any, tmp_path: Path, how: str) -> None:
    w, rec, root, sub = _start(watch, tmp_path)
    if how == "deleted":
        shutil.rmtree(sub)
    else:
        os.rename(sub, root / "app" / "elsewhere")
    sub.mkdir()
    time.sleep(1.0)  # the watcher's rescan of the tree has run
    swap = sub / ".b.c.swp"
    shutil.copy(SWAP, swap)
    rec.until(lambda m: str(swap) in m, what="a swap file in the directory made again")
    w.close()


@linux
def test_a_project_root_that_is_a_symlink_is_watched(watch: Any, tmp_path: Path) -> None:
    real = tmp_path / "data" / "src"
    (real / "app").mkdir(parents=True)
    link = tmp_path / "src"
    link.symlink_to(real)  # ~/src -> a larger disk: the tree is still watched by events
    w, rec = watch([ProjectSpec(str(link)).watch_spec()], rescan_interval=3600)
    rec.until_dirs(lambda ds: bool(ds) and ds[0].mode == "events")
    time.sleep(0.3)
    swap = link / "app" / ".b.c.swp"
    shutil.copy(SWAP, swap)
    rec.until(lambda m: str(swap) in m, what="a swap file below a symlinked root")
    w.close()
