"""``lockwarden run PATH [--timeout S] [--ttl S] -- CMD ARGS...``: hold a lock while a command
runs, like flock(1).

The holder recorded in the lock is this wrapper process (it lives exactly as long as CMD). The
engine acquires (:class:`core.engine.lock.Lock`) and, with ``--ttl``, refreshes the lease at 75 % of
the TTL (``auto_refresh``, docs/DESIGN.md "Refresh"). The lock is released on every exit path the
wrapper survives: CMD exits 0 or fails, CMD is killed (even with SIGKILL), the wrapper gets
SIGINT/SIGTERM/SIGHUP (forwarded to CMD; the release follows CMD's exit). If the wrapper itself
is SIGKILLed, its lock names a dead PID with Lockwarden's token, which the engine judges stale
at once (docs/DESIGN.md, "Default stale policy").

SIGINT is not forwarded when the wrapper is in the terminal's foreground process group: the
terminal already sent it to CMD, which shares that group (a second SIGINT could cut CMD's own
clean-up short).

**CMD dies with the wrapper** (Linux). A lock whose holder (this wrapper) is dead is stale at
once, so a CMD that outlived a SIGKILLed wrapper would run on while the next holder works. The
child sets ``PR_SET_PDEATHSIG`` = SIGKILL before ``exec`` (:func:`die_with_parent`): the kernel
sends it SIGKILL when the wrapper exits for any reason, before the wrapper becomes a zombie,
i.e. before any acquirer can find it dead. The child then checks that its parent is still
the wrapper (``os.getppid()``); if the wrapper died between ``fork`` and ``prctl``, it exits
at once without running CMD.

The setting is made in a ``preexec_fn`` (``posix_spawn`` cannot make it). ``preexec_fn`` is
unsafe when other threads exist (a lock held by one of them at ``fork`` stays held in the
child), so the wrapper starts none before the spawn: the lease refresher of ``--ttl`` is
started after it (:func:`_refresher`), not by the engine at acquire time. Even so, the
function run in the child takes no lock: one call of a libc function resolved beforehand,
``os.getppid``, ``os._exit``; no import, no I/O.

CMD stays in the wrapper's process group (job control and the terminal's Ctrl-C work as with
flock(1)). ``PR_SET_PDEATHSIG`` reaches CMD only: processes CMD starts itself are not killed
with the wrapper (docs/cli.md, "``run``", for the limits and what to do). The setting is also
dropped by the kernel when CMD execs a set-user-ID or file-capability program. Elsewhere
(macOS, Windows) CMD is not tied to the wrapper; Windows would need a job object with
``JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`` (not implemented).

Exit code: CMD's; ``128 + N`` when CMD died of signal ``N``; ``1`` when the lock was not had
(held, or ``--timeout`` passed); ``126``/``127`` when CMD cannot be executed / is not found
(shell conventions); ``128 + N`` when signal ``N`` arrived before CMD started.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING

from core.cli.common import EXIT_NO, Out, refuse_unreadable, stale_policy

if TYPE_CHECKING:
    from core.engine.lock import Lock

PR_SET_PDEATHSIG = 1
"""``prctl`` option: the signal sent to this process when its parent dies
(``<linux/prctl.h>``)."""

ORPHANED_EXIT = 128 + 9
"""Exit status of a child that found the wrapper dead before ``exec`` (as if SIGKILLed)."""

FORWARDED = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)
"""Signals the wrapper forwards to CMD."""


class _Signalled(BaseException):
    """A forwarded signal arrived before CMD was started.

    A ``BaseException`` (like ``KeyboardInterrupt``): raised from a signal handler, it can
    surface anywhere in the engine, and the engine's defensive ``except Exception`` blocks
    (a failed psutil check, a failed audit write) must not swallow it -- the wrapper would
    then keep waiting for a lock after being told to stop."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(f"signal {signum}")


