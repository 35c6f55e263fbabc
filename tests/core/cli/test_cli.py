"""The ``lockwarden`` CLI through real subprocesses (``python -m core`` and ``sh``), real files.

docs/cli.md: every verb and exit code, holder PID = caller, interop with the specs' shell
example and the reference tools' fixture files, bad input (one clear line, documented exit
code, nothing changed on disk), bounded numbers, the audit log's ``--verify``, ``clean``, the
``gui`` verb added from the app side (``app/console.py``), reasons as data in ``--json``.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from app.console import (
    main,  # the `lockwarden` console script: core.cli.main.main plus the `gui` verb
)
from core.cli.main import Verb
from core.cli.main import main as core_main
from tests.support.cli import (
    ENV,
    FIXTURES,
    LW,
    dead_pid,
    lw,
    one_line,
    status_json,
    waiting,
)
from tests.support.clock import age_after_boot


def tree(d: Path) -> dict[str, tuple[int, int, bytes | None]]:
    """Names, modes, mtimes and contents under ``d``: to prove nothing changed on disk. The
    audit log is left out: the engine records refused operations there, by design."""
    snap: dict[str, tuple[int, int, bytes | None]] = {}
    for p in sorted(d.rglob("*")):
        if p.name == ".lock_audit.log":
            continue
        st = p.lstat()
        data = p.read_bytes() if stat.S_ISREG(st.st_mode) and os.access(p, os.R_OK) else None
        snap[str(p.relative_to(d))] = (st.st_mode, st.st_mtime_ns, data)
    return snap


# ------------------------------------------------------------------------------ parser, help


@pytest.mark.slow
def test_version_and_usage_errors(lockdir: Path) -> None:
    out = lw("--version")
    assert out.returncode == 0 and out.stdout.startswith("lockwarden 0.")

    out = lw()  # no verb
    assert out.returncode == 2
    assert "required" in one_line(out.stderr)

    lock = lockdir / "x.lock"
    out = lw("acquire", str(lock), "--timeout", "abc")
    assert out.returncode == 2
    assert "not a number of seconds: 'abc'" in one_line(out.stderr)
    out = lw("run", str(lock), "--ttl", "-1", "--", "true")
    assert out.returncode == 2
    one_line(out.stderr)
    out = lw("try", str(lock), "--pid", str(dead_pid()))
    assert out.returncode == 2 and "no such process" in one_line(out.stderr)
    assert list(lockdir.iterdir()) == []


@pytest.mark.parametrize(
    "verb",
    ["try", "try-acquire", "acquire", "release", "status", "wait", "list", "reclaim", "run",
     "audit", "clean", "watch", "gui"],
)
def test_every_verb_help_has_an_example(verb: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([verb, "--help"]) == 0
    text = capsys.readouterr().out
    assert "example" in text and "lockwarden " in text.split("example", 1)[1]


def test_nul_in_path_is_a_usage_error(lockdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # argv cannot carry a NUL byte between processes, so this one goes through main() directly.
    for verb in ("status", "try", "release", "list"):
        assert main([verb, str(lockdir / "a\x00b.lock")]) == 2
        err = capsys.readouterr().err
        assert "NUL" in one_line(err)
    assert list(lockdir.iterdir()) == []


def test_debug_shows_traceback_only_when_asked(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope" / "x.lock")
    out = lw("status", missing)
    assert out.returncode == 3
    assert "does not exist" in one_line(out.stderr)
    out = lw("status", missing, "--debug")
    assert out.returncode == 3 and "Traceback" in out.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["try", "X", "--ttl", "0.5"], "at least 1 second"),
        (["try", "X", "--ttl", "0"], "at least 1 second"),
        (["try", "X", "--ttl", "1e300"], "at most 31536000 seconds"),
        (["try", "X", "--ttl", "nan"], "not a finite number"),
        (["run", "X", "--ttl", "inf", "--", "true"], "not a finite number"),
        (["acquire", "X", "--timeout", "1e300"], "at most 31536000 seconds"),
        (["wait", "X", "--timeout=-inf"], "not a finite number"),
        (["status", "X", "--stale-after", "0"], "more than 0 seconds"),
        (["status", "X", "--stale-after", "nan"], "not a finite number"),
        (["list", "D", "--stale-after", "1e308"], "at most 315360000 seconds"),
        (["try", "X", "--pid", "99999999999999999999"], "at most 2147483647"),
        (["clean", "D", "--min-age", "-1"], "must not be negative"),
        (["audit", "D", "--tail", "-1"], "must not be negative"),
    ],
)
def test_numbers_are_bounded_at_the_boundary(lockdir: Path, args: list[str], says: str) -> None:
    """docs/cli.md "Exit codes": a number out of bounds is a usage error, one line, exit 2,
    and nothing is written (not even an audit entry)."""
    argv = [str(lockdir / "x.lock") if a == "X" else str(lockdir) if a == "D" else a
            for a in args]
    out = lw(*argv)
    assert out.returncode == 2, out.stderr
    assert says in one_line(out.stderr)
    assert list(lockdir.iterdir()) == []


def test_gui_verb_comes_from_the_app_side(capsys: pytest.CaptureFixture[str]) -> None:
    """`core` never imports `app` (docs/DESIGN.md "Layout"): `python -m core` has no `gui`;
    the console script (app.console) adds it with exactly the options app.main accepts."""
    out = lw("gui")
    assert out.returncode == 2 and "invalid choice: 'gui'" in one_line(out.stderr)

    import argparse

    from app.console import GUI_VERB
    from app.main import build_parser as app_parser

    def options(p: argparse.ArgumentParser) -> set[str]:
        return {o for a in p._actions for o in a.option_strings} - {"-h", "--help"}

    ours = argparse.ArgumentParser()
    GUI_VERB.add_arguments(ours)
    assert options(ours) == options(app_parser())
    assert main(["gui", "--help"]) == 0
    text = capsys.readouterr().out
    for opt in ("--config", "--demo", "--minimized"):
        assert opt in text
    assert main(["gui", "--no-such-option"]) == 2
    assert "unrecognized arguments" in one_line(capsys.readouterr().err)


def test_extra_verbs_extension_point(capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[object] = []

    def add(p: Any) -> None:
        p.add_argument("--n", type=int, default=1)

    def run(args: Any, out: Any) -> int:
        seen.append(args.n)
        out.result(f"hello {args.n}")
        return 7

    hello = Verb("hello", "say hello", "example:\n  lockwarden hello --n 2", add, run)
    assert core_main(["hello", "--n", "2"], extra_verbs=[hello]) == 7
    assert seen == [2] and capsys.readouterr().out == "hello 2\n"
    assert core_main(["-q", "hello"], extra_verbs=[hello]) == 7
    assert capsys.readouterr().out == ""
    with pytest.raises(ValueError, match="defined twice"):
        core_main(["status", "x"], extra_verbs=[Verb("status", "", "", add, run)])


# ------------------------------------------------------------------------------ verbs


@pytest.mark.slow
def test_holder_pid_is_the_calling_shell(lockdir: Path) -> None:
    """`lockwarden try x.lock && make && lockwarden release x.lock`: the lock names the shell,
    shows alive while it works, a sibling shell may not release it, the holder may."""
    lock = lockdir / "x.lock"
    script = r"""
