"""Lock operations of the GUI, all through the engine (:mod:`core`): acquire, release,
reclaim, force release. Keeps the :class:`core.Lock` objects of the locks this app holds (the
app's process is their holder; TTL locks refresh themselves with ``auto_refresh``).

Every method returns normally or raises :class:`ActionError` with a message for people; the
window shows it in a message box. Engine errors (:class:`core.errors.LockError`) and OS errors
(permission denied, directory gone) never escape as tracebacks.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from PySide6.QtCore import QObject, Signal

from app.qtcompat import emit
from core.errors import LockError, LockHeld, LockLost, NotStale, UnreadableError
from core.record import LockStatus

log = logging.getLogger(__name__)


class ActionError(Exception):
    """A lock operation failed; ``title`` and ``str(self)`` are shown to the user."""

    def __init__(self, title: str, message: str) -> None:
        self.title = title
        super().__init__(message)


def _detail(exc: BaseException, path: str) -> str:
    """The engine's message without the path the sentence before it already names."""
    if isinstance(exc, UnreadableError):
        return exc.reason
    if isinstance(exc, OSError) and not isinstance(exc, LockError):
        return str(exc.strerror or exc)
    text = str(exc)
    for prefix in (f"{path}: ", f"{path} "):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return text.replace(path, os.path.basename(path))


def _explain(exc: BaseException, path: str) -> str:
    """A message for people about ``exc`` on ``path``, naming the path once."""
    detail = _detail(exc, path)
    if isinstance(exc, LockHeld):
        rec = exc.status.record if exc.status is not None else None
        if rec is not None and rec.pid == os.getpid():
            return f"{path} is already held by this Lockwarden."
        return f"{path} is held by someone else.\n\n{detail}"
    if isinstance(exc, LockLost):
        return f"{path} is no longer ours: it was removed, reclaimed or replaced.\n\n{detail}"
    if isinstance(exc, NotStale):
        return f"{path} is not stale, so it was not reclaimed.\n\n{detail}"
    if isinstance(exc, UnreadableError):
        return f"{path} {detail}."
    if isinstance(exc, PermissionError):
        return f"Permission denied for {path}."
    if isinstance(exc, FileNotFoundError):
        where = os.path.dirname(path) or path
        return f"{where} does not exist (any more)."
    if isinstance(exc, OSError):
        return f"{path}: {detail}"
    return f"{path}: {detail}"


F = TypeVar("F", bound=Callable[..., Any])


def _tracks_path(fn: F) -> F:
    """Mark the operation's path (first argument) busy while it runs (see
    :attr:`LockActions.busy_paths`)."""

    @functools.wraps(fn)
    def wrapper(self: LockActions, path: str, *args: Any, **kwargs: Any) -> Any:
        with self._busy_lock:
            self.busy_paths[path] = self.busy_paths.get(path, 0) + 1
        try:
            return fn(self, path, *args, **kwargs)
        finally:
            with self._busy_lock:
                left = self.busy_paths.get(path, 1) - 1
                if left:
                    self.busy_paths[path] = left
                else:
                    self.busy_paths.pop(path, None)

    return wrapper  # type: ignore[return-value]


