"""A lock whose recorded holder is init (PID 1) is judged by its TTL and age, never as alive
(core/verdicts/liveness.py, ``INIT_PID``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from core.codes import Code
from core.record import Liveness, State
from core.verdicts.inspect import inspect
from tests.support.clock import age_after_boot


def _write(path: Path, age_s: float, extra: str = "") -> None:
    path.write_text(f"pid=1\ntimestamp={int(time.time() - age_s)}\ntag=orphan\n{extra}")


def test_init_holder_is_judged_by_age(tmp_path: Path) -> None:
    young = tmp_path / "young.lock"
    _write(young, age_after_boot(60))  # before the boot it would be stale: predates_boot
    st = inspect(str(young))
    assert st.state is State.HELD and st.liveness is Liveness.UNKNOWN
    codes = [r.code for r in st.reasons]
    assert codes[0] is Code.INIT_HOLDER and Code.YOUNGER_THAN_STALE_AFTER in codes

    old = tmp_path / "old.lock"
    _write(old, 2 * 3600)  # stale by its age (or, booted since, by predating the boot)
    st = inspect(str(old))
    assert st.state is State.STALE and st.reasons[0].code is Code.INIT_HOLDER


def test_init_holder_with_lapsed_ttl_is_stale(tmp_path: Path) -> None:
    lease = tmp_path / "lease.lock"
    age = age_after_boot(120)  # taken after the boot, or it is stale for predating it
    _write(lease, age, f"ttl={age / 4}\n")
    st = inspect(str(lease))
    assert st.state is State.STALE
    assert [r.code for r in st.reasons][:2] == [Code.INIT_HOLDER, Code.EXPIRED]


def test_cli_whose_shell_is_gone_refuses_to_record_init(lockdir: Path) -> None:
    """A real orphan: the process that starts ``lockwarden try`` exits first and init adopts
    the CLI, which must not record PID 1. The orphan says who adopted it, then becomes the CLI
    (``exec``); both write into a pipe the test holds (stdout and stderr)."""
    import os
    import subprocess
    import sys

    from tests.support.cli import ENV

    lock = lockdir / "orphan.lock"
    r, w = os.pipe()
    orphan = (  # argv[1]: the PID of the parent to outlive
        "import os, sys\n"
        "while os.getppid() == int(sys.argv[1]): os.sched_yield()\n"
        "print('adopted-by', os.getppid(), flush=True)\n"
        f"os.execv(sys.executable, [sys.executable, '-m', 'core', 'try', {str(lock)!r}])\n"
    )
    parent = (
        "import os, sys\n"
        "me = os.getpid()\n"
        "if os.fork() == 0:\n"
        f"    os.execv(sys.executable, [sys.executable, '-c', {orphan!r}, str(me)])\n"
        "os._exit(0)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", parent], env=ENV, stdout=w, stderr=w)
    os.close(w)
    assert proc.wait(timeout=60) == 0
    with os.fdopen(r) as f:
        said = f.read()  # EOF once the CLI has exited
    first, _, rest = said.partition("\n")
    adopter = int(first.split()[1])
    if adopter != 1:
        pytest.skip(f"the orphan was adopted by a subreaper (PID {adopter}), not init")
    assert "parent is init" in rest, said
    assert not lock.exists()
