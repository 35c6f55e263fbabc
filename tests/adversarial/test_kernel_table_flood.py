"""Another user cannot hide a held ``flock`` by flooding the kernel's lock table (docs/verdicts.md,
"When the kernel's lock table is too large").

The kernel lists the newest locks first, so many one-byte POSIX locks taken after an ``flock``
push it beyond any bound on reading ``/proc/locks``. An empty, two-hour-old file under a live
``flock`` of a process the Lockwarden user cannot inspect (root's, seen from the second real
account) was judged ``free``: nothing in the part of the table read, nobody seen with it open.
Now it is ``held`` with liveness ``unknown`` and ``kernel_table_too_large``, whichever bound cut
the table (bytes, or the deadline), ``try`` takes nothing, and the holder's lock still excludes
a second ``flock -n``. Run as root, the same Lockwarden names the holder through fdinfo.

Both the holder and the flood are pinned to CPU 0, so the kernel's list (one per CPU, CPU 0
first, newest first) puts the ``flock`` after every flooding lock; the test checks that the
bound really cuts it off before it asserts anything about the verdict. The bounds are module
constants (``core.kernel.table``) lowered in the child process, so that a few thousand locks
suffice: the byte bound to 64 KiB, then the deadline to 0 s with the byte bound left as it is.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.kernel.locks import file_key, key_text
from core.kernel.table import read_table
from tests.support.second_user import second_user, second_user_python, site_for_second_user

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("flock") is None or not os.path.exists("/proc/locks")
                       or not hasattr(os, "sched_setaffinity"),
                       reason="flock(1), /proc/locks and sched_setaffinity (Linux) are needed"),
]

ROOT = Path(__file__).resolve().parents[2]
BOUND = 64 * 1024
"""The byte bound the child processes use (bytes)."""
FLOOD = 3000
"""One-byte POSIX locks the flood takes: about 170 KB of /proc/locks, well past :data:`BOUND`."""

FLOODER = r"""
import fcntl, os, sys
os.sched_setaffinity(0, {0})
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
for i in range(int(sys.argv[2])):
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 2 * i, os.SEEK_SET)
print("ready", flush=True)
sys.stdin.read()
"""

RUN = ("import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); sys.argv[0] = 'lockwarden'; "
       "import core.kernel.table as t; "
       "t.TABLE_MAX_BYTES = int(sys.argv.pop(1)); "
       "t.TABLE_SECONDS = float(sys.argv.pop(1)); runpy.run_module('core', run_name='__main__')")
"""``lockwarden ARGS`` with the table's bounds set: ``python -c RUN SITE BYTES SECONDS ARGS``
(every reader of ``/proc/locks`` goes through :func:`core.kernel.table.read_table`)."""


def _pin_to_cpu0() -> None:
    os.sched_setaffinity(0, {0})


@pytest.fixture
def flooded(shared_tmp: Path) -> Iterator[tuple[Path, Path, subprocess.Popen[str]]]:
    """A shared sticky directory with an empty, two-hour-old ``a.lock`` (root's, 0644) that a
    root ``flock(1)`` holds, then :data:`FLOOD` POSIX locks taken by the second account after
    it; yields the directory, the file and the holder."""
    uid, gid = second_user()
    shared = shared_tmp / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    lock = shared / "a.lock"
    lock.write_bytes(b"")
    lock.chmod(0o644)
    old = time.time() - 7200
    os.utime(lock, (old, old))
    procs: list[subprocess.Popen[str]] = []
    try:
        holder = subprocess.Popen(["flock", "-x", str(lock), "sh", "-c", "echo locked; exec cat"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                  preexec_fn=_pin_to_cpu0)
        procs.append(holder)
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        python = second_user_python(uid, gid)
        flood = subprocess.Popen([python, "-I", "-c", FLOODER, str(shared / "flood"), str(FLOOD)],
                                 user=uid, group=gid, extra_groups=[], cwd="/",
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(flood)
        assert flood.stdout is not None and flood.stdout.readline().strip() == "ready"
        yield shared_tmp, lock, holder
    finally:
        for p in procs:
            if p.stdin is not None:
                p.stdin.close()
            p.terminate()
            p.wait(timeout=30)


def _as_second_user(base: Path, max_bytes: int, seconds: float, *args: str
                    ) -> subprocess.CompletedProcess[str]:
    uid, gid = second_user()
    python = second_user_python(uid, gid)
    site = base / "site"
    if not site.exists():
        site_for_second_user(base, ["platformdirs", "psutil"])
    return subprocess.run([python, "-I", "-c", RUN, str(site), str(max_bytes), str(seconds),
                           *args], user=uid, group=gid, extra_groups=[], capture_output=True,
                          text=True, timeout=120, cwd="/",
                          env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(base)})


def _reason(out: subprocess.CompletedProcess[str]) -> dict[str, object]:
    st = json.loads(out.stdout)
    assert (st["state"], st["liveness"], st["locked"]) == ("held", "unknown", True), st
    (reason,) = st["reasons"]
    assert reason["code"] == "kernel_table_too_large", st
    assert isinstance(reason, dict)
    return reason


def test_a_flood_of_posix_locks_cannot_hide_a_held_flock(
        flooded: tuple[Path, Path, subprocess.Popen[str]]) -> None:
    base, lock, holder = flooded
    token = key_text(file_key(lock.stat()))
    assert token in read_table().text  # read whole, the table shows the flock ...
    assert token not in read_table(max_bytes=BOUND).text  # ... but not within the bound
    ino = lock.stat().st_ino

    out = _as_second_user(base, BOUND, 30.0, "status", str(lock), "--json")
    assert out.returncode == 1, out.stderr  # held
    reason = _reason(out)
    assert reason["cut"] == "bytes" and reason["file"] == str(lock)
    assert isinstance(reason["bytes"], int) and BOUND < reason["bytes"] <= BOUND + 1

    # the deadline alone cuts it too (0 s: one page, then "more to come")
    out = _as_second_user(base, 1 << 30, 0.0, "status", str(lock), "--json")
    assert out.returncode == 1, out.stderr
    assert _reason(out)["cut"] == "time"

    out = _as_second_user(base, BOUND, 30.0, "try", str(lock))
    assert out.returncode == 1, out.stderr
    assert f"{lock}: held" in out.stderr
    assert lock.stat().st_ino == ino and lock.stat().st_size == 0 and holder.poll() is None
    # the holder's flock still excludes a second one on the file at the path
    assert subprocess.run(["flock", "-n", str(lock), "true"]).returncode == 1


def test_root_names_the_hidden_holder_through_fdinfo(
        flooded: tuple[Path, Path, subprocess.Popen[str]]) -> None:
    """Lockwarden running as root sees every process's descriptors: the flock beyond the cut
    is ``held``, named: flock(1) or its child, which inherited the locked descriptor."""
    import psutil

    _base, lock, holder = flooded
    out = subprocess.run([sys.executable, "-c", RUN, str(ROOT), str(BOUND), "30", "status",
                          str(lock), "--json"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 1, out.stderr
    st = json.loads(out.stdout)
    (reason,) = st["reasons"]
    assert (st["state"], reason["code"]) == ("held", "kernel_lock_held"), st
    carriers = {holder.pid, *(c.pid for c in psutil.Process(holder.pid).children())}
    assert reason["pid"] in carriers and st["liveness"] == "alive"
