"""The history (docs/history.md) through real processes: ``lockwarden watch`` records, real
holders come and go, one is SIGKILLed and its lock turns stale and is reclaimed;
``lockwarden history`` and ``stats`` read it back. Each test has its own data directory
(``XDG_DATA_HOME``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import Watch, lw


def history(env: dict[str, str], path: Path | str, *more: str) -> list[dict[str, Any]]:
    out = lw("history", str(path), "--json", *more, env=env)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def holder(env: dict[str, str], lock: Path, tag: str) -> subprocess.Popen[str]:
    """A shell that takes ``lock`` for itself, then becomes ``sleep`` (same PID): a live holder
    until killed. Returns once the lock is taken."""
    proc = subprocess.Popen(
        ["bash", "-c", f'"$PY" -m core try "$L" --tag {tag} --pid $$ -q && echo ok '
                       "&& exec sleep 600"],
        env={**env, "PY": sys.executable, "L": str(lock)}, text=True, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == "ok\n"
    return proc


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_holders_come_and_go_one_is_killed_turns_stale_and_is_reclaimed(
        tmp_path: Path, private_env: dict[str, str], lockdir: Path) -> None:
    env = private_env
    lock = lockdir / "deploy.lock"
    watch = Watch(env, lockdir)
    procs: list[subprocess.Popen[str]] = []
    try:
        first = holder(env, lock, "first")
        procs.append(first)
        watch.saw(lock, state="held", pid=first.pid)
        assert lw("release", str(lock), "--pid", str(first.pid)).returncode == 0
        watch.saw(lock, event="removed")
        second = holder(env, lock, "second")
        procs.append(second)
        watch.saw(lock, state="held", pid=second.pid)
        second.kill()  # SIGKILL: the lock stays, its holder is gone
        second.wait()
        watch.saw(lock, state="stale")
        assert lw("reclaim", str(lock), "--pid", str(first.pid),
                   "--tag", "third").returncode == 0
        watch.saw(lock, state="held", pid=first.pid, tag="third")
        assert lw("release", str(lock), "--pid", str(first.pid)).returncode == 0
        watch.saw(lock, event="removed")
        watch.stop()
    finally:
        watch.kill()
        for p in procs:
            p.kill()
            p.wait()
    rows = history(env, lock)
    assert [(r["event"], r["state"], r["pid"], r["tag"]) for r in rows] == [
        ("acquired", "held", first.pid, "first"),
        ("released", "free", None, None),
        ("acquired", "held", second.pid, "second"),
        ("stale", "stale", second.pid, "second"),
        ("reclaimed", "held", first.pid, "third"),
        ("released", "free", None, None),
    ]
    assert [r["t"] for r in rows] == sorted(r["t"] for r in rows)
    assert all(r["time"].endswith("Z") and r["host"] for r in rows if r["state"] != "free")
    assert "holder_dead" in rows[3]["reasons"]
    # Lockwarden's own actions name their audit entries; the SIGKILL is no action of ours
    assert all(r["audit_id"] for i, r in enumerate(rows) if i != 3)
    assert rows[3]["audit_id"] is None
    audit = lw("audit", str(lockdir), "--json")
    digests = {e["operation"] for e in json.loads(audit.stdout)}
    assert {"acquire", "release", "reclaim"} <= digests

    text = lw("history", str(lockdir))
    lines = text.stdout.splitlines()
    assert len(lines) == 6 and all(line.startswith(str(lock)) for line in lines)
    assert "reclaimed" in lines[4] and f"pid {first.pid}" in lines[4]

    stats = lw("stats", str(lockdir), "--json")
    assert stats.returncode == 0, stats.stderr
    st = json.loads(stats.stdout)
    assert st["reclaimed"] == 1 and st["distinct_holders"] == 2 and st["locks"] == 1
    assert st["released"] == 2 and st["transitions"] == 6
    assert 0 < st["stale_s"] < st["held_s"] + st["stale_s"]
    assert st["longest_hold_s"] <= st["held_s"]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_history_survives_a_restart_of_the_recorder(lockdir: Path,
                                                    private_env: dict[str, str]) -> None:
    env = private_env
    kept, gone = lockdir / "kept.lock", lockdir / "gone.lock"
    assert lw("try", str(kept), "--pid", "1").returncode == 0
    watch = Watch(env, lockdir)
    try:
        assert lw("try", str(gone), "--pid", "1").returncode == 0
        watch.saw(gone, state="held")
        watch.stop()
    finally:
        watch.kill()
    assert lw("release", str(gone), "--pid", "1").returncode == 0  # nobody records
    later = lockdir / "later.lock"
    assert lw("try", str(later), "--pid", "1").returncode == 0
    watch = Watch(env, lockdir)  # starts again: finds what changed meanwhile
    watch.stop()
    assert [r["event"] for r in history(env, kept)] == ["acquired"]  # once, not per start
    assert [r["event"] for r in history(env, gone)] == ["acquired", "vanished"]
    assert [r["event"] for r in history(env, later)] == ["acquired"]


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_two_recorders_never_write_a_transition_twice(lockdir: Path,
                                                      private_env: dict[str, str]) -> None:
    env = private_env
    lock = lockdir / "shared.lock"
    watches = [Watch(env, lockdir), Watch(env, lockdir)]
    try:
        for _ in range(3):
            assert lw("try", str(lock), "--pid", "1").returncode == 0
            for w in watches:
                w.saw(lock, state="held")
            assert lw("release", str(lock), "--pid", "1").returncode == 0
            for w in watches:
                w.saw(lock, event="removed")
        for w in watches:
            w.stop()
    finally:
        for w in watches:
            w.kill()
    assert [r["event"] for r in history(env, lock)] == ["acquired", "released"] * 3


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_no_history_and_config_switch_record_nothing(tmp_path: Path, lockdir: Path,
                                                     private_env: dict[str, str]) -> None:
    env = private_env
    watch = Watch(env, lockdir, extra=("--no-history",))
    try:
        (lockdir / "a.lock").write_text("pid=1\ntimestamp=1\n")
        watch.saw(lockdir / "a.lock")
        watch.stop()
    finally:
        watch.kill()
    cfg = tmp_path / "off.toml"
    cfg.write_text("[history]\nenabled = false\n")
    # the switch read from the file `--config` names, then from $LOCKWARDEN_CONFIG
    for extra, config_env in ((("--config", str(cfg)), ""), ((), str(cfg))):
        env["LOCKWARDEN_CONFIG"] = config_env
        watch = Watch(env, lockdir, extra=extra)
        try:
            (lockdir / "b.lock").write_text("pid=1\ntimestamp=1\n")
            watch.saw(lockdir / "b.lock")
            watch.stop()
        finally:
            watch.kill()
        (lockdir / "b.lock").unlink()
    out = lw("history", str(lockdir))
    assert out.returncode == 0 and out.stdout == ""
    assert "no history recorded yet" in out.stderr
    assert not (tmp_path / "data" / "lockwarden" / "history.sqlite3").exists()


def test_json_with_no_history_yet_is_valid_json_on_stdout(tmp_path: Path,
                                                           private_env: dict[str, str]) -> None:
    """A JSON consumer reads stdout: ``stats --json`` prints its object (zero figures),
    ``history --json`` zero JSON lines; the note stays on stderr (docs/cli.md, "``history``
    and ``stats``")."""
    env = private_env
    out = lw("stats", str(tmp_path), "--json")
    assert out.returncode == 0, out.stderr
    st = json.loads(out.stdout)
    assert st["path"] == str(tmp_path) and st["transitions"] == 0 and st["held_s"] == 0
    assert "no history recorded yet" in out.stderr
    assert history(env, tmp_path) == []


def test_bad_since_is_a_usage_error(tmp_path: Path, private_state: Path) -> None:
    out = lw("history", str(tmp_path), "--since", "soon")
    assert out.returncode == 2 and "--since" in out.stderr and "Traceback" not in out.stderr


def test_history_escapes_control_characters_in_paths(tmp_path: Path, lockdir: Path,
                                                      private_state: Path) -> None:
    import time

    from core.history.model import Observation
    from core.history.store import HistoryStore

    store = HistoryStore(str(tmp_path / "data" / "lockwarden" / "history.sqlite3"))
    evil = str(lockdir / "a\nb\x1b[31m.lock")
    store.record([Observation(evil, time.time(), "held", pid=7, ident="k"),
                  Observation(str(lockdir / "plain.lock"), time.time(), "held", pid=8,
                              ident="j")])
    store.close()
    out = lw("history", str(lockdir))
    lines = out.stdout.splitlines()
    assert len(lines) == 2 and "\x1b" not in out.stdout
    assert "a\\nb\\x1b[31m.lock" in lines[0] and "pid 7" in lines[0]
    assert [json.loads(x)["lock"] for x in lw("history", str(lockdir), "--json")
            .stdout.splitlines()] == [evil, str(lockdir / "plain.lock")]


def test_stats_counts_one_process_once_with_and_without_its_host(
        tmp_path: Path, lockdir: Path, private_state: Path) -> None:
    """A lock file that names no host is this host's: ``pid 1352`` there and ``pid 1352 on
    <this host>`` in a lock that names it are one holder (``stats`` counted two)."""
    import socket
    import time

    from core.history.model import Observation
    from core.history.store import HistoryStore

    store = HistoryStore(str(tmp_path / "data" / "lockwarden" / "history.sqlite3"))
    now = time.time()
    here = socket.gethostname()
    store.record([Observation(str(lockdir / "a.lock"), now - 60, "held", pid=1352, ident="a"),
                  Observation(str(lockdir / "b.lock"), now - 50, "held", pid=1352, host=here,
                              ident="b"),
                  Observation(str(lockdir / "c.lock"), now - 40, "held", pid=1352,
                              host="elsewhere", ident="c")])
    store.close()
    out = lw("stats", str(lockdir), "--json")
    assert out.returncode == 0, out.stderr
    st = json.loads(out.stdout)
    assert sorted(st["holders"]) == sorted([f"pid 1352 on {here}", "pid 1352 on elsewhere"])
    assert st["distinct_holders"] == 2


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("where", ["repository", "plain"])
def test_a_force_release_is_force_released_wherever_the_lock_lives(
        tmp_path: Path, private_env: dict[str, str], lockdir: Path, where: str) -> None:
    """One mapping from an action to its audit entry and its history event (docs/history.md,
    "Events"; core/history/model.py ``action_event``): a forced release of a held lock is
    ``force_released``, linked to its audit entry, and ``stats`` counts it as forced -- also
    for a lock in a git repository, whose audit entries go to the user's own log (there it
    was ``released``, with no link, and "forced 0")."""
    env = private_env
    if where == "repository":
        d = tmp_path / "repo"
        subprocess.run(["git", "init", "-q", str(d)], check=True)
    else:
        d = lockdir
    lock = d / "build.lock"
    watch = Watch(env, d)
    procs: list[subprocess.Popen[str]] = []
    try:
        procs.append(holder(env, lock, "build"))
        watch.saw(lock, state="held", pid=procs[0].pid)
        out = lw("release", str(lock), "--force", "--reason", "hung", env=env)
        assert out.returncode == 0, out.stderr
        watch.saw(lock, event="removed")
        watch.stop()
    finally:
        watch.kill()
        for p in procs:
            p.kill()
            p.wait()
    if where == "repository":
        assert not (d / ".lock_audit.log").exists()  # nothing written into the repository
    rows = history(env, lock)
    assert [r["event"] for r in rows] == ["acquired", "force_released"]
    assert rows[-1]["audit_id"], rows[-1]
    text = lw("stats", str(lock), env=env)
    assert text.returncode == 0 and "(forced 1)" in text.stdout, text.stdout
