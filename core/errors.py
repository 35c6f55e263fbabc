"""Exceptions raised by the Lockwarden engine.

Every exception the engine raises on purpose derives from :class:`LockError`, so callers (the
CLI, the GUI, scripts using the Python API) can catch one type and show its message. Messages are
written for people: they name the path and what to do next.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.codes import ReadOnlyKind, UnreadableKind

if TYPE_CHECKING:
    from core.reasons import Reason
    from core.record import LockStatus


class LockError(Exception):
    """Base class of every error the engine raises on purpose."""


class ParseError(LockError, ValueError):
    """The bytes of a lock file are not in any format we read (or not in the one asked for).

    ``reason`` is a short human sentence such as ``"pid is not an integer: 'abc'"``.
    """

    def __init__(self, reason: str, *, path: str | None = None) -> None:
        self.reason = reason
        self.path = path
        super().__init__(f"{path}: {reason}" if path else reason)


class UnreadableError(LockError, OSError):
    """A path cannot be read as a lock file: FIFO, device, socket, directory, symlink,
    permission denied, vanished, or too large. ``kind`` says which
    (:class:`core.codes.UnreadableKind`), ``reason`` says it in plain words."""

    def __init__(
        self,
        reason: str,
        *,
        path: str | None = None,
        kind: UnreadableKind = UnreadableKind.OS_ERROR,
    ) -> None:
        self.reason = reason
        self.path = path
        self.kind = kind
        super().__init__(f"{path}: {reason}" if path else reason)


class ReadOnlyLock(LockError):
    """The lock can be read but Lockwarden must not remove or replace it; nothing was changed
    and nothing audited. ``kind`` (:class:`core.codes.ReadOnlyKind`) says why: a claim
    replayed from an af ledger (``ledger_claim``: only af changes its ledger), or a reclaim of
    a lock in a format Lockwarden never writes (``not_writable``: an af claim file, which can
    still be force-released). ``status`` is the verdict on it."""

    def __init__(
        self, message: str, *, kind: ReadOnlyKind, status: LockStatus | None = None
    ) -> None:
        self.kind = kind
        self.status = status
        super().__init__(message)


class UnsavedChanges(LockError):
    """A forced removal was refused: the lock file stands for a person's unsaved work (a Vim
    swap with unsaved changes, an Emacs lock whose auto-save file holds some:
    :func:`core.verdicts.unsaved.unsaved_changes`), and the caller did not say to discard it
    (``discard_unsaved``). Nothing was changed; the refusal is audited. ``reason`` is the
    ``unsaved_changes`` reason (tool, edited file, where the changes are, the recovery
    command); ``status`` the verdict on the file (docs/engine.md, "Unsaved work")."""

    def __init__(self, message: str, *, reason: Reason, status: LockStatus) -> None:
        self.reason = reason
        self.status = status
        super().__init__(message)


class NotKept(LockError):
    """A forced removal could not keep the foreign file it was about to remove: neither the
    desktop trash nor the quarantine folder took it (docs/engine.md, "Nothing is simply
    unlinked"). The file was put back where it was when the path was still free (else it
    stays under the temp name the message gives); nothing was removed."""


class TagTooLong(LockError, ValueError):
    """A tag longer than Lockwarden writes (:data:`core.defaults.MAX_TAG_BYTES`,
    4 KiB of UTF-8); nothing was written. ``size`` and ``limit`` are in bytes."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(
            f"tag is {size} bytes of UTF-8; Lockwarden writes tags of at most {limit} bytes"
        )


class LockHeld(LockError):
    """The lock is held by someone else. ``status`` is the holder's :class:`LockStatus`."""

    def __init__(self, message: str, status: LockStatus | None = None) -> None:
        self.status = status
        super().__init__(message)


class LockTimeout(LockError):
    """Waiting for a lock took longer than the timeout given (seconds).

    ``status`` is the last status seen of the holder, when there was one."""

    def __init__(self, message: str, status: LockStatus | None = None) -> None:
        self.status = status
        super().__init__(message)


class LockLost(LockError):
    """The lock file is no longer this acquisition's (removed, reclaimed or replaced by someone
    else). The engine never deletes a lock that is not ours: it raises this instead."""


class NotStale(LockError):
    """A reclaim was refused: the lock is not stale (and ``force`` was not given).

    ``status`` is the verdict that refused it; ``decision`` is the Task MCP reclaim decision
    (``LOCK_HELD``) when the lock is in ``task-mcp`` format."""

    def __init__(
        self, message: str, status: LockStatus | None = None, decision: str | None = None
    ) -> None:
        self.status = status
        self.decision = decision
        super().__init__(message)


class ConfigError(LockError):
    """The configuration file is invalid. ``key`` and ``line`` (1-based) locate the problem
    when known."""

    def __init__(self, message: str, *, key: str | None = None, line: int | None = None) -> None:
        self.key = key
        self.line = line
        super().__init__(message)
