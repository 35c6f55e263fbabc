"""Python's cyclic garbage collector, run from the GUI thread only (see docs/gui.md
"Garbage collection in the GUI thread only")."""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer


class GarbageCollector(QObject):
    """Runs Python's cyclic garbage collector from the GUI thread only (after qutebrowser's
    ``GarbageCollector``).

    With automatic collection, a collection can start in any thread that allocates — here the
    watcher's and the lock operations' threads — and finalize Qt wrappers caught in reference
    cycles (dialogs and their connected closures) there, deleting QObjects outside the GUI
    thread: a segmentation fault (seen in the window tests). This object disables automatic
    collection and collects once a second on a QTimer, using the interpreter's own thresholds
    to pick the generation. :meth:`stop` collects once more and re-enables automatic
    collection."""

    def __init__(self, parent: QObject | None = None, interval_ms: int = 1000) -> None:
        super().__init__(parent)
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.collect)
        self._timer.start()

    def collect(self) -> None:
        """Collect the generations whose thresholds are exceeded (GUI thread)."""
        threshold = gc.get_threshold()
        count = gc.get_count()
        if count[0] <= threshold[0]:
            return
        gen = 0
        if count[1] > threshold[1]:
            gen = 1
            if count[2] > threshold[2]:
                gen = 2
        gc.collect(gen)

    def stop(self) -> None:
        """Stop the timer, collect everything now (GUI thread) and restore automatic
        collection if it was on before."""
        self._timer.stop()
        gc.collect()
        if self._was_enabled:
            gc.enable()