lw() { "$PY" -m core "$@"; }
lw try "$L" --tag 'make all' -q; echo "try=$?"
echo "shell=$$"
lw status "$L" --json; echo "status=$?"
read _
lw release "$L"; echo "release=$?"
lw status "$L" -q; echo "after=$?"
"""
    env = {**ENV, "PY": sys.executable, "L": str(lock)}
    holder = subprocess.Popen(["sh", "-c", script], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert holder.stdout is not None and holder.stdin is not None
    lines: list[str] = []
    while not (lines and lines[-1].startswith("status=")):
        line = holder.stdout.readline()
        assert line, "the holder shell ended early"
        lines.append(line.strip())
    # a sibling: another shell, started by this test, whose ancestry does not include the holder
    other = subprocess.run(["sh", "-c", '"$PY" -m core release "$L"; echo "other=$?"'],
                           capture_output=True, text=True, timeout=60, env=env, check=False)
    rest, err = holder.communicate("go\n", timeout=60)
    lines += rest.splitlines()
    kv = dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("{"))
    assert kv["try"] == "0", err
    st = json.loads(next(line for line in lines if line.startswith("{")))
    assert st["pid"] == int(kv["shell"])
    assert st["locked"] is True and st["state"] == "held" and st["liveness"] == "alive"
    assert st["tag"] == "make all" and st["format"] == "sema"
    assert kv["status"] == "1"
    assert other.stdout.strip() == "other=1"  # another shell may not release it
    assert "not released" in other.stderr
    assert kv["release"] == "0"
    assert kv["after"] == "0"
    assert not lock.exists()


@pytest.mark.slow
def test_try_status_acquire_wait_release_exit_codes(lockdir: Path) -> None:
    lock = lockdir / "build.lock"
    me = os.getpid()  # the subprocesses' parent: the holder they record by default

    out = lw("status", str(lock))
    assert out.returncode == 0 and "locked: false" in out.stdout
    out = lw("wait", str(lock), "--timeout", "1")
    assert out.returncode == 0

    out = lw("try", str(lock), "--tag", "nightly", "--ttl", "600")
    assert out.returncode == 0, out.stderr
    assert f"acquired {lock} (pid {me})" in out.stdout

    st = status_json(lock)
    assert st["pid"] == me and st["tag"] == "nightly" and st["ttl"] == 600
    assert {"locked", "pid", "timestamp", "tag", "path", "format", "host", "holder",
            "liveness", "state", "reasons", "age_s", "expires_at"} <= set(st)
    assert abs(st["timestamp"] - time.time()) < 60

    out = lw("status", str(lock))
    assert out.returncode == 1
    assert out.stdout.startswith("locked: true\npid: ")
    assert "state: held" in out.stdout and "tag: nightly" in out.stdout

    out = lw("try", str(lock), "--pid", "1")
    assert out.returncode == 1
    assert "held" in one_line(out.stderr) and str(me) in out.stderr

    out = lw("acquire", str(lock), "--pid", "1", "--timeout", "0.3")
    assert out.returncode == 1 and "timed out" in one_line(out.stderr)
    # another caller (a bash that goes on after the command) waits, and times out
    out = subprocess.run(
        ["bash", "-c", '"$@"; exit $?', "_", *LW, "wait", str(lock), "--timeout", "0.3"],
        capture_output=True, text=True, timeout=60, env=ENV, check=False)
    assert out.returncode == 1 and "timed out" in one_line(out.stderr)
    # the holder itself (this process, the caller) would wait for ever: refused at once
    # (core/cli/caller.py held_by_caller; tests/core/cli/test_cli_self_held.py)
    for verb in ("acquire", "wait"):
        out = lw(verb, str(lock), "--timeout", "30")
        assert out.returncode == 1 and "release it first" in one_line(out.stderr)

    out = lw("release", str(lock), "--pid", "1")
    assert out.returncode == 1 and "not released" in one_line(out.stderr)
    assert lock.exists()

    out = lw("release", str(lock))
    assert out.returncode == 0 and not lock.exists()
    out = lw("release", str(lock))
    assert out.returncode == 1 and "not" in one_line(out.stderr)


@pytest.mark.slow
@pytest.mark.parametrize("verb", ["wait", "acquire"])
def test_acquire_and_wait_return_when_the_lock_is_released(lockdir: Path, verb: str) -> None:
    lock = lockdir / "deploy.lock"
    # the holder is a process of its own: this process, the waiter's caller, holding it would
    # be refused at once (core/cli/caller.py held_by_caller; tests/core/cli/test_cli_self_held.py)
    holder = subprocess.Popen(["sleep", "600"])
    assert lw("try", str(lock), "-q", "--pid", str(holder.pid)).returncode == 0
    args = [verb, str(lock), "--timeout", "60", *(["--pid", "1"] if verb == "acquire" else [])]
    proc = subprocess.Popen([*LW, *args], env=ENV,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        waiting(proc)
        assert lw("release", str(lock), "--pid", str(holder.pid)).returncode == 0
        assert proc.wait(timeout=60) == 0
        if verb == "acquire":
            assert status_json(lock)["pid"] == 1
        else:
            assert not lock.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_force_release_and_reclaim(lockdir: Path) -> None:
    lock = lockdir / "svc.lock"
    assert lw("try", str(lock), "--pid", "1", "-q").returncode == 0  # pid 1: alive, not ours

    out = lw("reclaim", str(lock))
    assert out.returncode == 1 and "refused" in one_line(out.stderr)
    assert status_json(lock)["pid"] == 1

    out = lw("release", str(lock), "--force", "--reason", "holder hung", "--json")
    assert out.returncode == 0, out.stderr
    done = json.loads(out.stdout)  # the result: the lock now, and what was released
    assert done["released"] is True and done["state"] == "free" and done["locked"] is False
    assert done["displaced"]["pid"] == 1 and done["displaced"]["state"] == "held"
    assert not lock.exists()

    assert lw("try", str(lock), "--pid", "1", "-q").returncode == 0
    out = lw("reclaim", str(lock), "--force", "--reason", "operator", "--tag", "mine")
    assert out.returncode == 0, out.stderr
    st = status_json(lock)
    assert st["pid"] == os.getpid() and st["tag"] == "mine"

    log = lw("audit", str(lockdir), "--json")
    assert log.returncode == 0
    entries = json.loads(log.stdout)
    ops = [e["operation"] for e in entries]
    assert "force_release" in ops
    assert all(e["via"] == "cli" for e in entries if not e["foreign"])
    forced = next(e for e in entries if e["operation"] == "force_release")
    assert "holder hung" in json.dumps(forced["details"])


@pytest.mark.slow
def test_stale_lock_of_another_tool_is_reclaimed(lockdir: Path) -> None:
    lock = lockdir / "old.lock"
    old = int(time.time()) - 7200
    lock.write_text(f"pid={dead_pid()}\ntimestamp={old}\ntag=crashed\n")
    assert status_json(lock)["state"] == "stale"
    out = lw("try", str(lock), "--tag", "next")
    assert out.returncode == 0, out.stderr
    st = status_json(lock)
    assert st["pid"] == os.getpid() and st["tag"] == "next" and st["state"] == "held"

    lock2 = lockdir / "old2.lock"
    lock2.write_text(f"pid={dead_pid()}\ntimestamp={old}\n")
    out = lw("reclaim", str(lock2))
    assert out.returncode == 0, out.stderr
    assert status_json(lock2)["pid"] == os.getpid()


@pytest.mark.slow
def test_stale_after_flag_is_the_policy_of_every_verb_that_judges(lockdir: Path) -> None:
    """--stale-after builds the one StalePolicy the verb judges with (docs/DESIGN.md "Default
    stale policy"): a 90 s old lock of another tool whose holder is dead is not stale under the
    default 3600 s, and stale under --stale-after 30 -- for status, list, try and reclaim. On a
    host booted less than 90 s ago the lock is younger and the limit smaller, in proportion (an
    older lock would predate the boot: stale under any policy)."""
    age = age_after_boot(90)
    taken = int(time.time() - age) + 1
    limit = str(age / 3)  # 30 s
    lock = lockdir / "other.lock"
    lock.write_text(f"pid={dead_pid()}\ntimestamp={taken}\ntag=t\n")
    st = status_json(lock)
    assert st["state"] != "stale"
    assert any(r["code"] == "younger_than_stale_after" and r["limit_s"] == 3600
               for r in st["reasons"]), st["reasons"]
    out = lw("status", str(lock), "--json", "--stale-after", limit)
    assert json.loads(out.stdout)["state"] == "stale" and out.returncode == 1
    listed = json.loads(lw("list", str(lockdir), "--json", "--stale-after", limit).stdout)
    assert [x["state"] for x in listed] == ["stale"]
    before = lock.read_bytes()
    assert lw("try", str(lock)).returncode == 1  # default policy: not stale, held
    assert lw("reclaim", str(lock)).returncode == 1
    assert lock.read_bytes() == before
    assert lw("try", str(lock), "-q", "--stale-after", limit).returncode == 0
    lock.unlink()
    lock.write_bytes(before)
    assert lw("reclaim", str(lock), "-q", "--stale-after", limit).returncode == 0


def test_status_json_reasons_are_objects_with_codes(lockdir: Path) -> None:
    """`status --json` carries each reason as data: {"code", "text", ...params}
    (docs/DESIGN.md "Liveness and verdicts"); the text output renders the same texts."""
    free = status_json(lockdir / "none.lock")
    assert [r["code"] for r in free["reasons"]] == ["no_lock_file"]
    lock = lockdir / "dead.lock"
    pid = dead_pid()
    lock.write_text(f"pid={pid}\ntimestamp={int(time.time()) - 7200}\n")
    st = status_json(lock)
    assert st["state"] == "stale"
    assert all(isinstance(r, dict) and isinstance(r["code"], str) and isinstance(r["text"], str)
               for r in st["reasons"])
    dead = next(r for r in st["reasons"] if r["code"] == "holder_dead")
    assert dead["pid"] == pid
    text = lw("status", str(lock)).stdout
    for r in st["reasons"]:
        assert f"reason: {r['text']}" in text


@pytest.mark.slow
def test_list_table_and_json(fixtures_dir: Path, tmp_path: Path) -> None:
    out = lw("list", str(fixtures_dir / "sema"), str(fixtures_dir / "semats"))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["STATE", "AGE", "PID", "LIVENESS", "FORMAT", "KIND", "HOLDER/TAG",
                                "PATH"]
    assert len(lines) == 1 + 5
    # aligned: the PATH column starts at the same offset on every line
    col = lines[0].index("PATH")
    assert all(line[col - 2: col] == "  " for line in lines[1:])
    assert any("'deploy-v1.2.3'" in line for line in lines)

    out = lw("list", str(tmp_path / "missing"))
    assert out.returncode == 3 and "no such directory" in one_line(out.stderr)
    out = lw("list", str(fixtures_dir / "sema" / "tagged.lock"))
    assert out.returncode == 3 and "not a directory" in one_line(out.stderr)

    empty = tmp_path / "empty"
    empty.mkdir()
    out = lw("list", str(empty), "--json")
    assert out.returncode == 0 and json.loads(out.stdout) == []


# ------------------------------------------------------------------------------ interop

SEMA_EXPECTED = {
    "sema/newline-in-tag.lock": (11348, 1795289499, "line1 line2"),
    "sema/tagged.lock": (11294, 1795289498, "deploy-v1.2.3"),
    "sema/untagged.lock": (11296, 1795289498, None),
    "semats/control-chars-sanitized.lock": (11334, 1795289499, "evil injected=1 x"),
    "semats/unicode-tag.lock": (
        11309, 1795289499,
        (FIXTURES / "semats/unicode-tag.lock").read_text("utf-8").split("tag=", 1)[1].rstrip("\n"),
    ),
}


def _utc(text: str) -> int:
    from datetime import datetime

    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp())


OTHER_EXPECTED: dict[str, dict[str, Any]] = {
    "task-mcp/enhanced-iso.lock": {"format": "task-mcp", "holder": "ci-pipeline-gh-456",
                                   "timestamp": _utc("2026-11-21T09:30:00Z"), "ttl": 86400},
    "task-mcp/simple-epoch-ms.lock": {"format": "task-mcp", "holder": "pid-4242@devbox",
                                      "timestamp": 1795280000, "ttl": 3600},
    "pidfile/daemon.pid": {"format": "pidfile", "pid": 4242},
    "pidfile/.X42-lock": {"format": "pidfile", "pid": 4242},
    "af/proof/ledger/ledger.lock": {"format": "af-ledger", "holder": "append-operation",
                                    "timestamp": _utc("2026-11-21T09:30:00Z")},
    "af/proof/locks/1.2.3.lock": {"format": "af-claim", "holder": "agent-uuid-1234",
                                  "timestamp": _utc("2026-11-21T09:30:00Z")},
}


@pytest.mark.slow
def test_every_fixture_reads_in_status_and_list(fixtures_dir: Path) -> None:
    for rel, (pid, ts, tag) in SEMA_EXPECTED.items():
        st = status_json(fixtures_dir / rel)
        assert (st["format"], st["pid"], st["timestamp"], st["tag"]) == ("sema", pid, ts, tag), rel
        assert st["locked"] is True and st["state"] != "unreadable", rel
    for rel, want in OTHER_EXPECTED.items():
        st = status_json(fixtures_dir / rel)
        assert st["locked"] is True and st["state"] != "unreadable", (rel, st)
        assert {k: st[k] for k in want} == want, rel

    out = lw("list", str(fixtures_dir), "--recursive", "--json")
    assert out.returncode == 0, out.stderr
    listed = {item["path"]: item for item in json.loads(out.stdout)}
    for rel, (pid, ts, tag) in SEMA_EXPECTED.items():
        item = listed[str(fixtures_dir / rel)]
        assert (item["pid"], item["timestamp"], item["tag"]) == (pid, ts, tag)
    for rel, want in OTHER_EXPECTED.items():
        if rel == "pidfile/daemon.pid" or rel.endswith(".lock") or rel.endswith("-lock"):
            item = listed[str(fixtures_dir / rel)]
            assert {k: item[k] for k in want} == want, rel
    assert not any(p.endswith(".lock_audit.log") for p in listed)


def parse_lock_file(path: str) -> dict[str, str]:
    """The specs' reader, verbatim (spec 000, "Example: Parsing in Python")."""
    with open(path) as f:
        info = {}
        for line in f:
            if '=' in line:
                key, value = line.strip().split('=', 1)
                info[key] = value
    return info


@pytest.mark.slow
def test_shell_example_lock_and_our_lock_interoperate(lockdir: Path) -> None:
    shell_lock = lockdir / "my.lock"
    script = (
        'echo "pid=$$" > "$L"; echo "timestamp=$(date +%s)" >> "$L"; '
        'echo "tag=shell-script" >> "$L"; echo "$$"'
    )
    out = subprocess.run(["sh", "-c", script], env={**ENV, "L": str(shell_lock)},
                         capture_output=True, text=True, check=True)
    st = status_json(shell_lock)
    assert st["pid"] == int(out.stdout) and st["tag"] == "shell-script"
    assert st["format"] == "sema" and st["locked"] is True and abs(st["age_s"]) < 60

    ours = lockdir / "ours.lock"
    assert lw("try", str(ours), "--tag", "ci build", "--ttl", "30").returncode == 0
    info = parse_lock_file(str(ours))
    st = status_json(ours)
    assert info["pid"] == str(st["pid"]) == str(os.getpid())
    assert info["timestamp"] == str(st["timestamp"])
    assert info["tag"] == "ci build"
    assert list(info)[:3] == ["pid", "timestamp", "tag"]

    crlf = lockdir / "crlf.lock"
    crlf.write_bytes(ours.read_bytes().replace(b"\n", b"\r\n"))
    assert parse_lock_file(str(crlf)) == info
    st2 = status_json(crlf)
    assert (st2["pid"], st2["timestamp"], st2["tag"]) == (st["pid"], st["timestamp"], "ci build")


# ------------------------------------------------------------------------------ bad input


def _bad_inputs(d: Path) -> dict[str, Path]:
    cases = {}
    cases["directory"] = d / "dir.lock"
    cases["directory"].mkdir()
    cases["fifo"] = d / "fifo.lock"
    os.mkfifo(cases["fifo"])
    target = d / "target.txt"
    target.write_text("pid=1\ntimestamp=1\n")
    cases["symlink"] = d / "link.lock"
    cases["symlink"].symlink_to(target)
    cases["garbage"] = d / "garbage.lock"
    cases["garbage"].write_bytes(b"\x00\xff\xfe garbage \x89PNG\r\n")
    _age(cases["garbage"], 60)  # past the 2 s "writing" grace, not yet stale
    return cases


def _age(p: Path, seconds: float) -> None:
    t = time.time() - seconds
    os.utime(p, (t, t))


@pytest.mark.slow
@pytest.mark.parametrize("verb", ["status", "try", "release", "reclaim", "wait", "acquire"])
def test_bad_paths_one_line_exit_3_nothing_changed(lockdir: Path, verb: str) -> None:
    cases = _bad_inputs(lockdir)
    missing = lockdir / "no-such-dir" / "x.lock"
    before = tree(lockdir)
    extra = ["--timeout", "0.2"] if verb in ("wait", "acquire") else []
    for name, path in [*cases.items(), ("missing dir", missing)]:
        if verb in ("release", "wait") and name == "garbage":
            continue  # below: a garbage lock is held by nobody we know
        out = lw(verb, str(path), *extra)
        assert out.returncode == 3, (verb, name, out.stdout, out.stderr)
        line = one_line(out.stderr)
        assert str(path) in line, line
    assert tree(lockdir) == before


@pytest.mark.slow
def test_garbage_lock_release_and_wait(lockdir: Path) -> None:
    garbage = lockdir / "garbage.lock"
    garbage.write_bytes(b"\x00\xff\xfe garbage\n")
    _age(garbage, 60)
    before = tree(lockdir)
    out = lw("release", str(garbage))
    assert out.returncode in (1, 3)
    one_line(out.stderr)
    out = lw("wait", str(garbage), "--timeout", "0.2")
    assert out.returncode in (1, 3)
    one_line(out.stderr)
    assert tree(lockdir) == before


@pytest.mark.slow
def test_unreadable_file_and_read_only_directory(lockdir: Path) -> None:
    cmd = list(LW)
    d = lockdir
    if os.geteuid() == 0:  # root reads and writes anything: drop to uid 65534 with setpriv
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root and setpriv (util-linux) is missing")
        cmd = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
        # pytest's tmp_path lives under a 0700 directory of root: use one uid 65534 can enter
        d = Path(tempfile.mkdtemp(prefix="lockwarden-cli-"))
    try:
        lock = d / "secret.lock"
        lock.write_text(f"pid={os.getpid()}\ntimestamp={int(time.time())}\n")
        lock.chmod(0)
        d.chmod(0o555)  # and nobody may create files here
        before = tree(d)
        out = subprocess.run([*cmd, "status", str(lock)], capture_output=True, text=True,
                             env=ENV, timeout=60, check=False)
        if d != lockdir and not out.stderr.startswith("lockwarden:"):
            pytest.skip(f"uid 65534 cannot run this checkout's Python: {out.stderr[-200:]}")
        assert out.returncode == 3, out.stderr
        assert "permission denied" in one_line(out.stderr)

        new = d / "new.lock"
        out = subprocess.run([*cmd, "try", str(new)], capture_output=True, text=True,
                             env=ENV, timeout=60, check=False)
        assert out.returncode == 3, out.stderr
        line = one_line(out.stderr)
        assert str(d) in line and "Permission denied" in line
        assert tree(d) == before
    finally:
        d.chmod(0o755)
        if d != lockdir:
            shutil.rmtree(d)


# ------------------------------------------------------------------------------ audit, clean


@pytest.mark.slow
def test_audit_tail_and_verify(lockdir: Path) -> None:
    lock = lockdir / "a.lock"
    for _ in range(2):
        assert lw("try", str(lock), "-q").returncode == 0
        assert lw("release", str(lock), "-q").returncode == 0
    out = lw("audit", str(lock), "--tail", "1", "--json")
    assert out.returncode == 0
    (entry,) = json.loads(out.stdout)
    assert entry["operation"] == "release" and entry["via"] == "cli"
    assert entry["lockPath"].endswith("a.lock")

    out = lw("audit", str(lockdir))
    assert out.returncode == 0
    assert out.stdout.splitlines()[0].split()[:3] == ["TIME", "OPERATION", "RESULT"]
    assert len(out.stdout.splitlines()) == 5

    out = lw("audit", str(lockdir), "--verify")
    assert out.returncode == 0 and "chain intact" in out.stdout

    log = lockdir / ".lock_audit.log"
    lines = log.read_text().splitlines(keepends=True)
    lines[1], lines[2] = lines[2], lines[1]
    log.write_text("".join(lines))
    out = lw("audit", str(lockdir), "--verify")
    assert out.returncode == 1 and "BROKEN" in one_line(out.stderr)

    out = lw("audit", str(lockdir / "no-such-dir" / "x.lock"))
    assert out.returncode == 3
    one_line(out.stderr)


def test_clean_removes_only_our_old_temp_files(lockdir: Path) -> None:
    """Only names of the engine's full temp shape whose writer is gone and that are older than
    the minimum age go; a held lock's live temp, a live writer's temp, a young one, a symlink,
    and every other name (the old ``.<lock>.<token>.tmp`` shape included) stay."""
    token = "0123456789abcdef" * 2
    gone = subprocess.Popen(["true"])
    gone.wait()
    dead = gone.pid
    old = time.time() - 600
    ours_old = lockdir / f".x.lock.{dead}.{token}.lwtmp"
    ours_swap = lockdir / f".y.lock.{dead}.{token}.lwswap"
    ours_young = lockdir / f".z.lock.{dead}.{'f' * 32}.lwtmp"
    live_writer = lockdir / f".u.lock.{os.getpid()}.{'c' * 32}.lwtmp"
    linked = lockdir / f".w.lock.{dead}.{'a' * 32}.lwtmp"
    foreign = [lockdir / "x.lock.1234.abcd.tmp", lockdir / f".x.lock.{token}.tmp",
               lockdir / f".x.lock.{token}.lwtmp", lockdir / "x.lock"]
    for p in [ours_old, ours_swap, ours_young, live_writer, linked, *foreign]:
        p.write_text("pid=1\ntimestamp=1\n")
    os.link(linked, lockdir / "w.lock")  # a held lock's live temp: st_nlink == 2
    for p in [ours_old, ours_swap, live_writer, linked, *foreign]:
        os.utime(p, (old, old))
    symlink = lockdir / f".v.lock.{dead}.{'b' * 32}.lwtmp"
    symlink.symlink_to(lockdir / "x.lock")

    out = lw("clean", str(lockdir), "--dry-run")
    assert out.returncode == 0
    assert out.stdout.splitlines() == [f"would remove {ours_old}", f"would remove {ours_swap}"]
    assert ours_old.exists()

    out = lw("clean", str(lockdir))
    assert out.returncode == 0
    assert out.stdout.splitlines() == [f"removed {ours_old}", f"removed {ours_swap}"]
    assert not ours_old.exists() and not ours_swap.exists()
    for p in [ours_young, live_writer, linked, symlink, lockdir / "w.lock", *foreign]:
        assert os.path.lexists(p), p

    out = lw("clean", str(lockdir / "missing"))
    assert out.returncode == 3
    one_line(out.stderr)


BLOCK_QT = """
import sys
ENTRY = sys.argv.pop(1)  # core.cli.main (the engine's CLI) or app.console (the console script)
BLOCKED = ("PySide6", "shiboken6", "watchdog", "app")
ALLOWED = {"app", "app.console"} if ENTRY == "app.console" else set()
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED and name not in ALLOWED:
            raise ImportError("blocked for this test: " + name)
        return None
sys.meta_path.insert(0, Block())
main = __import__(ENTRY, fromlist=["main"]).main
code = main(sys.argv[1:])
loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED and m not in ALLOWED)
print("LOADED", loaded, file=sys.stderr)
sys.exit(code)
"""


@pytest.mark.slow
@pytest.mark.parametrize("entry", ["core.cli.main", "app.console"])
def test_status_try_release_never_import_qt_or_watchdog(lockdir: Path, entry: str) -> None:
    """docs/cli.md "Start-up time": the CLI never imports Qt or watchdog on these paths (nor
    the app beyond app.console); with them unavailable the verbs still work, and ``gui`` says in
    one line that the app cannot start."""
    lock = str(lockdir / "x.lock")
    for args, code in ((["try", lock], 0), (["status", lock], 1), (["release", lock], 0)):
        out = subprocess.run([sys.executable, "-c", BLOCK_QT, entry, *args], capture_output=True,
                             text=True, env=ENV, timeout=60, check=False)
        assert out.returncode == code, out.stderr
        assert "LOADED []" in out.stderr
    if entry == "core.cli.main":
        return
    out = subprocess.run([sys.executable, "-c", BLOCK_QT, entry, "gui"], capture_output=True,
                         text=True, env=ENV, timeout=60, check=False)
    assert out.returncode == 3
    assert "desktop app is not available" in out.stderr.splitlines()[0]
    assert "Traceback" not in out.stderr


def test_status_of_a_directory_is_a_usage_error_that_points_to_list(lockdir: Path) -> None:
    """``status DIR`` printed ``locked: true`` and a verdict for the directory, then an error:
    a directory is no lock; one line says so and names ``list``, stdout stays empty, exit 3
    as for every verb given a directory (docs/cli.md, "Exit codes")."""
    for extra in ((), ("--json",)):
        out = lw("status", str(lockdir), *extra)
        assert out.returncode == 3 and out.stdout == "", out.stdout
        assert one_line(out.stderr) == (
            f"lockwarden: status {lockdir}: a directory, not a lock file (the locks in it: "
            f"lockwarden list {lockdir})")


def test_try_on_flock_tools_empty_file_says_who_it_does_not_keep_out(lockdir: Path) -> None:
    """A ``try`` that takes over the empty file filelock, portalocker and flock(1) lock says
    that nothing keeps them out once it has ended (they see only kernel locks, and no process
    of the command outlives it), and names ``run``; a lock file of its own says nothing."""
    empty = lockdir / "job.lock"
    empty.write_bytes(b"")
    os.utime(empty, (1_500_000_000, 1_500_000_000))
    out = lw("try", str(empty))
    assert out.returncode == 0, out.stderr
    assert "filelock, portalocker and flock(1)" in out.stderr
    assert f"lockwarden run {empty} -- CMD" in out.stderr
    taken = subprocess.run(["flock", "--nonblock", str(empty), "true"], timeout=60)
    assert taken.returncode == 0  # what the note warns of: flock(1) gets it
    mcp = lockdir / "mcp.lock"  # task-mcp keeps what it replaced at the JSON's top level
    mcp.write_bytes(b"")
    os.utime(mcp, (1_500_000_000, 1_500_000_000))
    out = lw("try", str(mcp), "--format", "task-mcp")
    assert out.returncode == 0 and "filelock, portalocker and flock(1)" in out.stderr, out
    out = lw("try", str(lockdir / "own.lock"))
    assert out.returncode == 0 and out.stderr == "", out.stderr
