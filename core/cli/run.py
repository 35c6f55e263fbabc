"""``lockwarden run PATH [--timeout S] [--ttl S] -- CMD ARGS...``: hold a lock while a command
runs, like flock(1).

The holder recorded in the lock is this wrapper process. The engine acquires
(:class:`core.engine.lock.Lock`); with ``--ttl`` the wrapper refreshes the lease at 75 % of the
TTL; SIGINT/SIGTERM/SIGHUP are forwarded to CMD; CMD inherits the lock's pin
(:func:`core.kernel.pin.hand_down`, passed with ``pass_fds``), so the lock lives as long as a
process of the command keeps it, whatever happens to the wrapper; when CMD exits the wrapper
releases the lock, or leaves it to the processes CMD started that keep the pin.

Rules (what a killed wrapper leaves, leases, signals and process groups, other systems, exit
codes): docs/cli.md, "``run``"; docs/engine.md, "The holder's pin".
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING

from core.cli.common import EXIT_NO, Out, refuse_unreadable
from core.cli.locks import writer_policy

if TYPE_CHECKING:
    from core.engine.lock import Lock

FORWARDED: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)
"""Signals the wrapper forwards to CMD."""
if sys.platform != "win32":  # no SIGHUP there
    FORWARDED += (signal.SIGHUP,)


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
    if sys.platform == "win32":  # no controlling terminal, no process groups
        return False
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


def _refresher(lock: Lock, out: Out, stop: threading.Event) -> threading.Thread:
    """Renew ``lock`` at 75 % of its TTL until ``stop`` is set (docs/specs/task-mcp.txt
    "Auto-Refresh Mechanism", as the engine's ``auto_refresh``), in a daemon thread started
    once CMD runs. A refresh replaces the lock file; CMD keeps the pin of the file it was
    handed, which the verdict still counts (an earlier file of the same acquisition,
    :func:`core.kernel.pin.keepers`).

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


def _hand_down(lock: Lock, out: Out) -> int | None:
    """The pin CMD inherits (:func:`core.kernel.pin.hand_down`), or None (a note says why
    where ``flock`` exists but was refused: a file system without it)."""
    from core.kernel import pin

    token = lock.token
    fd = pin.hand_down(lock.path, token) if token is not None else None
    if fd is None and pin.available():
        out.note(f"run: {lock.path}: the command cannot inherit the lock's pin (flock refused "
                 "here); if this wrapper is killed, the lock is stale at once")
    return fd


def _still_pinned(lock: Lock) -> tuple[int, ...]:
    """The processes other than this wrapper that keep the pin CMD inherited -- processes CMD
    started and left running (:func:`core.kernel.pin.keepers`)."""
    from core.kernel import pin

    if lock.token is None:
        return ()
    return pin.keepers(lock.path, os.getpid(), lock.token, exclude=os.getpid()).pids


def run(args: argparse.Namespace, out: Out) -> int:
    """Acquire ``args.path``, run ``args.cmd`` with the lock's pin, release; return the exit
    code (see module).

    Raises:
        CliError: the lock file cannot be read as a lock (exit 3).
    """
    from core.cli.caller import caller_holds, refuse_held_by_caller
    from core.engine.lock import Lock
    from core.errors import LockLost

    if not getattr(args, "debug", False):
        import logging

        # the refresher's "lock lost" warning: reported below as one line of ours instead
        logging.getLogger("lockwarden.lock").addHandler(logging.NullHandler())
    policy = writer_policy(args, args.path)
    lock = Lock(  # refreshed by _refresher, which reports a failure as one line of ours
        args.path, tag=args.tag, ttl=args.ttl, format=args.format, holder_pid=os.getpid(),
        policy=policy, durable=bool(args.durable),
    )
    if args.timeout != 0 and os.path.lexists(args.path) \
            and (held := caller_holds(args.path, policy)) is not None:  # would wait for ever
        return refuse_held_by_caller(*held, args.path, out, verb="run: ",
                                     after="; command not run")
    stop_refresh = threading.Event()
    fwd = _Forwarder()
    with fwd.installed():
        try:
            refused = _acquire(lock, args, out)
            if refused is not None:
                return refused
            ran = False
            try:
                child = _spawn(lock, args, fwd, out)
                if isinstance(child, int):
                    return child
                ran = True
                if fwd.pending is not None:
                    fwd.forward(fwd.pending)
                if lock.ttl is not None:
                    _refresher(lock, out, stop_refresh)
                code = _exit_code(child.wait())
            finally:
                stop_refresh.set()
                _leave(lock, args.path, out, ran)
            return code
        except _Signalled as sig:
            if lock.is_held:
                with contextlib.suppress(LockLost):
                    lock.release()
            return 128 + sig.signum


def _acquire(lock: Lock, args: argparse.Namespace, out: Out) -> int | None:
    """Take ``lock`` (waiting up to ``args.timeout`` seconds; 0: not at all), or say why not
    on stderr and return 1.

    Raises:
        CliError: the lock file cannot be read as a lock (exit 3).
    """
    from core.errors import LockHeld, LockTimeout
    from core.holder import describe_holder

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
    return None


def _spawn(lock: Lock, args: argparse.Namespace, fwd: _Forwarder,
           out: Out) -> subprocess.Popen[bytes] | int:
    """Start CMD with the lock's pin (:func:`_hand_down`), closing this wrapper's copy of it;
    or say why it cannot start and return 127 (not found) / 126 (cannot be executed)."""
    pin_fd = _hand_down(lock, out)
    fwd.starting = True
    try:
        fwd.child = subprocess.Popen(
            args.cmd, pass_fds=() if pin_fd is None else (pin_fd,))
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
        if pin_fd is not None:
            os.close(pin_fd)  # CMD's processes keep it now, not this wrapper
    return fwd.child


def _leave(lock: Lock, path: str, out: Out, ran: bool) -> None:
    """Once CMD has exited (``ran``) or could not start: leave the lock to the processes CMD
    started that keep its pin, or release it; say on stderr what happened to it."""
    from core.errors import LockLost

    kept = _still_pinned(lock) if ran and lock.is_held else ()
    if kept:
        # like flock(1): the lock is theirs until the last of them exits; it is
        # stale then (this wrapper, its recorded holder, is gone) -- docs/cli.md "``run``"
        out.note(f"run: {path} stays held: the command exited, but "
                 f"processes it started ({_names(kept)}) keep the lock's pin; "
                 "it becomes stale when the last of them exits")
    elif lock.is_held:
        try:
            lock.release()
        except LockLost as exc:
            out.note(f"run: the lock was lost while the command ran: {exc}")
        for note in lock.notes:
            out.note(f"run: {path}: {note}")
    elif lock.lost.is_set():  # found by the refresher: removed or replaced
        out.note(f"run: the lock {path} was lost while the command ran "
                 "(removed or replaced by someone else)")


def _names(pids: tuple[int, ...]) -> str:
    """``PID 12 (sleep), PID 13 (cat)``: the processes named for a note (psutil)."""
    import psutil

    words = []
    for pid in pids[:5]:
        try:
            words.append(f"PID {pid} ({psutil.Process(pid).name()})")
        except psutil.Error:
            words.append(f"PID {pid}")
    more = f" and {len(pids) - 5} more" if len(pids) > 5 else ""
    return ", ".join(words) + more
