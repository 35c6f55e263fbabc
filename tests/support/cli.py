"""The ``lockwarden`` command line as the tests run it: ``python -m core`` of this checkout in a
real subprocess (docs/cli.md), and the small checks every CLI test makes of what it printed.

``ENV`` is the environment of the test session when this module was first imported (after
tests/conftest.py gave the run its private ``XDG_DATA_HOME``); :func:`cli_env` is the
environment of *now*, so a test's ``monkeypatch.setenv`` (the ``private_state`` fixture of
tests/conftest.py) reaches the processes it starts."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, overload

import pytest

ROOT = Path(__file__).resolve().parents[2]
"""The checkout: first on ``PYTHONPATH`` of every process the tests start."""
LW = [sys.executable, "-m", "core"]
"""The argv prefix of the command line (the engine's CLI, no Qt)."""
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
"""The session's environment with this checkout on ``PYTHONPATH`` (taken at import)."""
FIXTURES = ROOT / "tests" / "data" / "fixtures"
"""The reference tools' lock files (copy them with the ``fixtures_dir`` fixture)."""


def cli_env(**extra: str) -> dict[str, str]:
    """This process's environment now, with this checkout on ``PYTHONPATH`` and ``extra``
    added (e.g. ``LOCKWARDEN_PG_PW``)."""
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


@overload
def lw(*args: str, timeout: float = 60, env: Mapping[str, str] | None = None,
       text: Literal[True] = True, **kw: Any) -> subprocess.CompletedProcess[str]: ...


@overload
def lw(*args: str, timeout: float = 60, env: Mapping[str, str] | None = None,
       text: Literal[False], **kw: Any) -> subprocess.CompletedProcess[bytes]: ...


def lw(*args: str, timeout: float = 60, env: Mapping[str, str] | None = None,
       text: bool = True, **kw: Any) -> subprocess.CompletedProcess[Any]:
    """Run ``python -m core ARGS`` to its end and return it, output captured (text unless
    ``text=False``). ``env`` is the whole environment (default :func:`cli_env`, taken now);
    ``timeout`` (seconds) only stops a hang; ``kw`` goes to :func:`subprocess.run`."""
    return subprocess.run([*LW, *args], capture_output=True, text=text, timeout=timeout,
                          env=cli_env() if env is None else dict(env), check=False, **kw)


def one_line(err: str) -> str:
    """Assert stderr is exactly one line (no traceback) and return it."""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def status_json(path: Path | str) -> dict[str, Any]:
    """``lockwarden status PATH --json``, parsed (exit 0, 1 or 3 allowed)."""
    out = lw("status", str(path), "--json")
    assert out.returncode in (0, 1, 3), out.stderr
    st: dict[str, Any] = json.loads(out.stdout)
    return st


def dead_pid() -> int:
    """A PID that just exited (reaped), so no process has it (PIDs are not reused at once)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def waiting(proc: subprocess.Popen[str], timeout: float = 30) -> None:
    """Wait until ``proc`` is blocked in the engine's waiter (it holds an inotify fd that
    watches the lock's directory). Linux /proc only; skips elsewhere."""
    if not Path("/proc/self/fd").exists():
        pytest.skip("needs /proc to see that the process is waiting")
    fd_dir = Path(f"/proc/{proc.pid}/fd")
    deadline = time.monotonic() + timeout
    while True:
        try:
            if any("inotify" in os.readlink(fd_dir / fd) for fd in os.listdir(fd_dir)):
                return
        except OSError:
            pass
        assert proc.poll() is None, "exited instead of waiting"
        assert time.monotonic() < deadline, "never started waiting"
        time.sleep(0.02)


class Lines:
    """Reads a process's stdout line by line in a thread; :meth:`next_json` waits with a
    timeout (seconds)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.q: queue.Queue[str | None] = queue.Queue()
        assert proc.stdout is not None
        stdout = proc.stdout

        def pump() -> None:
            for line in stdout:
                self.q.put(line)
            self.q.put(None)

        threading.Thread(target=pump, daemon=True).start()

    def next_json(self, timeout: float = 30) -> dict[str, Any]:
        """The next line, parsed as a JSON object; fails when the process ended first."""
        line = self.q.get(timeout=timeout)
        assert line is not None, "watch exited early"
        obj = json.loads(line)
        assert isinstance(obj, dict)
        return obj

    def until(self, pred: Callable[[dict[str, Any]], bool], timeout: float = 30
              ) -> dict[str, Any]:
        """The first line (JSON object) for which ``pred`` holds, within ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            obj = self.next_json(max(0.1, deadline - time.monotonic()))
            if pred(obj):
                return obj


class Watch:
    """``lockwarden watch DIR... --json`` in the background (environment ``env``, ``extra``
    arguments, argv ``prefix`` such as ``unshare``), its lines read in a thread; the
    constructor returns once it said ``ready``."""

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
