"""The Qt binding that pyproject.toml allows keeps ``signal.emit()`` reference-safe, so the app
calls ``emit`` directly (no work-around).

PySide6 6.12.0 on CPython 3.11 returned ``True`` from ``SignalInstance.emit()`` without a new
reference: each emission dropped one reference to ``True`` and after a few thousand CPython
aborted ("bool_dealloc: deallocating True or False"). pyproject.toml excludes that release
(``PySide6-Essentials>=6.6,!=6.12.0``). These tests run on the installed binding: emitting a
bool-carrying signal 5,000 times, from the GUI thread and from a worker thread, leaves the
reference count of ``True`` where it was, and the process does not abort (the emissions run
in a child process, whose exit status is checked).
"""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EMITS = 5000

CHILD = r'''
import sys, threading
from PySide6.QtCore import QCoreApplication, QObject, Signal

N = int(sys.argv[1])


class Source(QObject):
    flag = Signal(bool)
    plain = Signal()


app = QCoreApplication([])
src = Source()
got = [0]  # a count, not the bools: holding them would add references to True


def count(on):
    got[0] += 1


src.flag.connect(count)
src.plain.connect(lambda: None)

before = sys.getrefcount(True)
for i in range(N):
    src.flag.emit(i % 2 == 0)
    src.plain.emit()
direct = sys.getrefcount(True)

# from a worker thread: queued to the GUI thread, delivered by the event loop
def work():
    for i in range(N):
        src.flag.emit(True)

t = threading.Thread(target=work)
t.start()
t.join()
while got[0] < 2 * N:
    app.processEvents()
queued = sys.getrefcount(True)
print("REFCOUNT", before, direct, queued, got[0], flush=True)
'''


def test_pinned_binding_is_not_the_defective_release() -> None:
    requirement = next(line for line in (ROOT / "pyproject.toml").read_text().splitlines()
                       if "PySide6-Essentials" in line)
    assert "!=6.12.0" in requirement
    installed = version("PySide6-Essentials")
    assert re.fullmatch(r"[0-9.]+", installed) and installed != "6.12.0", installed


def test_emit_keeps_the_reference_to_true() -> None:
    out = subprocess.run([sys.executable, "-c", CHILD, str(EMITS)], capture_output=True,
                         text=True, timeout=120,
                         env=dict(os.environ, QT_QPA_PLATFORM="offscreen"))
    assert out.returncode == 0, out.stdout + out.stderr  # no "bool_dealloc" abort
    line = next(x for x in out.stdout.splitlines() if x.startswith("REFCOUNT"))
    before, direct, queued, delivered = (int(v) for v in line.split()[1:])
    assert delivered == 2 * EMITS
    if sys.version_info >= (3, 12):
        pytest.skip("True is immortal on CPython >= 3.12: its reference count is fixed")
    assert direct >= before, (before, direct)
    assert queued >= before, (before, queued)
