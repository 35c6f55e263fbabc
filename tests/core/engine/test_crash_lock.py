"""Crash injection (docs/engine.md, "Crashes and leftovers"): a real process is killed
(``os._exit(137)`` via the test-only ``LOCKWARDEN_CRASH_AT`` hook) between every step of
acquire, reclaim, release and refresh. Afterwards no partial lock is visible at the path, any
leftover lock is either held by a live process or judged stale (a new acquire succeeds:
nothing blocks forever), and leftover temp files are recognised as the engine's own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.engine.lock import Lock
from core.engine.publish import CRASH_ENV, CRASH_POINTS
from core.formats import parse
from core.record import State
from core.tempfiles import parse_temp_name
from core.verdicts.inspect import inspect

pytestmark = pytest.mark.slow  # a crash at every step of every operation, a process each

ROOT = Path(__file__).resolve().parents[3]

ACQUIRE = "from core.engine.lock import Lock; Lock({p!r}).acquire(timeout=10)"
RELEASE = "from core.engine.lock import Lock; Lock({p!r}).acquire(timeout=10).release()"
REFRESH = "from core.engine.lock import Lock; Lock({p!r}, ttl=60).acquire(timeout=10).refresh()"
RECLAIM = "import core; core.reclaim({p!r})"
NO_EXCHANGE = (
    "import core.engine.exchange as ex\n"
    "def refuse(a, b): raise ex.ExchangeUnsupported(95, 'no exchange (test)')\n"
    "ex.exchange = refuse\n"
)
RECLAIM_FALLBACK = NO_EXCHANGE + RECLAIM
STALE = "import os; from core.engine.lock import Lock; Lock({p!r}).acquire(); os._exit(0)"

_LABELS = {ACQUIRE: "acquire", RELEASE: "release", REFRESH: "refresh", RECLAIM: "reclaim",
           RECLAIM_FALLBACK: "reclaim-without-exchange"}

CASES = [
    ("after_temp_create", ACQUIRE, False),
    ("after_temp_write", ACQUIRE, False),
    ("after_link", ACQUIRE, False),
    ("after_temp_unlink", ACQUIRE, False),
    ("after_temp_write", RECLAIM, True),
    ("reclaim_after_guard", RECLAIM, True),
    ("reclaim_after_exchange", RECLAIM, True),
    ("reclaim_after_unlink_old", RECLAIM, True),
    ("reclaim_after_exchange", ACQUIRE, True),  # a blocking acquire that reclaims
    ("reclaim_after_rename_out", RECLAIM_FALLBACK, True),  # platforms without exchange
    ("reclaim_after_unlink_old", RECLAIM_FALLBACK, True),
    ("release_after_rename_out", RELEASE, False),
    ("refresh_after_exchange", REFRESH, False),
]


def _run(code: str, crash_at: str | None = None) -> int:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop(CRASH_ENV, None)
    if crash_at:
        env[CRASH_ENV] = crash_at
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, timeout=60).returncode


def test_crash_points_are_all_exercised() -> None:
    assert {c[0] for c in CASES} == set(CRASH_POINTS)


def _durable(code: str) -> str:
    """``code`` with every lock made durable (fsyncs: docs/architecture.md, "Durability")."""
    return code.replace("Lock({p!r}", "Lock({p!r}, durable=True").replace(
        "core.reclaim({p!r})", "core.reclaim({p!r}, durable=True)")


@pytest.mark.parametrize("durable", [False, True], ids=["default", "durable"])
@pytest.mark.parametrize(("point", "code", "stale_first"), CASES,
                         ids=[f"{c[0]}-{_LABELS[c[1]]}" for c in CASES])
def test_crash_leaves_no_blocking_or_partial_lock(
    lockdir: Path, point: str, code: str, stale_first: bool, durable: bool
) -> None:
    """Crashing at ``point`` leaves nothing that blocks for ever or reads as a live lock, with
    the default (no fsync) and with ``durable=True``."""
    if durable:
        code = _durable(code)
    path = lockdir / "crash.lock"
    if stale_first:
        assert _run(STALE.format(p=str(path))) == 0
        assert inspect(str(path)).state is State.STALE
    assert _run(code.format(p=str(path)), point) == 137

    status = inspect(str(path))
    # never a partial lock: free, or a complete lock whose holder (the crashed process) is
    # dead, hence stale at once
    assert status.state in (State.FREE, State.STALE), status
    if status.state is State.STALE:
        rec = parse(path.read_bytes(), str(path))
        assert rec.token is not None and rec.host is not None
    for name in os.listdir(lockdir):
        if name in ("crash.lock", ".lock_audit.log"):
            continue
        assert parse_temp_name(name) is not None, f"unrecognised leftover {name!r}"
        assert parse_temp_name(name)[0] == "crash.lock"  # type: ignore[index]

    # nothing blocks forever: a new acquire succeeds (reclaiming if needed) and releases
    lk = Lock(path).acquire(timeout=10)
    assert parse(path.read_bytes()).token == lk.token
    lk.release()
    assert not path.exists()
