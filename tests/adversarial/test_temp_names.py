"""Temp names never collide with lock names (docs/engine.md, "Crashes and leftovers"): a lock
named like an engine temp file of an older version is a lock like any other -- listed, judged,
never cleaned; a path of the engine's own temp shape is refused as a lock; ``clean`` never
removes a held lock or anything younger than the writing grace."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from core.tempfiles import parse_temp, temp_path
from tests.support.cli import lw

TOKEN = "0123456789abcdef" * 2
OLD = 1_700_000_000


def test_a_lock_named_like_an_old_temp_file_is_a_lock(lockdir: Path) -> None:
    path = lockdir / f".build.lock.{TOKEN}.tmp"  # the pre-0.2 temp shape
    assert lw("try", str(path), "--pid", str(os.getpid()), "-q").returncode == 0
    listed = json.loads(lw("list", str(lockdir), "--pattern", "*.tmp", "--json").stdout)
    assert [s["path"] for s in listed if s.get("kind") != "error"] == [str(path)]
    os.utime(path, (OLD, OLD))
    assert lw("clean", str(lockdir), "--min-age", "0").stdout.startswith("nothing to clean")
    assert path.exists()


def test_a_path_of_the_engines_temp_shape_is_refused(lockdir: Path) -> None:
    fake = Path(temp_path(str(lockdir / "job.lock")))
    assert parse_temp(fake.name) is not None
    out = lw("try", str(fake))
    assert out.returncode == 3 and "temp file of the engine" in out.stderr
    assert os.listdir(lockdir) == []


def test_clean_keeps_held_locks_and_young_leftovers(lockdir: Path) -> None:
    held = lockdir / "held.lock"
    assert lw("try", str(held), "--pid", str(os.getpid()), "-q").returncode == 0
    os.utime(held, (OLD, OLD))
    gone = subprocess.Popen(["true"])
    gone.wait()
    young = Path(temp_path(str(lockdir / "y.lock"), pid=gone.pid))
    young.write_text("pid=1\n")
    out = lw("clean", str(lockdir), "--min-age", "0")
    assert out.stdout.startswith("nothing to clean"), out.stdout
    assert held.exists() and young.exists()


def test_clean_survives_a_name_with_an_impossible_pid(lockdir: Path) -> None:
    """A planted ``.x.lock.4294967295.<token>.lwtmp`` (a PID no pid_t holds) is not the
    engine's temp shape: clean ignores it instead of failing."""
    name = lockdir / f".x.lock.4294967295.{TOKEN}.lwtmp"
    name.write_text("x")
    os.utime(name, (OLD, OLD))
    out = lw("clean", str(lockdir), "--min-age", "0")
    assert out.returncode == 0 and out.stdout.startswith("nothing to clean")
    assert name.exists()
