"""The history (docs/history.md) through real processes: ``lockwarden watch`` records, real
holders come and go, one is SIGKILLed and its lock turns stale and is reclaimed;
``lockwarden history`` and ``stats`` read it back. Each test has its own data directory
(``XDG_DATA_HOME``)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.core.cli.test_cli import ENV, LW
from tests.core.cli.test_cli_watch import Lines


def env_for(tmp_path: Path) -> dict[str, str]:
    return {**ENV, "XDG_DATA_HOME": str(tmp_path / "data"),
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "XDG_STATE_HOME": str(tmp_path / "state"), "LOCKWARDEN_CONFIG": ""}


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*LW, *args], env=env, capture_output=True, text=True, timeout=60,
                          check=False)


def history(env: dict[str, str], path: Path | str, *more: str) -> list[dict[str, Any]]:
    out = run(env, "history", str(path), "--json", *more)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


class Watch:
    """``lockwarden watch DIR --json`` in the background, its lines read in a thread."""

    def __init__(self, env: dict[str, str], *dirs: Path, extra: tuple[str, ...] = (),
                 prefix: tuple[str, ...] = ()) -> None:
        self.proc = subprocess.Popen([*prefix, *LW, "watch", *map(str, dirs), "--json",
                                      *extra], env=env, text=True, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.lines = Lines(self.proc)
        self.err: list[str] = []  # stderr, read as it comes
        self._err_seen = threading.Condition()
        stderr = self.proc.stderr
        assert stderr is not None

        def pump() -> None:
            for line in stderr:
                with self._err_seen:
                    self.err.append(line)
                    self._err_seen.notify_all()

        self._err_pump = threading.Thread(target=pump, daemon=True)
        self._err_pump.start()
        self.lines.until(lambda o: o["event"] == "ready")

    def saw(self, path: Path, **fields: Any) -> dict[str, Any]:
        """Wait for the change of ``path`` whose fields include ``fields``."""
        return self.lines.until(lambda o: o.get("path") == str(path) and o["event"] != "initial"
                                and all(o.get(k) == v for k, v in fields.items()))

    def err_line(self, text: str, timeout: float = 30) -> str:
        """Wait for a line of stderr holding ``text`` and return it."""
        with self._err_seen:
            assert self._err_seen.wait_for(lambda: any(text in e for e in self.err), timeout), \
                self.err
            return next(e for e in self.err if text in e)

    def stop(self) -> str:
        """SIGTERM, wait, and return all of stderr (exit 0, no traceback)."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        self._err_pump.join(30)
        err = "".join(self.err)
        assert self.proc.returncode == 0, err
        assert "Traceback" not in err
        return err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def holder(env: dict[str, str], lock: Path, tag: str) -> subprocess.Popen[str]:
    """A shell that takes ``lock`` for itself, then becomes ``sleep`` (same PID): a live holder
    until killed. Returns once the lock is taken."""
    proc = subprocess.Popen(
        ["bash", "-c", f'"$PY" -m core try "$L" --tag {tag} --pid $$ -q && echo ok '
                       "&& exec sleep 600"],
        env={**env, "PY": sys.executable, "L": str(lock)}, text=True, stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == "ok\n"
    return proc


@pytest.mark.timeout(120)
def test_holders_come_and_go_one_is_killed_turns_stale_and_is_reclaimed(
        tmp_path: Path, lockdir: Path) -> None:
    env = env_for(tmp_path)
    lock = lockdir / "deploy.lock"
    watch = Watch(env, lockdir)
    procs: list[subprocess.Popen[str]] = []
    try:
        first = holder(env, lock, "first")
        procs.append(first)
        watch.saw(lock, state="held", pid=first.pid)
        assert run(env, "release", str(lock), "--pid", str(first.pid)).returncode == 0
        watch.saw(lock, event="removed")
        second = holder(env, lock, "second")
        procs.append(second)
        watch.saw(lock, state="held", pid=second.pid)
        second.kill()  # SIGKILL: the lock stays, its holder is gone
        second.wait()
        watch.saw(lock, state="stale")
        assert run(env, "reclaim", str(lock), "--pid", str(first.pid),
                   "--tag", "third").returncode == 0
        watch.saw(lock, state="held", pid=first.pid, tag="third")
        assert run(env, "release", str(lock), "--pid", str(first.pid)).returncode == 0
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
    audit = run(env, "audit", str(lockdir), "--json")
    digests = {e["operation"] for e in json.loads(audit.stdout)}
    assert {"acquire", "release", "reclaim"} <= digests

    text = run(env, "history", str(lockdir))
    lines = text.stdout.splitlines()
    assert len(lines) == 6 and all(line.startswith(str(lock)) for line in lines)
    assert "reclaimed" in lines[4] and f"pid {first.pid}" in lines[4]

    stats = run(env, "stats", str(lockdir), "--json")
    assert stats.returncode == 0, stats.stderr
    st = json.loads(stats.stdout)
    assert st["reclaimed"] == 1 and st["distinct_holders"] == 2 and st["locks"] == 1
    assert st["released"] == 2 and st["transitions"] == 6
    assert 0 < st["stale_s"] < st["held_s"] + st["stale_s"]
    assert st["longest_hold_s"] <= st["held_s"]


@pytest.mark.timeout(120)
def test_history_survives_a_restart_of_the_recorder(tmp_path: Path, lockdir: Path) -> None:
    env = env_for(tmp_path)
    kept, gone = lockdir / "kept.lock", lockdir / "gone.lock"
    assert run(env, "try", str(kept), "--pid", "1").returncode == 0
    watch = Watch(env, lockdir)
    try:
        assert run(env, "try", str(gone), "--pid", "1").returncode == 0
        watch.saw(gone, state="held")
        watch.stop()
    finally:
        watch.kill()
    assert run(env, "release", str(gone), "--pid", "1").returncode == 0  # nobody records
    later = lockdir / "later.lock"
    assert run(env, "try", str(later), "--pid", "1").returncode == 0
    watch = Watch(env, lockdir)  # starts again: finds what changed meanwhile
    watch.stop()
    assert [r["event"] for r in history(env, kept)] == ["acquired"]  # once, not per start
    assert [r["event"] for r in history(env, gone)] == ["acquired", "vanished"]
    assert [r["event"] for r in history(env, later)] == ["acquired"]


@pytest.mark.timeout(120)
def test_two_recorders_never_write_a_transition_twice(tmp_path: Path, lockdir: Path) -> None:
    env = env_for(tmp_path)
    lock = lockdir / "shared.lock"
    watches = [Watch(env, lockdir), Watch(env, lockdir)]
    try:
        for _ in range(3):
            assert run(env, "try", str(lock), "--pid", "1").returncode == 0
            for w in watches:
                w.saw(lock, state="held")
            assert run(env, "release", str(lock), "--pid", "1").returncode == 0
            for w in watches:
                w.saw(lock, event="removed")
        for w in watches:
            w.stop()
    finally:
        for w in watches:
            w.kill()
    assert [r["event"] for r in history(env, lock)] == ["acquired", "released"] * 3


@pytest.mark.timeout(120)
def test_no_history_and_config_switch_record_nothing(tmp_path: Path, lockdir: Path) -> None:
    env = env_for(tmp_path)
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
    out = run(env, "history", str(lockdir))
    assert out.returncode == 0 and out.stdout == ""
    assert "no history recorded yet" in out.stderr
    assert not (tmp_path / "data" / "lockwarden" / "history.sqlite3").exists()


def test_json_with_no_history_yet_is_valid_json_on_stdout(tmp_path: Path) -> None:
    """A JSON consumer reads stdout: ``stats --json`` prints its object (zero figures),
    ``history --json`` zero JSON lines; the note stays on stderr (docs/cli.md, "``history``
    and ``stats``")."""
    env = env_for(tmp_path)
    out = run(env, "stats", str(tmp_path), "--json")
    assert out.returncode == 0, out.stderr
    st = json.loads(out.stdout)
    assert st["path"] == str(tmp_path) and st["transitions"] == 0 and st["held_s"] == 0
    assert "no history recorded yet" in out.stderr
    assert history(env, tmp_path) == []


def test_bad_since_is_a_usage_error(tmp_path: Path) -> None:
    out = run(env_for(tmp_path), "history", str(tmp_path), "--since", "soon")
    assert out.returncode == 2 and "--since" in out.stderr and "Traceback" not in out.stderr


def test_history_escapes_control_characters_in_paths(tmp_path: Path, lockdir: Path) -> None:
    import time

    from core.history.model import Observation
    from core.history.store import HistoryStore

    env = env_for(tmp_path)
    store = HistoryStore(str(tmp_path / "data" / "lockwarden" / "history.sqlite3"))
    evil = str(lockdir / "a\nb\x1b[31m.lock")
    store.record([Observation(evil, time.time(), "held", pid=7, ident="k"),
                  Observation(str(lockdir / "plain.lock"), time.time(), "held", pid=8,
                              ident="j")])
    store.close()
    out = run(env, "history", str(lockdir))
    lines = out.stdout.splitlines()
    assert len(lines) == 2 and "\x1b" not in out.stdout
    assert "a\\nb\\x1b[31m.lock" in lines[0] and "pid 7" in lines[0]
    assert [json.loads(x)["lock"] for x in run(env, "history", str(lockdir), "--json")
            .stdout.splitlines()] == [evil, str(lockdir / "plain.lock")]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("where", ["repository", "plain"])
def test_a_force_release_is_force_released_wherever_the_lock_lives(
        tmp_path: Path, lockdir: Path, where: str) -> None:
    """One mapping from an action to its audit entry and its history event (docs/history.md,
    "Events"; core/history/model.py ``action_event``): a forced release of a held lock is
    ``force_released``, linked to its audit entry, and ``stats`` counts it as forced -- also
    for a lock in a git repository, whose audit entries go to the user's own log (there it
    was ``released``, with no link, and "forced 0")."""
    env = env_for(tmp_path)
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
        out = run(env, "release", str(lock), "--force", "--reason", "hung")
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
    text = run(env, "stats", str(lock))
    assert text.returncode == 0 and "(forced 1)" in text.stdout, text.stdout
