"""Another user cannot keep a dead holder's lock alive (docs/engine.md, "The holder's pin";
core/kernel/pin.py ``keepers``). A neighbour who can read a lock file takes ``flock -s`` on it
from a process that got the recorded holder's PID after the holder died (chosen here through
``ns_last_pid``; a neighbour gets it by forking until the PID comes round), forks a child that
keeps the descriptor and lets the locking process exit. The owner's Lockwarden cannot see
another user's descriptors, so the pin was "held by someone nobody can name" -- and counted as
alive: the lock was held, ``try`` failed and ``reclaim`` was refused for as long as the
neighbour's child lived. A pin counts only when a process proven to be the holder's (same user)
keeps it; unknown is not alive.

And lock files Lockwarden writes are not readable by other users (mode 0600) unless the
directory's policy says so (``readable_lock_files``), so the neighbour cannot open one at all.

Real accounts: the owner is the second test account, the neighbour ``nobody``."""

from __future__ import annotations

import json
import os
import pwd
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from core.engine.lock import Lock
from core.stale_policy import StalePolicy
from tests.support.cli import LW
from tests.support.second_user import (
    lw_as,
    second_user,
    second_user_python,
    site_for_second_user,
)

pytestmark = pytest.mark.slow  # a second account with its own copy of the code, PIDs chosen by hand

NEIGHBOUR = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.flock(fd, fcntl.LOCK_SH)
if os.fork() == 0:
    os.read(0, 1)   # the child keeps the shared flock until its stdin closes
    os._exit(0)
