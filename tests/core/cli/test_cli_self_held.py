"""A lock held by the very caller ``try``/``acquire``/``wait`` would record (core/cli/caller.py
``held_by_caller``; docs/cli.md, "Who holds a lock taken from the command line"), and
``release --json``'s result (docs/cli.md, "Verbs").

A new user's shell ran ``lockwarden try x.lock; lockwarden acquire x.lock``: the lock records
that shell, which waits for ``acquire``, which waited for the shell -- for ever. Each command
runs here in a real ``bash -c`` (``lockwarden`` is a shim that ``exec``s ``python -m core`` of
this checkout, so the shell is the recorded caller), under a subprocess timeout: a hang fails.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from core.cli.caller import held_by_caller
from core.codes import Code
from core.reasons import render
from core.verdicts.inspect import inspect

ROOT = Path(__file__).resolve().parents[3]

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="POSIX shells")]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """PATH with a ``lockwarden`` that execs ``python -m core`` of this checkout (no extra
    ancestor between the shell and the command)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    lw = bindir / "lockwarden"
    lw.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m core "$@"\n')
    lw.chmod(0o755)
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return {**base, "PATH": f"{bindir}{os.pathsep}{base.get('PATH', '')}", "D": str(tmp_path)}


def _bash(script: str, env: dict[str, str], cwd: Path) -> dict[str, str]:
    """Run ``script`` in ``bash -c`` (60 s at most: a self-deadlock fails the test) and return
    the ``name=value`` lines it echoed."""
    proc = subprocess.Popen(["bash", "-c", script], env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:  # a hang: end the shell and the lockwarden it waits for
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert "Traceback" not in stderr, stderr
    return dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line)


@pytest.mark.parametrize("verb", [["acquire"], ["acquire", "--timeout", "30"], ["wait"], ["try"],
                                  ["run"]],
                         ids=["acquire", "acquire-timeout", "wait", "try", "run"])
def test_a_lock_held_by_the_calling_shell_is_refused_at_once(
    verb: list[str], env: dict[str, str], lockdir: Path
) -> None:
    """``try x; acquire x`` (or ``wait x``) in one shell: exit 1 at once, the line names this
    shell and the release command; then the shell releases it as usual."""
    lock = lockdir / "x.lock"
    args = " ".join(verb)
    command = " -- echo ran" if verb == ["run"] else ""  # run's command is never run
    got = _bash(f'lockwarden try x.lock -q; echo "try=$?"; echo "shell=$$"; '
                f'lockwarden {args} x.lock{command} 2>"$D/err"; echo "again=$?"; '
                'lockwarden release x.lock -q; echo "release=$?"', env, lockdir)
    assert got == {"try": "0", "shell": got["shell"], "again": "1", "release": "0"}, got
    err = (Path(env["D"]) / "err").read_text()
    assert f"x.lock: held by this shell (PID {got['shell']}, bash) since " in err, err
    assert "release it first: lockwarden release x.lock" in err, err
    assert not lock.exists()


def test_a_holder_given_by_pid_is_waited_for_not_called_the_caller(
    env: dict[str, str], lockdir: Path
) -> None:
    """``try --pid N`` then ``acquire --pid N``: N is another process, which may release the
    lock: no "held by this shell", an ordinary time-out."""
    holder = subprocess.Popen(["sleep", "60"])
    try:
        got = _bash(f'lockwarden try --pid {holder.pid} p.lock -q; echo "try=$?"; '
                    f'lockwarden acquire --pid {holder.pid} p.lock --timeout 1 2>"$D/err"; '
                    'echo "again=$?"', env, lockdir)
    finally:
        holder.kill()
        holder.wait()
    assert got == {"try": "0", "again": "1"}, got
    err = (Path(env["D"]) / "err").read_text()
    assert "timed out waiting for p.lock" in err and "this shell" not in err, err


def test_a_lock_held_by_another_shell_is_waited_for_as_before(
    env: dict[str, str], lockdir: Path
) -> None:
    """No false alarm: a sibling shell's lock times out (exit 1) as any held lock, and
    :func:`held_by_caller` names nothing for a PID other than the holder's."""
    lock = lockdir / "y.lock"
    holder = subprocess.Popen(["bash", "-c", 'lockwarden try y.lock -q && echo ok && read _'],
                              env=env, cwd=lockdir, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ok"
        got = _bash('lockwarden acquire y.lock --timeout 0.2 2>"$D/err"; echo "acquire=$?"',
                    env, lockdir)
        assert got == {"acquire": "1"}
        err = (Path(env["D"]) / "err").read_text()
        assert err.startswith("lockwarden: timed out waiting for y.lock: held by "), err
        status = inspect(str(lock))
        assert held_by_caller(status, os.getpid()) is None
        own = held_by_caller(status, holder.pid)
        assert own is not None and own.code is Code.HELD_BY_CALLER
        assert own.get("pid") == holder.pid and own.get("shell") is True
        assert render(own).startswith(f"held by this shell (PID {holder.pid}, bash) since ")
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)
    assert lock.exists()  # bash exited without releasing: its lock is stale now
    assert held_by_caller(inspect(str(lock)), holder.pid) is None


def test_release_json_prints_the_result(env: dict[str, str], lockdir: Path) -> None:
    """``release --json``: the lock after the release (free), ``released: true`` and the
    status of the lock removed (``displaced``), as a server lock's release prints it."""
    _bash('lockwarden try k.lock -q && lockwarden release k.lock --json >"$D/out"; '
          'echo "release=$?"', env, lockdir)
    done = json.loads((Path(env["D"]) / "out").read_text())
    assert done["released"] is True and done["locked"] is False and done["state"] == "free"
    assert done["displaced"]["state"] == "held" and done["displaced"]["locked"] is True
    assert done["kept"] is None
    assert not (lockdir / "k.lock").exists()
