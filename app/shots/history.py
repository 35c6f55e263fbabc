"""Render the History pane's screenshots into ``resources/screenshots/`` (docs/gui.md
"History"): one lock over the last day (timeline, figures, transitions) and a directory of
locks over the last week, light and dark.

Usage: ``python -m app.shots.history [--out DIR]`` (offscreen; no display needed). The history
shown is a real store in a temporary directory, written through
:meth:`core.history.store.HistoryStore.record` like a recorder writes it: CI jobs taking turns
on ``deploy.lock``, one killed (its lock turns stale and is reclaimed), a cache lock, a
nightly backup.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

OUT_DEFAULT = Path(__file__).resolve().parents[2] / "resources" / "screenshots"


def fill(db: str, base: str, now: float) -> None:
    """A week of plausible transitions of three locks under ``base``."""
    from core.history.model import Observation, gone
    from core.history.store import HistoryStore

    rng = random.Random(25)
    store = HistoryStore(db)
    obs: list[Observation] = []
    deploy, cache, backup = (f"{base}/deploy.lock", f"{base}/cache.lock", f"{base}/backup.lock")
    t = now - 7 * 86400
    job = 0
    while t < now - 600:
        job += 1
        holder = rng.choice(["ci-runner-1", "ci-runner-2", "ci-runner-3", "alice"])
        pid = 4000 + job
        length = rng.uniform(120, 2400)
        obs.append(Observation(deploy, t, "held", holder=holder, pid=pid, process="make",
                               host="build-7", tag=f"deploy #{job}",
                               reasons=("holder_alive", "held_for"), ident=f"d{job}"))
        if job % 17 == 0:  # killed: stale for a while, then reclaimed by the next job
            obs.append(Observation(deploy, t + length, "stale", holder=holder, pid=pid,
                                   host="build-7", tag=f"deploy #{job}",
                                   reasons=("holder_dead", "ours_holder_dead"),
                                   ident=f"d{job}s"))
            t += length + rng.uniform(600, 3600)
            continue
        obs.append(gone(deploy, t + length))
        t += length + rng.uniform(60, 5400)
    for day in range(7):
        start = now - (7 - day) * 86400 + 2 * 3600
        obs.append(Observation(backup, start, "held", holder="backup", pid=900 + day,
                               process="rsync", host="nas", tag="nightly",
                               reasons=("holder_alive",), ident=f"b{day}"))
        obs.append(gone(backup, start + rng.uniform(1800, 5400)))
    t = now - 7 * 86400
    while t < now - 60:
        pid = rng.randint(10000, 60000)
        obs.append(Observation(cache, t, "held", pid=pid, process="uv", host="build-7",
                               reasons=("holder_alive",), ident=f"c{pid}{t}"))
        t += rng.uniform(5, 400)
        obs.append(gone(cache, t))
        t += rng.uniform(300, 9000)
    store.record(obs)
    store.close()


def main(argv: list[str] | None = None) -> int:
    """Write ``history-lock-{light,dark}.png`` and ``history-dir-{light,dark}.png``."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, default=OUT_DEFAULT)
    args = ap.parse_args(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from app.history.view import HistoryPane
    from app.style.theme import apply_theme

    qapp = QApplication.instance() or QApplication(sys.argv[:1])
    assert isinstance(qapp, QApplication)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="lockwarden-history-shots-") as tmp:
        base = os.path.join(tmp, "locks")
        os.mkdir(base)
        db = os.path.join(tmp, "history.sqlite3")
        fill(db, base, time.time())
        for theme in ("light", "dark"):
            apply_theme(qapp, theme)
            for name, whole, zoom in (("lock", False, 2), ("dir", True, 3)):
                pane = HistoryPane(db_path=db)
                pane.resize(1000, 560)
                pane.zoom.setCurrentIndex(zoom)
                pane.whole_dir.setChecked(whole)
                pane.show()
                pane.show_path(f"{base}/deploy.lock")
                deadline = time.monotonic() + 30
                while pane.current is None and time.monotonic() < deadline:
                    qapp.processEvents()
                qapp.processEvents()
                path = args.out / f"history-{name}-{theme}.png"
                pane.grab().save(str(path))
                print(path)
                pane.close()
                pane.deleteLater()
    return 0


if __name__ == "__main__":
    sys.exit(main())
