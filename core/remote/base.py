"""The one interface every lock server backend implements (:class:`RemoteSource`), its errors
(:class:`RemoteError`, :class:`RemoteErrorKind`), and its audit entries.

A source is one server whose locks are listed as the same :class:`~core.record.LockStatus`
verdicts as lock files, judged by :func:`core.verdicts.judge.judge` under a
:class:`~core.stale_policy.StalePolicy`; a lock's ``path`` is a URL naming the server and, after
``#``, the lock. A release removes the lock only while it still carries the ``token`` the
caller saw. Entries go to the user's per-user audit log, ``lockPath`` the URL.

Rules: docs/remote.md ("The interface", "Paths", "Errors are data", "Deadline", "Audit");
docs/specs/distributed-locks.md, "Release and force-release". Imports no driver: each backend
imports its own and says so when it is missing (kind ``no_driver``).
"""

from __future__ import annotations

import abc
import enum
import functools
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec, Self, TypeVar
from urllib.parse import quote

from core import audit
from core.audit.entry import make_entry
from core.audit.model import fallback_log_path
from core.audit.write import append_entry
from core.config.servers import redact_url
from core.errors import LockError
from core.record import LockStatus, State
from core.remote.deadline import DEFAULT_DEADLINE_S, SocketRegistry, run_within
from core.stale_policy import DEFAULT_POLICY, StalePolicy

log = logging.getLogger(__name__)

T = TypeVar("T")
P = ParamSpec("P")
S = TypeVar("S", bound="RemoteSource")


class RemoteErrorKind(enum.StrEnum):
    """What went wrong with a lock server (:attr:`RemoteError.kind`)."""

    UNREACHABLE = "unreachable"
    """No connection: refused, timed out, no such host or socket."""
    AUTH_FAILED = "auth_failed"
    """The server refused the credentials (wrong password, unknown user)."""
    PERMISSION_DENIED = "permission_denied"
    """Connected, but the role may not do this (PostgreSQL: terminate needs
    ``pg_signal_backend``; Redis: an ACL ``NOPERM``)."""
    NO_DRIVER = "no_driver"
    """The Python client library is not installed (``pip install 'lockwarden[postgres]'``)."""
    QUERY_FAILED = "query_failed"
    """The server answered with an error not covered above."""
    BAD_KEY = "bad_key"
    """The lock key or token passed does not name a lock of this source."""
    CHANGED = "changed"
    """The lock now carries another token than the one seen: someone else holds it; nothing
    was removed."""
    REFUSED = "refused"
    """A release without ``force`` of a lock that is neither ours nor stale."""
    HELD = "held"
    """An acquire found the lock held."""
    NO_DATABASE = "no_database"
    """The server answered, the credentials work, but the database named does not exist
    (PostgreSQL: checked in ``pg_database`` over the maintenance database)."""
    TIMED_OUT = "timed_out"
    """The operation did not finish within the source's overall deadline
    (:attr:`RemoteSource.deadline`, docs/remote.md "Deadline"): the server answers too
    slowly or not at all; its connection was cut."""


