"""The watcher's first scan of a large tree (docs/performance.md, "Listing and watching
100,000 locks"): the cyclic garbage collector does not walk the inventory while it is built."""

from __future__ import annotations

import gc
import time
from pathlib import Path

import pytest

from core.config import WatchSpec
from core.watch.watcher import Watcher


@pytest.mark.slow
def test_start_pauses_the_garbage_collector(tmp_path: Path) -> None:
    """No collection runs during the scan of ``Watcher.start`` of 3,000 locks (each would
    walk every entry kept so far; without the pause there are hundreds), at most one on
    each side of it; the collector is enabled again when it returns, and the inventory is
    whole."""
    now = int(time.time())
    for i in range(30):
        d = tmp_path / f"d{i:02d}"
        d.mkdir()
        for j in range(100):
            (d / f"l{j:03d}.lock").write_bytes(f"pid={4_000_000 + j}\ntimestamp={now}\n".encode())
    runs: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            runs.append(info["generation"])

    w = Watcher([WatchSpec(str(tmp_path), recursive=True)], lambda changes: None)
    assert gc.isenabled()
    gc.callbacks.append(seen)
    try:
        w.start()
        during = list(runs)
    finally:
        gc.callbacks.remove(seen)
        w.close()
    assert len(during) <= 2, during
    assert gc.isenabled()
    assert len(w.snapshot()) == 3000