def _terminal_sent_it() -> bool:
    """True when this process is in the foreground process group of its controlling terminal
    (then a terminal SIGINT reached CMD too)."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)


class _Forwarder:
    """Signal handlers: before CMD starts they abort the wrapper; afterwards they forward."""

    def __init__(self) -> None:
        self.child: subprocess.Popen[bytes] | None = None
        self.starting = False
        self.pending: int | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        child = self.child
        if child is None:
            if self.starting:  # CMD is being spawned: forward once Popen returns
                self.pending = signum
                return
            raise _Signalled(signum)
        self.forward(signum)

    def forward(self, signum: int) -> None:
        """Send ``signum`` to CMD unless it has exited (or the terminal already sent it)."""
        child = self.child
        if child is None or child.returncode is not None:
            return
        if signum == getattr(signal, "SIGINT", None) and _terminal_sent_it():
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(child.pid, signum)

    @contextlib.contextmanager
    def installed(self) -> Iterator[_Forwarder]:
        old = {s: signal.signal(s, self) for s in FORWARDED}
        try:
            yield self
        finally:
            for s, h in old.items():
                signal.signal(s, h)


def die_with_parent(parent: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` tying the child to ``parent`` (the wrapper's PID): Linux
    ``prctl(PR_SET_PDEATHSIG, SIGKILL)``, then exit :data:`ORPHANED_EXIT` at once if
    ``os.getppid()`` is no longer ``parent`` (it died before the ``prctl``). None where this
    is not available (not Linux, or libc has no ``prctl``): CMD then runs untied.

    The libc function is resolved here, in the parent, so the child only calls it (see the
    module: no lock is taken between ``fork`` and ``exec``). In the child, a failing
    ``prctl`` raises OSError, which :class:`subprocess.Popen` reports in the parent as
    :exc:`subprocess.SubprocessError` (CMD is not run).
    """
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                      ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    get_errno = ctypes.get_errno
    kill = int(signal.SIGKILL)

    def preexec() -> None:
        if prctl(PR_SET_PDEATHSIG, kill, 0, 0, 0) != 0:
            raise OSError(get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
        if os.getppid() != parent:
            os._exit(ORPHANED_EXIT)

    return preexec


def _refresher(lock: Lock, out: Out, stop: threading.Event) -> threading.Thread:
    """Renew ``lock`` at 75 % of its TTL until ``stop`` is set (docs/specs/task-mcp.txt
    "Auto-Refresh Mechanism", as the engine's ``auto_refresh``), in a daemon thread started here --
    after CMD is spawned, so that no thread exists at ``fork`` (module docstring).

    A lost lock ends the thread: :meth:`core.engine.lock.Lock.refresh` has then set ``lock.lost``
    and audited it, and :func:`run` reports it when CMD exits. Another failure is one note on
    stderr, and the next period tries again."""
    from core.errors import LockError, LockLost

    ttl = lock.ttl
    assert ttl is not None

    def loop() -> None:
        while not stop.wait(0.75 * ttl):
            try:
                lock.refresh()
            except LockLost:
                return
            except (LockError, OSError) as exc:
                if stop.is_set() or not lock.is_held:
                    return
                out.note(f"run: could not renew the lease of {lock.path}: {exc}")

    thread = threading.Thread(target=loop, name=f"lockwarden-run-refresh {lock.path}",
                              daemon=True)
    thread.start()
    return thread


def _exit_code(returncode: int) -> int:
    """Popen returncode -> shell-style exit code (``-N`` -> ``128 + N``)."""
    return 128 - returncode if returncode < 0 else returncode


def run(args: argparse.Namespace, out: Out) -> int:
    """Acquire ``args.path``, run ``args.cmd``, release; return the exit code (see module).

    Raises:
        CliError: the lock file cannot be read as a lock (exit 3).
    """
    from core.engine.lock import Lock
    from core.errors import LockHeld, LockLost, LockTimeout
    from core.holder import describe_holder

    if not getattr(args, "debug", False):
        import logging

        # the refresher's "lock lost" warning: reported below as one line of ours instead
        logging.getLogger("lockwarden.lock").addHandler(logging.NullHandler())
    lock = Lock(  # no auto_refresh: its thread would exist at fork (module docstring)
        args.path, tag=args.tag, ttl=args.ttl, format=args.format, holder_pid=os.getpid(),
        policy=stale_policy(args), durable=bool(args.durable),
    )
    preexec = die_with_parent(os.getpid())
    stop_refresh = threading.Event()
    fwd = _Forwarder()
    with fwd.installed():
        try:
            try:
                if args.timeout == 0:
                    lock.acquire(blocking=False)
                else:
                    lock.acquire(timeout=args.timeout, blocking=True)
            except (LockHeld, LockTimeout) as exc:
                if exc.status is not None:
                    refuse_unreadable(exc.status)
                what = "timed out waiting for " if isinstance(exc, LockTimeout) else ""
                detail = describe_holder(exc.status) if exc.status else "held"
                out.note(f"run: {what}{args.path}: {detail}; command not run")
                return EXIT_NO
            try:
                fwd.starting = True
                try:
                    fwd.child = subprocess.Popen(args.cmd, preexec_fn=preexec)
                except FileNotFoundError:
                    out.note(f"run: {args.cmd[0]}: command not found")
                    return 127
                except PermissionError:
                    out.note(f"run: {args.cmd[0]}: permission denied")
                    return 126
                except OSError as exc:
                    out.note(f"run: {args.cmd[0]}: {exc.strerror}")
                    return 126
                except subprocess.SubprocessError:  # the preexec function failed
                    out.note(f"run: {args.cmd[0]}: not run: it could not be tied to this "
                             "process (prctl failed)")
                    return 126
                finally:
                    fwd.starting = False
                if fwd.pending is not None:
                    fwd.forward(fwd.pending)
                if lock.ttl is not None:
                    _refresher(lock, out, stop_refresh)
                code = _exit_code(fwd.child.wait())
            finally:
                stop_refresh.set()
                if lock.is_held:
                    try:
                        lock.release()
                    except LockLost as exc:
                        out.note(f"run: the lock was lost while the command ran: {exc}")
                elif lock.lost.is_set():  # found by the refresher: removed or replaced
                    out.note(f"run: the lock {args.path} was lost while the command ran "
                             "(removed or replaced by someone else)")
            return code
        except _Signalled as sig:
            if lock.is_held:
                with contextlib.suppress(LockLost):
                    lock.release()
            return 128 + sig.signum
