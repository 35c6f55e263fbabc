"""The one policy resolver (core/config/policies.py): which configured directory governs a path
and its whole policy, asked by the command line, the app and the watcher alike. Every field of
a configured directory's policy reaches the watcher's verdict and the app's actions
(docs/cli.md, "One verdict: the configured directory's policy"; docs/engine.md, "Who can read a
lock file")."""

from __future__ import annotations

import dataclasses
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

from app.bridges.lock_actions import policy_for
from core.config import Config, PolicyResolver, WatchSpec
from core.config.model import ProjectSpec
from core.engine.lock import Lock
from core.engine.reclaiming import reclaim
from core.record import State
from core.stale_policy import StalePolicy
from core.watch.watcher import Watcher


def _spec(path: Path, **kw: object) -> WatchSpec:
    """A directory whose policy differs from the defaults in every field a spec can set."""
    return WatchSpec(str(path), stale_after=123.0, allow_higher_privilege=True,
                     allow_emergency=True, format_stale_after={"sema": 77.0},
                     readable_lock_files=True, **kw)  # type: ignore[arg-type]


def test_every_field_of_the_policy_differs_from_the_defaults(tmp_path: Path) -> None:
    """The fixture is worth something only if each field it sets is not a default."""
    policy = _spec(tmp_path).policy
    default = StalePolicy()
    same = [f.name for f in dataclasses.fields(StalePolicy)
            if f.name != "writing_grace"
            and getattr(policy, f.name) == getattr(default, f.name)]
    assert same == []


def test_the_resolver_finds_the_governing_directory_af_claims_and_projects(
        tmp_path: Path) -> None:
    watched, proj, elsewhere = tmp_path / "w", tmp_path / "p", tmp_path / "e"
    spec = _spec(watched, recursive=True, skip=["node_modules"])
    project = ProjectSpec(str(proj)).watch_spec()
    resolver = PolicyResolver([spec, project])
    assert resolver.spec_for(str(watched / "a.lock")) is spec
    assert resolver.spec_for(str(watched / "sub" / "a.lock")) is spec
    assert resolver.spec_for(str(watched / "node_modules" / "a.lock")) is None  # skipped
    assert resolver.spec_for(str(watched / "proof" / "ledger" / "ledger.lock")) is spec
    assert resolver.spec_for(str(watched / "proof" / "ledger#n1")) is spec  # a replayed claim
    assert resolver.spec_for(str(proj / "repo" / ".git" / "index.lock")) is project
    assert resolver.spec_for(str(elsewhere / "a.lock")) is None
    assert resolver.policy_for(str(watched / "a.lock")) == spec.policy
    assert resolver.policy_for(str(elsewhere / "a.lock")) is None


def test_a_writer_keeps_its_limits_and_takes_the_directory_file_mode(tmp_path: Path) -> None:
    resolver = PolicyResolver([_spec(tmp_path)])
    limits = StalePolicy(stale_after=5.0)
    got = resolver.writer_policy(str(tmp_path / "a.lock"), limits)
    assert got == dataclasses.replace(limits, readable_lock_files=True)
    assert resolver.writer_policy(str(tmp_path / "x" / "a.lock"), limits) is limits


def test_the_watchers_verdict_carries_the_whole_policy_to_a_reclaim(tmp_path: Path) -> None:
    """A stale lock reclaimed with the verdict's policy, as the app's Reclaim does
    (``LockActions.reclaim(status=...)``), is written with the directory's file mode."""
    spec = _spec(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    # 200 s old: past the sema limit of 77 s (or, on a machine booted since, before its boot:
    # stale either way)
    stamp = int(time.time()) - 200
    (tmp_path / "a.lock").write_text(f"pid={int(dead.stdout)}\ntimestamp={stamp}\n")
    w = Watcher([spec], on_change=lambda cs: None)
    w.start()
    try:
        [status] = w.snapshot()
    finally:
        w.close()
    assert status.policy == spec.policy
    assert status.state is State.STALE, status.reasons
    lock = reclaim(status.path, policy=status.policy)
    try:
        assert stat.S_IMODE(os.stat(status.path).st_mode) == 0o644
    finally:
        lock.release()


def test_the_apps_actions_use_the_whole_policy(tmp_path: Path) -> None:
    """The app's Acquire takes its policy from ``policy_for`` and its Reclaim from the
    verdict's: either way a lock file in a ``readable_lock_files`` directory is 0644."""
    spec = _spec(tmp_path)
    config = Config(watches=[spec])
    path = tmp_path / "a.lock"
    policy = policy_for(config, str(path))
    assert policy == spec.policy
    lock = Lock(str(path), policy=policy)
    lock.acquire(timeout=0)
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
    finally:
        lock.release()
