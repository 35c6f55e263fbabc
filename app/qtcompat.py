"""Work-arounds for defects of the Qt binding in use.

PySide6 6.12.0 on CPython 3.11: ``SignalInstance.emit()`` returns ``True`` without a new
reference, so every signal emitted from Python drops one reference to ``True``; after a few
thousand emissions CPython aborts with "bool_dealloc: deallocating True or False" (measured:
exactly -1 per ``emit``; CPython >= 3.12 has immortal bools and is not affected). All signals
emitted by :mod:`app` go through :func:`emit`, which gives the reference back when the probe at
import time shows the defect, and does nothing otherwise.
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

from PySide6.QtCore import QObject, Signal


class _Probe(QObject):
    sig = Signal()


def _emit_drops_true() -> bool:
    probe = _Probe()
    n = 16
    before = sys.getrefcount(True)
    for _ in range(n):
        probe.sig.emit()
    lost = before - sys.getrefcount(True)
    for _ in range(max(0, lost)):
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(True))
    return lost == n


EMIT_DROPS_TRUE: bool = _emit_drops_true()
"""True when this binding's ``emit()`` drops a reference to ``True`` (see module doc)."""


def emit(signal: Any, *args: Any) -> None:
    """``signal.emit(*args)``, compensating the binding's lost reference to ``True``.
    Safe from any thread (runs under the GIL)."""
    signal.emit(*args)
    if EMIT_DROPS_TRUE:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(True))


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
        import gc

        from PySide6.QtCore import QTimer

        super().__init__(parent)
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.collect)
        self._timer.start()

    def collect(self) -> None:
        """Collect the generations whose thresholds are exceeded (GUI thread)."""
        import gc

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
        import gc

        self._timer.stop()
        gc.collect()
        if self._was_enabled:
            gc.enable()
