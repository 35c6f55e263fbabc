"""The processes the watcher judges holders against (docs/watching.md, "Liveness and time"):
one psutil pass over every process (:func:`take_snapshot`), or the holders' processes only,
each looked up on its own (:func:`holders_snapshot`), and when a round of reads takes which
(:data:`DIRECT_LOOKUPS`). Reads ``/proc`` through psutil; keeps nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.verdicts.liveness import ProcessSnapshot

__all__ = ["DIRECT_LOOKUPS", "holders_snapshot", "take_snapshot"]

log = logging.getLogger("core.watch.watcher")  # one logger for everything the watcher does

DIRECT_LOOKUPS = 64
"""A round of work that judges at most this many files looks their holders up directly
(psutil, one PID at a time); a larger one takes one fresh :func:`core.verdicts.liveness.snapshot`
for the round. Either way a file that just changed is judged against the processes running now,
never against a snapshot up to 2 s old (a holder started after that snapshot is not in it).
A liveness pass while the inventory names at most this many holder PIDs looks up those
processes only (:func:`holders_snapshot`)."""


def holders_snapshot(pids: Iterable[int]) -> ProcessSnapshot:
    """The processes ``pids`` only, each looked up on its own (``psutil.Process``), with the
    same fields as :func:`core.verdicts.liveness.snapshot`: a PID with no process is left out,
    fields psutil is denied are ``None``. Never raises for a single process."""
    import psutil

    from core.verdicts.liveness import ProcessSnapshot, ProcInfo

    taken_at = time.time()
    procs: dict[int, ProcInfo] = {}
    for pid in pids:
        try:
            info = psutil.Process(pid).as_dict(["create_time", "status", "name"],
                                               ad_value=None)
        except (psutil.Error, ValueError):  # gone (or never was), or not a valid PID
            continue
        ct = info.get("create_time")
        procs[pid] = ProcInfo(float(ct) if ct is not None else None, info.get("status"),
                              info.get("name"))
    return ProcessSnapshot(procs=procs, taken_at=taken_at)


def take_snapshot() -> ProcessSnapshot | None:
    """:func:`core.verdicts.liveness.snapshot`, or ``None`` when psutil cannot list processes (then
    every holder is looked up directly)."""
    from core.verdicts.liveness import snapshot

    try:
        return snapshot()
    except Exception:
        log.debug("liveness snapshot failed", exc_info=True)
        return None
