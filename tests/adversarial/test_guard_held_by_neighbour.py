"""Another user's ``flock -x`` on a shared directory -- the directory guard of every lock in it
(docs/engine.md, "Why the guard is a flock on the directory") -- made release fail after 10 s
and ``run`` leave its lock behind. Releasing one's own lock needs no guard: the check after the
rename-out keeps a successor's lock safe (docs/engine.md, "Releasing without the guard"), so it
goes on after a short wait and says who holds the guard; every other guarded operation that
times out names the holder (user, PID). Real accounts: the neighbour is the second test account
running flock(1)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.engine.exchange import DirGuard, GuardTimeout
from tests.core.cli.test_cli import ENV, LW
from tests.core.watch.test_scan import shared_tmp  # noqa: F401 (fixture)
from tests.support.second_user import USER2, second_user

pytestmark = pytest.mark.skipif(shutil.which("flock") is None or not os.path.exists("/proc/locks"),
                                reason="flock(1) and /proc/locks (Linux) are needed")


@pytest.fixture
def guarded(shared_tmp: Path) -> Iterator[tuple[Path, int]]:  # noqa: F811
    """A shared (1777) directory whose guard the second account holds with ``flock -x``;
    yields it and the flock(1) process's PID."""
    uid, gid = second_user()
    shared = shared_tmp / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    neighbour = subprocess.Popen(["flock", "-x", str(shared), "sh", "-c", "echo locked; cat"],
                                 user=uid, group=gid, extra_groups=[], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        assert neighbour.stdout is not None and neighbour.stdout.readline() == "locked\n"
        yield shared, neighbour.pid
    finally:
        neighbour.kill()
        neighbour.wait()


def test_run_releases_its_lock_and_names_the_guards_holder(guarded: tuple[Path, int]) -> None:
    shared, flock_pid = guarded
    lock = shared / "deploy.lock"
    out = subprocess.run([*LW, "run", str(lock), "--", "true"], capture_output=True, text=True,
                         timeout=60, env=ENV, check=False)
    assert out.returncode == 0, out.stderr
    assert not lock.exists()  # not left behind
    assert f"PID {flock_pid} (user {USER2})" in out.stderr, out.stderr
    entries = [json.loads(x) for x in (shared / ".lock_audit.log").read_text().splitlines()]
    release = [e for e in entries if e["operation"] == "release"]
    assert len(release) == 1 and f"user {USER2}" in release[0]["details"]["guard"]


def test_release_of_ones_own_lock_goes_on(guarded: tuple[Path, int]) -> None:
    shared, _ = guarded
    lock = shared / "build.lock"
    taken = subprocess.run([*LW, "try", str(lock), "--pid", str(os.getpid())],
                           capture_output=True, text=True, timeout=60, env=ENV, check=False)
    assert taken.returncode == 0, taken.stderr
    out = subprocess.run([*LW, "release", str(lock), "--pid", str(os.getpid())],
                         capture_output=True, text=True, timeout=60, env=ENV, check=False)
    assert out.returncode == 0, out.stderr
    assert not lock.exists()


def test_a_guard_timeout_names_its_holder(guarded: tuple[Path, int]) -> None:
    shared, flock_pid = guarded
    with pytest.raises(GuardTimeout, match=rf"PID {flock_pid} \(user {USER2}\) has held"), \
            DirGuard(str(shared), timeout=0.2):
        pass