class RemoteError(LockError):
    """An operation on a lock server failed; the data says why (never parse the message).

    Attributes:
        kind: :class:`RemoteErrorKind`.
        url: the server (or lock) URL, without a password.
        detail: the driver's own message, for people.
        code: the server's error code when it gave one (PostgreSQL SQLSTATE such as
            ``"28P01"`` or ``"42501"``; Redis error prefix such as ``"WRONGPASS"``), else None.
        status: the lock's current verdict when one is known (``changed``, ``refused``,
            ``held``), else None.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: RemoteErrorKind,
        url: str,
        detail: str | None = None,
        code: str | None = None,
        status: LockStatus | None = None,
    ) -> None:
        self.kind = kind
        self.url = url
        self.detail = detail
        self.code = code
        self.status = status
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class ReleaseOutcome:
    """What a release did.

    Attributes:
        path: the lock's URL.
        token: the token the release was checked against.
        released: True when this call removed the lock (deleted the key, ended the sessions,
            reset the row); False when it was already gone (nothing to do).
        action: ``"deleted"`` (Redis compare-and-delete), ``"terminated"``
            (``pg_terminate_backend``), ``"reset"`` (Liquibase row), ``"gone"``.
        seconds: how long the server took, including the confirmation read (s).
        details: backend data also written to the audit entry (pids ended, signal pushed...).
    """

    path: str
    token: str
    released: bool
    action: str
    seconds: float
    details: dict[str, Any] = field(default_factory=dict)


class RemoteSource(abc.ABC):
    """One lock server. Not thread-safe: use one instance per thread (each keeps one
    connection, opened on first use and re-opened after a failure).

    Subclasses set :attr:`scheme` and implement :meth:`list_locks`, :meth:`release`,
    :meth:`describe` and :meth:`close`.
    """

    scheme: str = ""

    def __init__(self, base_url: str, *, policy: StalePolicy = DEFAULT_POLICY,
                 deadline: float = DEFAULT_DEADLINE_S) -> None:
        self.base_url = base_url
        self.policy = policy
        self.deadline = deadline
        """Seconds one operation may take in all (:meth:`within_deadline`); 0 or less: none."""
        self.sockets = SocketRegistry()
        """The sockets the driver opened, shut down when the deadline passes."""
        self.notifications = False
        """Opted in to the server's change feed (:meth:`follow`), where it has one."""
        self._worker: threading.Thread | None = None

    def within_deadline(self, what: str, fn: Callable[[], T]) -> T:
        """``fn()`` bounded by :attr:`deadline` in all (docs/remote.md, "Deadline"): run in a
        worker thread; when the deadline passes the source's sockets are shut down, its
        connection dropped and :class:`RemoteError` ``timed_out`` raised. Calls nested inside
        ``fn`` (a release's own status read) run in the same worker under the same deadline.
        Every public operation of the backends goes through it; the CLI wraps a whole verb
        (read, then release) in one call.

        Raises:
            RemoteError: ``timed_out`` (naming the server and the deadline in seconds), or
                what ``fn`` raised.
        """
        if self.deadline <= 0 or threading.current_thread() is self._worker:
            return fn()
        name = f"lockwarden-remote {self.base_url}"
        done, value = run_within(self.deadline, self._as_worker(fn), self.cut_connection,
                                 name)
        self._worker = None
        if not done:
            self._drop_connection()
            raise RemoteError(
                f"{what} {self.base_url}: no complete answer within {self.deadline:g} s "
                "(the operation's deadline): the connection was cut",
                kind=RemoteErrorKind.TIMED_OUT, url=self.base_url,
                detail=f"deadline {self.deadline:g} s")
        return value  # type: ignore[return-value]

    def _as_worker(self, fn: Callable[[], T]) -> Callable[[], T]:
        """``fn`` marking the thread that runs it as this source's worker (nested calls then
        run directly)."""
        def marked() -> T:
            self._worker = threading.current_thread()
            return fn()
        return marked

    def cut_connection(self) -> None:
        """Shut down this source's sockets from another thread (the deadline passed): the
        worker's blocked read returns at once. Backends whose driver keeps a socket outside
        :attr:`sockets` (libpq) override it. Never raises."""
        self.sockets.cut()

    def _drop_connection(self) -> None:
        """Forget the connection after a cut (the next call opens a new one); the default
        closes it."""
        try:
            self.close()
        except Exception as exc:  # a cut connection may fail to close cleanly
            log.debug("closing %s after its deadline: %s", self.base_url, exc)

    def follow(self, stop: threading.Event, on_change: Callable[[], None]) -> bool:
        """Follow the server's change feed until ``stop`` is set, calling ``on_change()`` (any
        thread) on each change of a lock key; blocks. False at once when this source has no
        feed (the default) or was not opted in (:attr:`notifications`): the caller polls.

        Raises:
            RemoteError: the feed could not be set up or broke (the caller polls and retries).
        """
        return False

    @abc.abstractmethod
    def list_locks(self) -> list[LockStatus]:
        """Every lock the server holds now that this source knows how to read, as verdicts.

        Raises:
            RemoteError: ``unreachable``, ``auth_failed``, ``no_driver``, ``query_failed``.
        """

    @abc.abstractmethod
    def release(
        self, lock_key: str, seen_token: str, *, force: bool = False, reason: str | None = None
    ) -> ReleaseOutcome:
        """Remove the lock ``lock_key`` (its URL, or the part after ``#``) only while it still
        carries ``seen_token`` (the ``LockRecord.token`` shown to the user). Without ``force``
        only a stale lock (or one this source acquired) is released. Audited either way.

        Raises:
            RemoteError: ``changed`` (another token now: nothing removed), ``refused`` (not
                stale, no force), ``permission_denied``, ``bad_key``, and the connection kinds.
        """

    @abc.abstractmethod
    def describe(self) -> str:
        """One line for people: the server URL (never a password) and what is looked for."""

    @abc.abstractmethod
    def close(self) -> None:
        """Close the connection (a later call opens a new one)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- paths --------------------------------------------------------------------------------

    def path_of(self, key: str) -> str:
        """The URL of lock ``key``: ``<base_url>#<key>``."""
        return f"{self.base_url}#{key}"

    def key_of(self, lock_key: str) -> str:
        """The key part of ``lock_key``: a full URL of this source loses ``<base_url>#``; a
        bare key is returned as it is.

        Raises:
            RemoteError: ``bad_key`` for a URL of another source.
        """
        prefix = self.base_url + "#"
        if lock_key.startswith(prefix):
            return lock_key[len(prefix):]
        if "://" in lock_key.split("#", 1)[0]:
            raise RemoteError(f"{redact_url(lock_key)} is not a lock of {self.base_url}",
                              kind=RemoteErrorKind.BAD_KEY, url=self.base_url)
        return lock_key

    def refuse_unforced(self, status: LockStatus, operation: str = "release") -> None:
        """Refuse (audited ``release_refused``) a release without force of a lock that is not
        stale: docs/DESIGN.md, "Lock operations (the engine)": force is an explicit decision.

        Raises:
            RemoteError: ``refused``, with ``status``.
        """
        if status.state is State.STALE:
            return
        audit_remote(status.path, f"{operation}_refused", result="refused",
                     details={"holder": status.to_dict(), "reason": "not stale; force not given"},
                     format=status.record.format if status.record else None)
        raise RemoteError(
            f"{status.path} is {status.state.value}, not stale: not released without force",
            kind=RemoteErrorKind.REFUSED, url=status.path, status=status)


