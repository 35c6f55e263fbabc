"""Real kernel-lock holders for the tests: a Python process that takes one kind of lock on a file,
prints ``ready`` and holds it until its stdin closes (the ``procs`` fixture of tests/conftest.py
kills whatever a test left running). Shared by
tests/core/kernel/test_kernel_locks.py (the
/proc/locks view) and tests/core/kernel/test_kernel_getlk.py (the F_GETLK view)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HOLDER = r"""
import fcntl, os, struct, sys
kind, path = sys.argv[1], sys.argv[2]
if kind == "fasteners":
    import fasteners
    lock = fasteners.InterProcessLock(path)
    assert lock.acquire(blocking=False)
elif kind == "portalocker":
    import portalocker
    lock = portalocker.Lock(path, "a", flags=portalocker.LOCK_EX | portalocker.LOCK_NB)
    lock.acquire()
else:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    if kind == "flock":
        fcntl.flock(fd, fcntl.LOCK_EX)
    elif kind == "flock-sh":
        fcntl.flock(fd, fcntl.LOCK_SH)
    elif kind == "posix":
        fcntl.lockf(fd, fcntl.LOCK_EX)
    elif kind == "posix-range":
        fcntl.lockf(fd, fcntl.LOCK_SH, 100, 0)
    elif kind == "ofd":
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("@hhqqi4x", fcntl.F_WRLCK, 0, 0, 0, 0))
    elif kind != "open":
        raise SystemExit("unknown kind " + kind)
print("ready", flush=True)
sys.stdin.read()
"""
"""The holder script: ``python -c HOLDER KIND PATH``. Kinds: ``flock``, ``flock-sh``,
``posix`` (lockf, whole file), ``posix-range`` (a shared lockf of bytes 0-99), ``ofd``,
``fasteners``, ``portalocker``, ``open`` (only holds the file open)."""


def hold(procs: list[subprocess.Popen[str]], kind: str, path: Path) -> subprocess.Popen[str]:
    """Start a holder of ``kind`` on ``path`` and wait until it holds."""
    p = subprocess.Popen([sys.executable, "-c", HOLDER, kind, str(path)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    procs.append(p)
    assert p.stdout is not None and p.stdout.readline() == "ready\n"
    return p
