"""core.engine.end_user: a process using a file is ended only while it still uses it and is the
one confirmed; SIGTERM first, SIGKILL when asked again; audited in the per-user log, never in
the file's folder (docs/cli.md, "who")."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from core.engine.end_user import NotUsing, end_user, wait_for_exit

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

USER = ("import signal, sys; f = open(sys.argv[1]); "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN) if sys.argv[2] == 'stubborn' else None; "
        "print('ready', flush=True); sys.stdin.read()")


@pytest.fixture
def own_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This user's own log directory (``$XDG_STATE_HOME/lockwarden/log``), private to the
    test."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture
def user(tmp_path: Path) -> Iterator[object]:
    procs: list[subprocess.Popen[str]] = []

    def start(path: Path, mode: str = "polite") -> subprocess.Popen[str]:
        p = subprocess.Popen([sys.executable, "-c", USER, str(path), mode], text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        procs.append(p)
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        return p

    yield start
    for p in procs:
        p.kill()
        p.wait()


def _entries(root: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for log in root.rglob("*.log") for line in log.read_text()
            .splitlines()]


def test_sigterm_then_sigkill_audited_in_the_users_own_log(tmp_path: Path, own_log: Path,
                                                           user) -> None:
    f = tmp_path / "report.pdf"
    f.write_text("x")
    polite = user(f)
    start = psutil.Process(polite.pid).create_time()
    end_user(str(f), polite.pid, start, reason="eject the stick")
    assert polite.wait(timeout=30) == -15
    stubborn = user(f, "stubborn")
    start = psutil.Process(stubborn.pid).create_time()
    end_user(str(f), stubborn.pid, start)
    assert not wait_for_exit(stubborn.pid, start, 0.3)  # it ignores SIGTERM
    end_user(str(f), stubborn.pid, start, kill=True)
    assert stubborn.wait(timeout=30) == -9
    entries = [e for e in _entries(own_log) if e["operation"] == "end_user"]
    assert [e["details"]["signal"] for e in entries] == ["SIGTERM", "SIGTERM", "SIGKILL"]
    assert entries[0]["details"]["reason"] == "eject the stick"
    assert entries[0]["lockPath"] == str(f)
    assert not list(tmp_path.glob(".lock_audit.log"))  # nothing written beside the file


def test_nothing_is_signalled_when_the_process_let_go_or_is_another(tmp_path: Path,
                                                                   own_log: Path, user) -> None:
    f, other = tmp_path / "a.txt", tmp_path / "b.txt"
    f.write_text("x")
    other.write_text("y")
    p = user(other)
    start = psutil.Process(p.pid).create_time()
    with pytest.raises(NotUsing, match="no longer uses"):
        end_user(str(f), p.pid, start)
    with pytest.raises(NotUsing, match="not the process you confirmed"):
        end_user(str(other), p.pid, start - 5)
    assert p.poll() is None
    assert not [e for e in _entries(own_log) if e["operation"] == "end_user"]


def test_waiting_without_a_pidfd_falls_back_to_psutil(tmp_path: Path, user,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel before Linux 5.3 (or a seccomp filter) refuses ``pidfd_open`` with ENOSYS
    (EPERM): the wait goes on through psutil and says a running process still runs, and
    sees it exit (it used to say the process had exited)."""
    import errno
    import os

    def no_pidfd(pid: int, flags: int = 0) -> int:
        raise OSError(errno.ENOSYS, "Function not implemented")

    f = tmp_path / "report.pdf"
    f.write_text("x")
    stubborn = user(f, "stubborn")
    start = psutil.Process(stubborn.pid).create_time()
    monkeypatch.setattr(os, "pidfd_open", no_pidfd)
    # psutil probes pidfds once and caches it: on such a kernel its probe says no
    from psutil import _psposix

    monkeypatch.setattr(_psposix, "can_use_pidfd_open", lambda: False, raising=False)
    assert not wait_for_exit(stubborn.pid, start, 0.3)
    stubborn.kill()
    assert wait_for_exit(stubborn.pid, start, 30)
