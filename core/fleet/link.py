"""A connection to the fleet database whose every read and write ends within the fleet's
deadline, whatever the server does (docs/fleet.md, "Deadline"; ``[fleet] deadline``, 10 s by
default), as a lock server's operations do (docs/remote.md, "Deadline").

libpq's own bounds do not bound an operation: ``connect_timeout`` covers the connection
(psycopg 3 enforces it on the whole handshake), ``statement_timeout`` is the server's own
clock, and a server that completes the login and then answers one byte every 2 s never lets a
read time out. So each operation (:meth:`Link.run`) runs in a worker thread while the caller
waits at most what is left of the deadline. When it passes -- or when :meth:`Link.abort` is
called (a signal handler may: it takes no lock) -- libpq's socket is shut down (the worker's
blocked read returns at once and the worker closes the connection as it unwinds), the
connection is forgotten (the next operation connects again) and
:class:`~core.fleet.errors.FleetError` ``timed_out`` (or ``stopped``) names the database and the
deadline. The caller never waits for the worker after that.
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from core.config.model import FleetSpec, ServerSpec
from core.config.servers import redact_url
from core.fleet.errors import FleetError, fleet_error

T = TypeVar("T")

STEP_S = 0.1
"""Longest single wait of a caller for its worker, in seconds: how soon it sees an abort."""

CONNECT_TIMEOUT = 5
"""Seconds libpq waits for the database to answer a connection (``connect_timeout``) at most;
less when less is left of the operation's deadline."""


def connect(spec: FleetSpec, environ: Mapping[str, str] | None = None, *,
            timeout: float | None = None) -> Any:
    """A psycopg connection (autocommit) to the fleet database, with the password from
    ``password_env`` or the keychain (:func:`core.remote.sources.password_for`), libpq's
    ``connect_timeout`` (:data:`CONNECT_TIMEOUT`, or ``timeout`` seconds when less: psycopg
    bounds the whole handshake, 2 s at least), ``statement_timeout`` = the fleet's deadline
    and TCP keepalives (a half-open connection fails instead of waiting). Called by
    :class:`core.fleet.link.Link`, which bounds the whole operation.

    Raises:
        FleetError: psycopg is not installed (``no_driver``), or the connection failed.
    """
    try:
        import psycopg
    except ImportError:
        raise FleetError("no_driver", "the fleet needs psycopg: pip install 'psycopg[binary]'"
                         ) from None
    env = os.environ if environ is None else environ
    if spec.password_env and spec.password_env in env:  # the common case, without importing
        password: str | None = env[spec.password_env]  # the lock servers' machinery
    else:
        from core.remote.sources import password_for

        server = ServerSpec(kind="postgres", url=spec.dsn, password_env=spec.password_env,
                            keyring=spec.keyring)
        password, _problem = password_for(server, environ)
    wait = CONNECT_TIMEOUT if timeout is None else min(CONNECT_TIMEOUT, timeout)
    kw: dict[str, Any] = {
        "autocommit": True, "connect_timeout": max(2, math.ceil(wait)),
        "options": f"-c statement_timeout={max(1, round(spec.deadline * 1000))}",
        "application_name": "lockwarden-fleet",
        "keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5,
        "keepalives_count": 2}
    if password is not None:
        kw["password"] = password
    try:
        return psycopg.connect(spec.dsn, **kw)
    except psycopg.Error as exc:
        raise fleet_error(spec, exc) from None


def close_quietly(conn: Any) -> None:
    """Close ``conn`` (a psycopg connection, or ``None``); a connection already broken cannot
    fail the caller. Never raises."""
    if conn is not None:
        try:
            conn.close()
        except Exception:  # closing a broken connection: nothing to do
            pass


def cut_socket(fd: int) -> bool:
    """Shut down (both directions) the socket with descriptor ``fd`` (libpq's), leaving the
    descriptor open for its owner to close: a read blocked on it returns at once. Returns
    whether it was shut down; never raises (a closed descriptor, or one that is no socket)."""
    if fd < 0:
        return False
    try:
        dup = socket.socket(fileno=os.dup(fd))  # shutdown acts on the connection itself
    except OSError:
        return False
    try:
        dup.shutdown(socket.SHUT_RDWR)
        return True
    except OSError:
        return False
    finally:
        dup.close()


