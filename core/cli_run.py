"""``lockwarden run PATH [--timeout S] [--ttl S] -- CMD ARGS...``: hold a lock while a command
runs, like flock(1).

The holder recorded in the lock is this wrapper process (it lives exactly as long as CMD). The
engine acquires (:class:`core.lock.Lock`) and, with ``--ttl``, refreshes the lease at 75 % of
the TTL (``auto_refresh``, DESIGN.md "Refresh"). The lock is released on every exit path the
wrapper survives: CMD exits 0 or fails, CMD is killed (even with SIGKILL), the wrapper gets
SIGINT/SIGTERM/SIGHUP (forwarded to CMD; the release follows CMD's exit). If the wrapper itself
is SIGKILLed, its lock names a dead PID with Lockwarden's token, which the engine judges stale
at once (DESIGN.md, "Default stale policy").

SIGINT is not forwarded when the wrapper is in the terminal's foreground process group: the
terminal already sent it to CMD, which shares that group (a second SIGINT could cut CMD's own
clean-up short).

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
from collections.abc import Iterator
from types import FrameType

from core.cli_common import EXIT_NO, Out, refuse_unreadable, stale_policy

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


def _exit_code(returncode: int) -> int:
    """Popen returncode -> shell-style exit code (``-N`` -> ``128 + N``)."""
    return 128 - returncode if returncode < 0 else returncode


def run(args: argparse.Namespace, out: Out) -> int:
    """Acquire ``args.path``, run ``args.cmd``, release; return the exit code (see module).

    Raises:
        CliError: the lock file cannot be read as a lock (exit 3).
    """
    from core.errors import LockHeld, LockLost, LockTimeout
    from core.holder import describe_holder
    from core.lock import Lock

    if not getattr(args, "debug", False):
        import logging

        # the refresher's "lock lost" warning: reported below as one line of ours instead
        logging.getLogger("lockwarden.lock").addHandler(logging.NullHandler())
    lock = Lock(
        args.path, tag=args.tag, ttl=args.ttl, format=args.format, holder_pid=os.getpid(),
        auto_refresh=args.ttl is not None, policy=stale_policy(args),
    )
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
                    fwd.child = subprocess.Popen(args.cmd)
                except FileNotFoundError:
                    out.note(f"run: {args.cmd[0]}: command not found")
                    return 127
                except PermissionError:
                    out.note(f"run: {args.cmd[0]}: permission denied")
                    return 126
                except OSError as exc:
                    out.note(f"run: {args.cmd[0]}: {exc.strerror}")
                    return 126
                finally:
                    fwd.starting = False
                if fwd.pending is not None:
                    fwd.forward(fwd.pending)
                code = _exit_code(fwd.child.wait())
            finally:
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
