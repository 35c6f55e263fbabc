"""What one round of the watcher judges with (docs/watching.md, "Liveness and time",
"Empty files"): the process snapshots -- the liveness pass's, a fresh one for many files read
in a round -- and the kernel's view of locks and open files, walked at most so often.
:class:`core.watch.directories.Directories` is one; it asks these when it judges."""

from __future__ import annotations

import time
from collections.abc import Collection
from typing import TYPE_CHECKING

from core.watch.inventory import Inventory
from core.watch.processes import DIRECT_LOOKUPS, holders_snapshot, take_snapshot

if TYPE_CHECKING:
    from core.kernel.openfiles import KernelView, OpenFiles
    from core.verdicts.liveness import ProcessSnapshot

__all__ = ["OPEN_SCAN_DUTY", "OPEN_SCAN_GAP", "RoundViews"]

OPEN_SCAN_GAP = 0.5
"""Seconds during which one walk of the open descriptors
(:func:`core.kernel.openfiles.scan_open_files`) serves every round of the watcher, at least: a
burst of rounds walks ``/proc`` at most twice a second. A file changed after the walk started
is not judged from it (its writer may have opened it after the walk passed): an empty one is
``writing`` until its writing grace ends, then judged with the next walk, or ``free`` when
none is due yet (docs/watching.md, "Empty files")."""

OPEN_SCAN_DUTY = 20.0
"""The gap between two walks is also at least this many times the last walk's duration, so the
walks never take more than 1/20 (5 %) of one core, however many descriptors the host has."""


class RoundViews:
    """The snapshots and kernel view a round judges with (see the module docstring), for the
    locks of ``inventory``.

    Attributes:
        inventory: the watched locks. ``procs``: the last liveness pass's snapshot.
        ``round_procs``: a fresh snapshot for this round's reads. ``round_view``: this round's
        kernel view (``None`` until asked).
    """

    def __init__(self, inventory: Inventory) -> None:
        self.inventory = inventory
        self.procs: ProcessSnapshot | None = None  # the last liveness pass's snapshot
        self._holders_only: ProcessSnapshot | None = None  # the last one of holders only
        self.round_procs: ProcessSnapshot | None = None  # a fresh one for this round
        self.round_view: KernelView | None = None  # the kernel's locks and open files
        self._open_files: OpenFiles | None = None  # the last walk of the open descriptors

    def new_round(self) -> None:
        """Forget this round's process snapshot and kernel view (the next round takes its
        own); the walk of the open descriptors is kept for :data:`OPEN_SCAN_GAP` s."""
        self.round_procs = None
        if self.round_view is not None and self.round_view.open_files is not None:
            self._open_files = self.round_view.open_files
        self.round_view = None

    def kernel_view(self) -> KernelView:
        """This round's :class:`core.kernel.openfiles.KernelView`: ``/proc/locks`` read at most
        once per round, the open descriptors walked at most once per round and reused for
        :data:`OPEN_SCAN_GAP` s, or :data:`OPEN_SCAN_DUTY` times the walk's duration when that
        is longer."""
        if self.round_view is None:
            from core.kernel.openfiles import KernelView

            recent = self._open_files
            if recent is not None and time.time() - recent.taken_at >= max(
                    OPEN_SCAN_GAP, OPEN_SCAN_DUTY * recent.seconds):
                recent = None
            self.round_view = KernelView(open_files=recent)
        return self.round_view

    def liveness_snapshot(self, pids: Collection[int] | None = None) -> ProcessSnapshot | None:
        """The processes a liveness pass compares with the last pass's (docs/watching.md,
        "Liveness and time"): while the inventory names at most :data:`DIRECT_LOOKUPS` holder
        PIDs, those processes only, each looked up on its own (:func:`holders_snapshot`: a
        desktop's ``/tmp`` names a few, such as the X server's ``.X0-lock``); else one
        :func:`take_snapshot` of every process. A pass over every process cost 4-5 ms, every
        2 s: alone more than the idle tray's CPU target (docs/performance.md, "Idle tray").
        A snapshot of holders only is never used to judge a PID it does not hold
        (:meth:`rejudge`, :meth:`refresh_proof` look such PIDs up directly). ``pids``: the
        holders to look up (default every holder the inventory names)."""
        if pids is None:
            pids = self.inventory.holder_pids
        if len(pids) > DIRECT_LOOKUPS:
            self._holders_only = None
            return take_snapshot()
        self._holders_only = holders_snapshot(list(pids))
        return self._holders_only

    def _whole(self, procs: ProcessSnapshot | None) -> ProcessSnapshot | None:
        """``procs``, or ``None`` (look each PID up) when it holds only the holders known at
        the last liveness pass."""
        return None if procs is not None and procs is self._holders_only else procs

    def procs_for_reads(self, n: int) -> ProcessSnapshot | None:
        """Processes to judge ``n`` freshly read files with: ``None`` (direct look-ups) for a
        few, one fresh snapshot per round for many (see :data:`DIRECT_LOOKUPS`)."""
        if n <= DIRECT_LOOKUPS:
            return None
        if self.round_procs is None:
            self.round_procs = take_snapshot()
        return self.round_procs