class Link:
    """One connection to the fleet database, opened on first use and again after a failure,
    each operation bounded by ``spec.deadline`` seconds in all (see the module docstring).
    One thread calls :meth:`run` at a time; :meth:`abort` may be called from any thread or a
    signal handler.

    Args:
        spec: the ``[fleet]`` table (its DSN, credentials and deadline).
        name: the worker threads' name.
        setup: run on each new connection, inside the same operation and deadline (a
            ``LISTEN``, a check of the schema); what it raises fails the operation.
    """

    def __init__(self, spec: FleetSpec, *, name: str = "lockwarden-fleet",
                 setup: Callable[[Any], None] | None = None) -> None:
        self.spec = spec
        self.name = name
        self._setup = setup
        self._lock = threading.Lock()
        self._conn: Any = None
        self._fd = -1
        self._gen = 0
        self._aborted = False
        self._busy = False  # a run() is in progress (its worker may use the connection)

    @property
    def connected(self) -> bool:
        """True while a connection is open (it may still turn out to be broken)."""
        conn = self._conn
        return conn is not None and not conn.closed

    @property
    def aborted(self) -> bool:
        """True after :meth:`abort`: every later :meth:`run` raises ``stopped``."""
        return self._aborted

    def run(self, what: str, fn: Callable[[Any], T], *, seconds: float | None = None) -> T:
        """``fn(conn)`` on this link's connection (connected first when needed), ended within
        ``seconds`` (default ``spec.deadline``) in all. ``what`` names the operation in the
        worker thread's name.

        Raises:
            FleetError: ``timed_out`` (no complete answer in time: the connection was cut),
                ``stopped`` (:meth:`abort`), or what connecting raised; a psycopg error of
                ``fn`` mapped by :func:`core.fleet.errors.fleet_error` (the connection is then
                dropped: the next call connects again).
            Exception: anything else ``fn`` raised.
        """
        where = redact_url(self.spec.dsn)
        if self._aborted:
            raise FleetError("stopped", f"fleet database {where}: stopped")
        limit = self.spec.deadline if seconds is None else seconds
        end = time.monotonic() + limit
        box: dict[str, Any] = {}
        done = threading.Event()
        gen = self._gen

        def work() -> None:
            conn = None
            try:
                conn = self._connection(gen, end)
                box["value"] = fn(conn)
            except BaseException as exc:  # handed to the caller's thread
                box["error"] = exc
            finally:
                if conn is not None and self._gen != gen:  # dropped meanwhile: ours to close
                    _close(conn)
                done.set()

        self._busy = True
        try:
            threading.Thread(target=work, name=f"{self.name}-{what}", daemon=True).start()
            while not done.wait(max(0.0, min(STEP_S, end - time.monotonic()))):
                if self._aborted or time.monotonic() >= end:
                    break
        finally:
            self._busy = False
        if not done.is_set():
            self._drop()
            if self._aborted:
                raise FleetError("stopped", f"fleet database {where}: stopped")
            raise FleetError("timed_out", f"fleet database {where}: no complete answer within "
                             f"{limit:g} s (the fleet's deadline): the connection was cut")
        if "error" in box:
            exc = box["error"]
            if isinstance(exc, FleetError):
                self._drop(close=True)
                raise exc
            if _is_driver_error(exc):
                self._drop(close=True)
                raise fleet_error(self.spec, exc) from None
            raise exc
        value: T = box["value"]
        return value

    def _connection(self, gen: int, end: float) -> Any:
        """The open connection, or a new one (connected within what is left until ``end``,
        then ``setup``); ``gen`` is the generation the caller started in: a link dropped since
        keeps no connection made for it."""
        conn = self._conn
        if conn is not None and not conn.closed:
            return conn
        conn = connect(self.spec, timeout=end - time.monotonic())
        try:
            fd = int(conn.pgconn.socket)
        except Exception:  # no socket (any more): nothing to cut
            fd = -1
        with self._lock:
            if self._gen != gen or self._aborted:
                _close(conn)
                raise FleetError("stopped", f"fleet database {redact_url(self.spec.dsn)}: "
                                 "given up")
            self._fd = fd  # cut by a deadline or an abort from here on
        try:
            if self._setup is not None:
                self._setup(conn)
        except BaseException:
            with self._lock:
                if self._fd == fd:
                    self._fd = -1
            _close(conn)
            raise
        with self._lock:
            if self._gen != gen or self._aborted:
                _close(conn)
                raise FleetError("stopped", f"fleet database {redact_url(self.spec.dsn)}: "
                                 "given up")
            self._conn = conn
        return conn

    def _drop(self, *, close: bool = False) -> None:
        """Forget the connection and shut its socket down; ``close``: close it too (its
        worker is done), else the worker still using it closes it."""
        with self._lock:
            self._gen += 1
            conn, self._conn = self._conn, None
            fd, self._fd = self._fd, -1
        cut_socket(fd)
        if close and conn is not None:
            _close(conn)

    def abort(self) -> None:
        """Stop for good: shut the connection's socket down (an operation waiting on it ends at
        once) and make every later :meth:`run` raise ``stopped``. Takes no lock: safe in a
        signal handler. Never raises."""
        self._aborted = True
        cut_socket(self._fd)

    def close(self) -> None:
        """Close the connection; any thread. An operation running meanwhile gets its socket
        shut down and its worker closes the connection (libpq's connection is never closed
        under a thread that uses it). Never raises."""
        with self._lock:
            self._gen += 1
            conn, self._conn = self._conn, None
            fd, self._fd = self._fd, -1
            busy = self._busy
        if conn is not None:
            cut_socket(fd)
            if not busy:
                _close(conn)


def _close(conn: Any) -> None:
    try:
        conn.close()
    except Exception:  # closing a broken connection: nothing to do
        pass


def _is_driver_error(exc: BaseException) -> bool:
    try:
        import psycopg
    except ImportError:
        return False
    return isinstance(exc, psycopg.Error)
