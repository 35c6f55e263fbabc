"""A project tree that meets the inotify watch limit (ENOSPC) while watching its
sub-directories says so in its status, and says nothing of it any more once every directory it
walks is watched again (core/watch/directories.py ``_sync_tree``). Run in a user namespace of its
own whose ``user.max_inotify_watches`` is small (the limit of the machine is not touched)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

SCRIPT = r"""
import os, shutil, sys, time
sys.path.insert(0, sys.argv[2])
from core.config.model import ProjectSpec
from core.watch.watcher import Watcher
root = sys.argv[1]
seen = []
w = Watcher([ProjectSpec(root).watch_spec()], lambda cs: None, on_dirs=seen.append,
            rescan_interval=0.3)
w.start()
def wait(pred, what):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if seen and pred(seen[-1][0]):
            return
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}: {seen[-1] if seen else None}")
wait(lambda s: "watch limit" in s.message, "the limit in the status")
for i in range(2, 12):
    shutil.rmtree(os.path.join(root, f"d{i}"))
wait(lambda s: s.mode == "events" and not s.message, "the limit gone from the status")
w.close()
print("ok")
"""


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("unshare") is None
                    or not os.path.exists("/proc/sys/user/max_inotify_watches"),
                    reason="needs Linux user namespaces")
def test_the_watch_limit_message_goes_when_every_directory_is_watched(tmp_path: Path) -> None:
    root = tmp_path / "src"
    for i in range(12):
        (root / f"d{i}").mkdir(parents=True)
    probe = subprocess.run(["unshare", "-U", "-r", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("user namespaces are not allowed here")
    cmd = (f"echo 6 > /proc/sys/user/max_inotify_watches && exec {sys.executable} -c "
           '"$0" "$1" "$2"')
    out = subprocess.run(["unshare", "-U", "-r", "sh", "-c", cmd, SCRIPT, str(root), str(ROOT)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "ok" in out.stdout, out.stdout + out.stderr
