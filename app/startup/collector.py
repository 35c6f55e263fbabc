"""Python's cyclic garbage collector, run from the GUI thread only (see docs/gui.md
"Garbage collection in the GUI thread only")."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

BURST = 50_000
"""More new tracked objects than this since the last collection is a burst (an inventory being
read): they are frozen (``gc.freeze()``, constant time) instead of walked (70-200 ms with
100,000 locks, a stall of the window)."""

FULL_EVERY_S = 60.0
"""Shortest time between two full (generation 2) collections, in seconds, the first one
counted from the start (docs/gui.md "Garbage collection in the GUI thread only")."""


class GarbageCollector(QObject):
    """Runs Python's cyclic garbage collector from the GUI thread only (after qutebrowser's
    ``GarbageCollector``).

    With automatic collection, a collection can start in any thread that allocates — here the
    watcher's and the lock operations' threads — and finalize Qt wrappers caught in reference
    cycles (dialogs and their connected closures) there, deleting QObjects outside the GUI
    thread: a segmentation fault (seen in the window tests). This object disables automatic
    collection and collects once a second on a QTimer, using the interpreter's own thresholds
    to pick the generation, but a full collection at most every :data:`FULL_EVERY_S` seconds
    (generation 1 instead until then), and a burst of new objects (:data:`BURST`) frozen rather
    than walked. :meth:`stop` collects once more and re-enables automatic collection. A
    reference cycle frozen by a burst is never collected (its objects stay in memory): the
    price of a window that never stalls on a scan's 100,000 new objects.

    A full collection walks every tracked object: 170 ms with 100,000 locks just read, before
    the inventory is frozen (:class:`app.bridges.watch_bridge.WatchBridge` calls ``gc.freeze()``),
    a stall
    of the window. CPython itself runs one only when the objects that survived since the last
    make up a quarter of the long-lived ones, which this timer cannot see; the interval stands
    in for that rule.

    Args:
        parent: Qt parent.
        interval_ms: timer period in milliseconds (1000).
        clock: monotonic seconds (tests pass their own; default ``time.monotonic``).
    """

    def __init__(self, parent: QObject | None = None, interval_ms: int = 1000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(parent)
        self._clock = clock
        self._last_full = clock()
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.collect)
        self._timer.start()

    def collect(self) -> None:
        """Collect the generations whose thresholds are exceeded, a full collection at most
        every :data:`FULL_EVERY_S` seconds (GUI thread)."""
        threshold = gc.get_threshold()
        count = gc.get_count()
        if count[0] <= threshold[0]:
            return
        if count[0] > BURST:
            gc.freeze()
            return
        gen = 0
        if count[1] > threshold[1]:
            gen = 1
            if count[2] > threshold[2] and self._clock() - self._last_full >= FULL_EVERY_S:
                gen = 2
                self._last_full = self._clock()
        gc.collect(gen)

    def stop(self) -> None:
        """Stop the timer, collect everything now (GUI thread) and restore automatic
        collection if it was on before."""
        self._timer.stop()
        gc.collect()
        if self._was_enabled:
            gc.enable()
