"""Demo mode (``--demo``): a fresh temporary directory where helper processes take locks of
every writable format through the engine, one holder dies (stale), a TTL lock expires, a lock
comes and goes, and simulated foreign tools leave a pidfile, a half-written lock and a corrupt
file — so a first-time user sees every state within 30 s. Everything is removed on quit.

Helpers are this program started again with the hidden ``--demo-helper ROLE DIR`` flag (works
from source and from a frozen build). Each helper exits when its parent is gone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from core.config import WatchSpec
from core.engine.lock import Lock
from core.errors import LockError

#: role -> what the helper does (see :func:`helper_main`)
ROLES: dict[str, str] = {
    "build": "holds build.lock (sema, tagged) for as long as the demo runs",
    "deploy": "takes deploy.lock, then crashes after 4 s: the lock turns stale",
    "queue": "takes tasks/queue.lock (task-mcp) with a 12 s TTL and never refreshes: expires",
    "cache": "takes cache.lock for 4 s, releases it for 4 s, again and again",
    "ledger": "holds proof/ledger/ledger.lock (af-ledger) with a 10 min TTL, refreshed",
    "daemon": "a daemon writing its PID to daemon.pid (pidfile, written like any daemon does)",
    "writer": "a foreign tool creating incoming.lock empty, writing it 1.5 s later, then "
              "removing it",
}

CORRUPT = b"\x00\x17this is not a lock file\xff\xfe\n"


def _helper_argv(role: str, directory: str) -> list[str]:
    if getattr(sys, "frozen", False):
        return [sys.executable, "--demo-helper", role, directory]
    return [sys.executable, "-m", "app", "--demo-helper", role, directory]


class Demo:
    """The demo's temporary directory and helper processes."""

    def __init__(self, base: str | None = None) -> None:
        self.root = tempfile.mkdtemp(prefix="lockwarden-demo-", dir=base)
        self.dir = os.path.join(self.root, "locks")
        self.config_path = os.path.join(self.root, "config", "config.toml")
        self.procs: list[subprocess.Popen[bytes]] = []

    def specs(self) -> list[WatchSpec]:
        """The watch specs of the demo: its directory, recursive, stale after 60 s."""
        return [WatchSpec(path=self.dir, recursive=True, stale_after=60.0)]

    def start(self) -> None:
        """Create the directory layout and start the helpers. Each helper is reaped the moment
        it exits (a waiting daemon thread per helper): the one that crashes on purpose never
        lingers as a zombie."""
        os.makedirs(os.path.dirname(self.config_path), exist_ok=True)
        os.makedirs(self.dir, exist_ok=True)
        os.makedirs(os.path.join(self.dir, "tasks"), exist_ok=True)
        os.makedirs(os.path.join(self.dir, "proof", "ledger"), exist_ok=True)
        # a corrupt file, as a crashed foreign tool might leave: shows as unreadable
        Path(self.dir, "corrupt.lock").write_bytes(CORRUPT)
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        for role in ROLES:
            proc = subprocess.Popen(
                _helper_argv(role, self.dir), env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
            self.procs.append(proc)
            threading.Thread(target=proc.wait, name=f"lockwarden-demo-reap {role}",
                             daemon=True).start()

    def stop(self) -> None:
        """Stop the helpers (they release their locks) and remove the directory."""
        for p in self.procs:
            if p.poll() is None:
                with contextlib.suppress(OSError):
                    p.terminate()
        deadline = time.monotonic() + 3.0
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()
        shutil.rmtree(self.root, ignore_errors=True)


def _parent_alive(ppid: int) -> bool:
    return os.getppid() == ppid


Wait = Callable[[float], bool]
"""``wait(seconds)``: sleep up to ``seconds``; False as soon as the helper must stop (SIGTERM,
parent gone, demo directory removed), True when the time passed."""


def _build(d: Path, wait: Wait) -> int:
    with Lock(str(d / "build.lock"), tag="nightly build #1842"):
        while wait(3600):
            pass
    return 0


def _deploy(d: Path, wait: Wait) -> int:
    lock = Lock(str(d / "deploy.lock"), tag="deploy web-3 to production")
    lock.acquire(blocking=False)
    if wait(4):
        # crash, leaving the lock behind (Windows has no SIGKILL; TerminateProcess there)
        os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))
    lock.release()
    return 0


def _queue(d: Path, wait: Wait) -> int:
    lock = Lock(str(d / "tasks" / "queue.lock"), format="task-mcp", ttl=12.0)
    lock.acquire(blocking=False)
    wait(3600)
    with contextlib.suppress(LockError):
        lock.release()
    return 0


def _cache(d: Path, wait: Wait) -> int:
    while True:
        lock = Lock(str(d / "cache.lock"), tag="cache warm-up")
        try:
            lock.acquire(blocking=False)
        except LockError:
            pass
        alive = wait(4)
        with contextlib.suppress(LockError):
            if lock.is_held:
                lock.release()
        if not alive or not wait(4):
            return 0


def _ledger(d: Path, wait: Wait) -> int:
    path = str(d / "proof" / "ledger" / "ledger.lock")
    with Lock(path, format="af-ledger", ttl=600.0, auto_refresh=True):
        while wait(3600):
            pass
    return 0


def _daemon(d: Path, wait: Wait) -> int:
    # simulates a foreign daemon: pidfiles are written by the daemons themselves
    pidfile = d / "daemon.pid"
    pidfile.write_text(f"{os.getpid()}\n", encoding="ascii")
    wait(3600)
    pidfile.unlink(missing_ok=True)
    return 0


def _writer(d: Path, wait: Wait) -> int:
    # simulates a foreign tool that creates its lock with O_EXCL and writes it slowly
    incoming = d / "incoming.lock"
    wait(2)
    while True:
        try:
            fd = os.open(incoming, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            fd = -1
        if fd >= 0:
            alive = wait(1.5)
            os.write(fd, f"pid={os.getpid()}\ntimestamp={int(time.time())}\n".encode())
            os.close(fd)
            alive = alive and wait(3)
            incoming.unlink(missing_ok=True)
            if not alive:
                return 0
        if not wait(4):
            return 0


HELPERS: dict[str, Callable[[Path, Wait], int]] = {
    "build": _build, "deploy": _deploy, "queue": _queue, "cache": _cache,
    "ledger": _ledger, "daemon": _daemon, "writer": _writer,
}
"""role -> the helper's body (see :data:`ROLES`)."""


def helper_main(role: str, directory: str) -> int:
    """Run one demo helper (``role`` from :data:`ROLES`) in ``directory`` until its parent
    exits or it receives SIGTERM; returns the exit status (2: unknown role)."""
    body = HELPERS.get(role)
    if body is None:
        print(f"unknown demo role {role!r}", file=sys.stderr)
        return 2
    ppid = os.getppid()
    stop = False

    def on_term(_s: int, _f: FrameType | None) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    d = Path(directory)

    def wait(seconds: float) -> bool:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if stop or not _parent_alive(ppid) or not d.is_dir():
                return False
            time.sleep(0.2)
        return True

    return body(d, wait)
