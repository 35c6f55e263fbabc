"""The overall deadline of one operation on a lock server (docs/remote.md, "Deadline").

A per-read socket timeout does not bound an operation: a server that sends one byte every
2 s never lets a 5 s read timeout fire, and the answer never completes. So every public
operation of a :class:`~core.remote.base.RemoteSource` runs in a worker thread and the caller
waits at most the source's deadline (seconds, default :data:`DEFAULT_DEADLINE_S`). When it
passes, the source's sockets are shut down (``shutdown(SHUT_RDWR)`` from the caller's thread,
which makes the worker's blocked read return at once), the worker is given
:data:`CUT_GRACE_S` to unwind, and :class:`~core.remote.base.RemoteError` ``timed_out``
names the server and the deadline.

:class:`SocketRegistry` is how a backend tells which sockets are its own: each backend
registers the sockets its driver opens (redis-py's connection class, a requests adapter for
etcd, libpq's socket for PostgreSQL), never sockets found by address.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import weakref
from collections.abc import Callable
from typing import TypeVar

log = logging.getLogger(__name__)

DEFAULT_DEADLINE_S = 10.0
"""Seconds one remote operation (a listing, a status, a release with its checks) may take
in all, connection included, unless the server table's ``deadline`` or the CLI's
``--deadline`` says otherwise."""
MAX_DEADLINE_S = 3600.0
"""The largest deadline accepted (s): one hour."""
CUT_GRACE_S = 2.0
"""Seconds the worker is given to unwind after its sockets were shut down."""

T = TypeVar("T")


class SocketRegistry:
    """The sockets one source's driver opened (weakly held: a closed, dropped socket leaves)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._socks: weakref.WeakSet[socket.socket] = weakref.WeakSet()
        self._fds: set[int] = set()

    def add(self, sock: socket.socket) -> None:
        """Remember ``sock`` (a connected socket of this source)."""
        with self._lock:
            self._socks.add(sock)

    def cut(self, fds: tuple[int, ...] = ()) -> int:
        """Shut down (both directions) every registered socket and each socket file
        descriptor in ``fds`` (a C driver's, such as libpq's); the descriptors stay open for
        their owner to close. Returns how many were shut down; never raises."""
        with self._lock:
            socks = list(self._socks)
        done = 0
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
                done += 1
            except OSError:
                pass  # already closed or never connected
        for fd in fds:
            try:
                # a socket object over a duplicate: shutdown acts on the connection itself
                dup = socket.socket(fileno=os.dup(fd))
            except OSError:
                continue
            try:
                dup.shutdown(socket.SHUT_RDWR)
                done += 1
            except OSError:
                pass
            finally:
                dup.close()
        return done


def run_within(seconds: float, fn: Callable[[], T], cut: Callable[[], object],
               name: str) -> tuple[bool, T | None]:
    """Run ``fn()`` in a daemon thread named ``name`` and wait at most ``seconds``.

    Returns ``(True, result)`` when it finished in time, ``(False, None)`` when it did not:
    then ``cut()`` has been called (it shuts the driver's sockets) and the thread was given
    :data:`CUT_GRACE_S` seconds to end (a daemon thread: left to finish alone after that).

    Raises:
        BaseException: whatever ``fn()`` raised, when it finished in time.
    """
    box: dict[str, object] = {}

    def work() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=work, name=name, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        try:
            cut()
        except Exception as exc:  # never let the cut hide the timeout
            log.warning("%s: shutting the sockets down failed: %s", name, exc)
        worker.join(CUT_GRACE_S)
        if worker.is_alive():
            # busy in the driver's own code, not on a socket: it ends when that returns
            log.debug("%s: still running %.1f s after its sockets were shut down", name,
                      CUT_GRACE_S)
        return False, None
    if "error" in box:
        error = box["error"]
        assert isinstance(error, BaseException)
        raise error
    return True, box.get("value")  # type: ignore[return-value]


__all__ = ["CUT_GRACE_S", "DEFAULT_DEADLINE_S", "MAX_DEADLINE_S", "SocketRegistry",
           "run_within"]
