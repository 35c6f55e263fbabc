"""The interleaving checker at CI's depth, and proof it is not vacuous: a weakened engine is
caught (docs/engine.md, "Every interleaving checked"). ``make verify`` and ``make
verify-mutants`` run the full depth and every mutant."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="fork, flock, leases: the checker runs on Linux")


def _figures(stdout: str) -> tuple[int, int]:
    m = re.search(r"(\d+) schedules explored, .*?, (\d+) violations", stdout)
    assert m, stdout[-3000:]
    return int(m[1]), int(m[2])


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_no_schedule_at_ci_depth_breaks_an_invariant() -> None:
    out = subprocess.run([sys.executable, "-m", "tests.verify", "--depth", "ci", "--quiet"],
                         cwd=ROOT, capture_output=True, text=True, timeout=580, check=False)
    schedules, violations = _figures(out.stdout)
    assert out.returncode == 0 and violations == 0, out.stdout[-6000:] + out.stderr[-2000:]
    assert schedules >= 2_000, out.stdout


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_release_without_its_owner_check_is_caught() -> None:
    """The checker is not vacuous: with the release's ownership check taken out
    (tests/verify/mutants.py ``no_token_check``) it finds a holder whose lock another process
    removed, and prints the schedule that did it."""
    out = subprocess.run([sys.executable, "-m", "tests.verify", "--mutant", "no_token_check",
                          "--depth", "deep"], cwd=ROOT, capture_output=True, text=True,
                         timeout=280, check=False)
    assert out.returncode == 0, out.stdout + out.stderr[-2000:]
    assert "no_token_check       caught" in out.stdout, out.stdout


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_found_schedules_break_nothing(tmp_path: Path) -> None:
    """Each schedule the checker once found a violation in (tests/verify/regressions.py) is
    replayed against the real engine: it reaches the race again and breaks nothing."""
    import os

    from tests.verify.__main__ import setup_env
    from tests.verify.explore import replay
    from tests.verify.regressions import REGRESSIONS
    from tests.verify.world import Shared

    saved = dict(os.environ)
    setup_env(str(tmp_path))
    shared = Shared.make(str(tmp_path / "runs"))
    try:
        for r in REGRESSIONS:
            ran, trace = replay(shared, r.seed, r.ops, r.moves)
            assert ran.finding is None, r.name + "\n" + ran.finding.report()
            assert sum(r.shows in t for t in trace) >= r.times, (r.name, trace)
    finally:
        shared.close()
        os.environ.clear()
        os.environ.update(saved)
