"""``lockwarden wait PATH --notify`` (docs/cli.md, "``wait --notify``"): when the lock is free
the wait ends with a desktop notification, or, without ``notify-send``, with a note saying no
notification was shown. A real held lock, a real release, a real ``PATH``."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import ENV, LW, lw, waiting


@pytest.mark.slow
def test_wait_notify_without_notify_send_says_so(lockdir: Path) -> None:
    lock = lockdir / "deploy.lock"
    # a holder of its own: this process, the waiter's caller, holding it would be refused at
    # once (core/cli/caller.py held_by_caller)
    holder = subprocess.Popen(["sleep", "600"])
    assert lw("try", str(lock), "-q", "--pid", str(holder.pid)).returncode == 0
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and not os.path.exists(os.path.join(d, "notify-send")))
    assert shutil.which("notify-send", path=path) is None
    proc = subprocess.Popen([*LW, "wait", str(lock), "--notify", "--timeout", "60"],
                            env={**ENV, "PATH": path}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        waiting(proc)
        assert lw("release", str(lock), "--pid", str(holder.pid)).returncode == 0
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        holder.kill()
        holder.wait()
    assert proc.returncode == 0
    assert out.strip() == f"{lock} is free"
    assert err.strip() == ("lockwarden: no desktop notification: notify-send is not installed "
                           "(libnotify-bin)")


def test_wait_notify_after_a_timeout_notifies_nothing(lockdir: Path) -> None:
    lock = lockdir / "held.lock"
    assert lw("try", str(lock), "--pid", "1", "-q").returncode == 0
    out = subprocess.run([*LW, "wait", str(lock), "--notify", "--timeout", "0"], env=ENV,
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 1
    assert "timed out" in out.stderr and "notification" not in out.stderr
