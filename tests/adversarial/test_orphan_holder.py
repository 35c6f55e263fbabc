"""A lock whose recorded holder is init (PID 1) is judged by its TTL and age, never as alive
(core/liveness.py, ``INIT_PID``)."""

from __future__ import annotations

import time
from pathlib import Path

from core.inspect import inspect
from core.reasons import Code
from core.record import Liveness, State


def _write(path: Path, age_s: float, extra: str = "") -> None:
    path.write_text(f"pid=1\ntimestamp={int(time.time() - age_s)}\ntag=orphan\n{extra}")


def test_init_holder_is_judged_by_age(tmp_path: Path) -> None:
    young = tmp_path / "young.lock"
    _write(young, 60)
    st = inspect(str(young))
    assert st.state is State.HELD and st.liveness is Liveness.UNKNOWN
    codes = [r.code for r in st.reasons]
    assert codes[0] is Code.INIT_HOLDER and Code.YOUNGER_THAN_STALE_AFTER in codes

    old = tmp_path / "old.lock"
    _write(old, 2 * 3600)
    st = inspect(str(old))
    assert st.state is State.STALE and st.reasons[0].code is Code.INIT_HOLDER


def test_init_holder_with_lapsed_ttl_is_stale(tmp_path: Path) -> None:
    lease = tmp_path / "lease.lock"
    _write(lease, 120, "ttl=30\n")
    st = inspect(str(lease))
    assert st.state is State.STALE
    assert [r.code for r in st.reasons][:2] == [Code.INIT_HOLDER, Code.EXPIRED]
