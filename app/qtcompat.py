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