class LockActions(QObject):
    """The app's lock operations.

    Signals:
        heldChanged(): the set of locks held by this app changed.
        touched(str): an operation changed the lock at this path (re-inspect it).
    """

    heldChanged = Signal()
    touched = Signal(str)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.held: dict[str, Any] = {}
        self.busy_paths: dict[str, int] = {}
        """Paths with an operation of ours running (their changes are expected)."""
        self._busy_lock = threading.Lock()

    def holds(self, path: str) -> bool:
        """True when this app holds the lock at ``path`` (acquired or reclaimed here)."""
        lock = self.held.get(path)
        return lock is not None and bool(lock.is_held)

    @_tracks_path
    def acquire(
        self, path: str, *, format: str = "sema", tag: str | None = None, ttl: float | None = None
    ) -> Any:
        """Acquire ``path`` without waiting, held by this process; a TTL lock refreshes itself
        at 75% of the TTL. Returns the :class:`core.Lock`. Raises :class:`ActionError` when the
        lock is held or the directory is not usable."""
        import core

        if self.holds(path):
            raise ActionError("Already held", f"{path} is already held by this Lockwarden.")
        lock = core.Lock(path, tag=tag or None, ttl=ttl, format=format,
                         auto_refresh=ttl is not None or format == "task-mcp")
        # task-mcp locks always carry a lease (the spec's default TTL when none is given), so
        # the app renews them while it holds them instead of letting them expire after an hour
        try:
            lock.acquire(blocking=False)
        except (LockError, OSError) as exc:
            raise ActionError("Could not acquire the lock", _explain(exc, path)) from exc
        self.held[path] = lock
        emit(self.heldChanged)
        emit(self.touched, path)
        return lock

    @_tracks_path
    def release(self, path: str) -> None:
        """Release a lock this app holds. Raises :class:`ActionError` when it is not ours or
        was lost (the engine never deletes a successor's lock)."""
        lock = self.held.get(path)
        if lock is None:
            raise ActionError("Not held by Lockwarden",
                              f"{path} was not acquired by this Lockwarden; use Force release.")
        try:
            lock.release()
        except (LockError, OSError) as exc:
            self.held.pop(path, None)
            emit(self.heldChanged)
            emit(self.touched, path)
            raise ActionError("Could not release the lock", _explain(exc, path)) from exc
        self.held.pop(path, None)
        emit(self.heldChanged)
        emit(self.touched, path)

    @_tracks_path
    def reclaim(self, path: str, *, force: bool = False, reason: str | None = None,
                status: LockStatus | None = None) -> Any:
        """Break a stale lock and take it (this app becomes the holder). ``force`` breaks a
        lock that is not stale (``reason`` goes to the audit entry). Uses the lock's own TTL
        and format when ``status`` is given. Raises :class:`ActionError`."""
        import core

        ttl = status.record.ttl if status is not None and status.record is not None else None
        stale_after = status.stale_after if status is not None else 3600.0
        try:
            lock = core.reclaim(path, force=force, reason=reason or None, ttl=ttl,
                                stale_after=stale_after, auto_refresh=True)
        except (LockError, OSError) as exc:
            emit(self.touched, path)
            raise ActionError("Could not reclaim the lock", _explain(exc, path)) from exc
        self.held[path] = lock  # a lock with a lease renews itself (auto_refresh)
        emit(self.heldChanged)
        emit(self.touched, path)
        return lock

    @_tracks_path
    def force_release(self, path: str, *, reason: str | None = None) -> LockStatus:
        """Remove the lock whatever its state; the displaced holder and ``reason`` go to the
        audit log. Returns the status of what was removed. Raises :class:`ActionError`."""
        import core

        try:
            st: LockStatus = core.force_release(path, reason=reason or None)
        except (LockError, OSError) as exc:
            emit(self.touched, path)
            raise ActionError("Could not force-release the lock", _explain(exc, path)) from exc
        if self.held.pop(path, None) is not None:
            emit(self.heldChanged)
        emit(self.touched, path)
        return st

    def lost(self, path: str, new: LockStatus | None) -> bool:
        """True when a lock this app holds was removed or taken over by someone else (seen in
        the inventory, not caused by an operation of ours); the lock is then forgotten."""
        if path not in self.held or path in self.busy_paths:
            return False
        lock = self.held[path]
        rec = new.record if new is not None else None
        token = getattr(lock, "token", None)
        if rec is not None and token is not None and rec.token == token:
            return False
        if rec is not None and token is None and rec.pid == os.getpid():
            return False
        self.held.pop(path, None)
        emit(self.heldChanged)
        return True

    def release_all(self) -> list[str]:
        """Release every lock this app holds (on Quit); returns error messages, if any."""
        errors: list[str] = []
        for path in list(self.held):
            try:
                self.release(path)
            except ActionError as exc:
                errors.append(str(exc))
        return errors