def bounded(what: str) -> Callable[[Callable[Concatenate[S, P], T]],
                                   Callable[Concatenate[S, P], T]]:
    """Decorator of a public :class:`RemoteSource` method: the call runs under the source's
    overall deadline (:meth:`RemoteSource.within_deadline`); ``what`` names the operation in
    the ``timed_out`` error ("list", "release"...)."""
    def deco(fn: Callable[Concatenate[S, P], T]) -> Callable[Concatenate[S, P], T]:
        @functools.wraps(fn)
        def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
            return self.within_deadline(what, lambda: fn(self, *args, **kwargs))
        return wrapper
    return deco


def url_host(host: str) -> str:
    """``host`` as it goes in a URL: a socket directory (``/run/postgresql``) percent-encoded,
    an IPv6 address in brackets, a name as it is."""
    if host.startswith("/") or os.sep in host:
        return quote(host, safe="")
    if ":" in host:
        return f"[{host}]"
    return host


def audit_remote(
    url: str,
    operation: str,
    *,
    result: str = "ok",
    details: dict[str, Any] | None = None,
    format: str | None = None,
) -> str:
    """Append one entry about ``operation`` on the server lock ``url`` to the user's per-user
    audit log (:func:`core.audit.model.fallback_log_path`; docs/DESIGN.md, "Audit log"), with
    the same fields and hash chain as every entry (:func:`core.audit.entry.make_entry`,
    :func:`core.audit.write.append_entry`); ``lockPath`` is the URL.

    Returns the log's path, or "" when the entry could not be written (logged as a warning).
    Never raises: auditing must not turn a done operation into a failure (the rule of
    ``core.engine.audited.record_audit``)."""
    try:
        entry = make_entry(url, operation, result, details, format)
        entry["lockPath"] = url
        path = fallback_log_path()
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        append_entry(path, entry, audit.LOCK_TIMEOUT)
        return path
    except Exception as exc:
        log.warning("audit entry for %s of %s not written: %s", operation, url, exc)
        return ""