print(os.getpid(), flush=True)
"""


HOLDER = r"""
import sys
sys.path.insert(0, sys.argv[2])
from core.engine.lock import Lock
from core.stale_policy import StalePolicy
Lock(sys.argv[1], policy=StalePolicy(readable_lock_files=True)).acquire()
print("held", flush=True)
sys.stdin.read()
"""
NS_LAST_PID = "/proc/sys/kernel/ns_last_pid"


def _spawn_as(pid: int, argv: list[str], **kw: Any) -> subprocess.Popen[str] | None:
    """Start ``argv`` so that it gets PID ``pid`` (the kernel's next PID, set through
    ``ns_last_pid``: what a neighbour gets by forking until the PID comes round; other
    processes may take it first, so a few attempts)."""
    for _ in range(50):
        with open(NS_LAST_PID, "w") as f:
            f.write(str(pid - 1))
        p = subprocess.Popen(argv, text=True, **kw)
        if p.pid == pid:
            return p
        p.kill()
        p.wait()
    return None


@pytest.mark.skipif(not os.access(NS_LAST_PID, os.W_OK),
                    reason="needs root to choose the next PID (ns_last_pid)")
def test_a_pin_nobody_can_name_keeps_nothing_alive(shared_tmp: Path) -> None:
    uid, gid = second_user()
    python = second_user_python(uid, gid)
    site = site_for_second_user(shared_tmp, ["platformdirs", "psutil"])
    locks = shared_tmp / "locks"
    locks.mkdir()
    os.chown(locks, uid, gid)
    lock = locks / "deploy.lock"
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(shared_tmp)}
    as_owner: dict[str, Any] = {"user": uid, "group": gid, "extra_groups": [], "cwd": "/",
                                "env": env}
    # the owner's holder takes a readable lock (what every lock was before) and is killed
    holder = subprocess.Popen([python, "-I", "-c", HOLDER, str(lock), str(site)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              **as_owner)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    holder.kill()
    holder.wait()
    assert f"pid={holder.pid}" in lock.read_text()
    # the neighbour's locking process gets the dead holder's PID, takes flock -s, forks and
    # exits: /proc/locks shows the holder's PID for a pin only the neighbour's child keeps
    nobody = pwd.getpwnam("nobody")
    neighbour = _spawn_as(holder.pid, [python, "-I", "-c", NEIGHBOUR, str(lock)],
                          user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd="/")
    if neighbour is None:
        pytest.skip(f"PID {holder.pid} was taken by another process first")
    try:
        assert neighbour.stdout is not None
        assert int(neighbour.stdout.readline()) == holder.pid
        assert neighbour.wait(timeout=30) == 0  # the locking process is gone; its child holds

        st = json.loads(lw_as(uid, gid, python, site, shared_tmp, "status", str(lock),
                              "--json").stdout)
        assert "holder_pinned" not in [r["code"] for r in st["reasons"]], st
        assert st["state"] == "stale", st
        out = lw_as(uid, gid, python, site, shared_tmp, "try", str(lock))
        assert out.returncode == 0, out.stderr
        assert f"pid={holder.pid}" not in lock.read_text()
    finally:
        assert neighbour.stdin is not None
        neighbour.stdin.close()
        neighbour.wait(timeout=30)


def test_lock_files_are_not_readable_by_others_unless_the_policy_says_so(tmp_path: Path
                                                                         ) -> None:
    private = Lock(str(tmp_path / "private.lock")).acquire()
    try:
        assert stat.S_IMODE(os.stat(private.path).st_mode) & 0o077 == 0
    finally:
        private.release()
    shared = Lock(str(tmp_path / "shared.lock"),
                  policy=StalePolicy(readable_lock_files=True)).acquire()
    try:
        assert stat.S_IMODE(os.stat(shared.path).st_mode) & 0o044 == 0o044
    finally:
        shared.release()


@pytest.mark.parametrize("readable", [False, True])
def test_a_neighbour_cannot_open_a_private_lock(shared_tmp: Path,
                                                readable: bool) -> None:
    uid, gid = second_user()
    python = second_user_python(uid, gid)
    lock = Lock(str(shared_tmp / "mine.lock"),
                policy=StalePolicy(readable_lock_files=readable)).acquire()
    try:
        out = subprocess.run([python, "-I", "-c", "import sys; open(sys.argv[1]).read()",
                              lock.path], user=uid, group=gid, extra_groups=[],
                             capture_output=True, text=True, timeout=60, cwd="/")
        assert (out.returncode == 0) == readable, out.stderr
        assert readable or "PermissionError" in out.stderr
    finally:
        lock.release()


@pytest.mark.parametrize("readable", [False, True])
def test_the_directory_policy_of_the_configuration_decides(tmp_path: Path,
                                                           readable: bool) -> None:
    from tests.support.cli import ENV

    locks = tmp_path / "shared"
    locks.mkdir()
    config = tmp_path / "config.toml"
    config.write_text(f'[[watch]]\npath = "{locks}"\n'
                      f'readable_lock_files = {"true" if readable else "false"}\n')
    config.chmod(0o600)
    env = {**ENV, "LOCKWARDEN_CONFIG": str(config)}
    tried = locks / "tried.lock"  # --stale-after given: the mode is still the directory's
    out = subprocess.run([*LW, "try", str(tried), "--stale-after", "60"], capture_output=True,
                         text=True, timeout=60, env=env, check=False)
    assert out.returncode == 0, out.stderr
    ran = locks / "ran.lock"  # the mode the command sees while run holds the lock
    out = subprocess.run([*LW, "run", str(ran), "--", "stat", "-c", "%a", str(ran)],
                         capture_output=True, text=True, timeout=60, env=env, check=False)
    assert out.returncode == 0, out.stderr
    for mode in (stat.S_IMODE(tried.stat().st_mode), int(out.stdout.strip(), 8)):
        assert mode & 0o044 == (0o044 if readable else 0), oct(mode)


@pytest.mark.parametrize("readable", [False, True])
def test_the_app_acquires_under_the_directory_policy(make_app: Any, lockdir: Path, qtbot: Any,
                                                     readable: bool) -> None:
    from dataclasses import replace

    app = make_app([lockdir])
    cfg = app.store.config
    app.store.set(replace(cfg, watches=[replace(w, readable_lock_files=readable)
                                        for w in cfg.watches]))
    app.start(show_window=False)
    path = lockdir / "mine.lock"
    dlg = app.ops.open_acquire(str(lockdir))
    dlg.name.setText("mine.lock")
    dlg.accept()
    qtbot.waitUntil(lambda: app.ops.busy == 0 and app.actions.holds(str(path)), timeout=20000)
    assert stat.S_IMODE(path.stat().st_mode) & 0o044 == (0o044 if readable else 0)
