"""The audit log's vocabulary: constants, the result types, ``via`` and the log paths.

Part of :mod:`core.audit` (the public façade). Nothing here reads or writes a log; every other
``core.audit_*`` module imports from this one and never the other way round.
"""

from __future__ import annotations

import datetime as _dt
import errno
import functools
import os
import threading
from dataclasses import dataclass, field
from typing import Any

from core.fsutil import AUDIT_LOG_NAME, os_reason

ZERO_HASH = "0" * 64
"""``prev`` of the first line of a log (docs/DESIGN.md "Audit log")."""

FALLBACK_LOG_NAME = "audit.log"
"""File name of the per-user fallback log inside ``platformdirs.user_log_dir("lockwarden")``."""

HEADS_DIR_NAME = "audit_heads"
"""Directory, inside ``platformdirs.user_state_dir("lockwarden")``, of the per-user chain heads
(:mod:`core.audit.heads`)."""

MAX_LINE_BYTES = 1024 * 1024
"""Longest line :func:`core.audit.read` parses, in bytes (1 MiB). Longer lines are still hashed
by a forward read (so the chain check stays exact) but become entries with ``error`` set."""

TAIL_WINDOW = 64 * 1024
"""Most bytes an append reads from the end of a log to find the line it chains onto (64 KiB).
A log whose last line (or, to repair an interrupted write, last two lines) does not fit is
refused and the entry goes to the fallback log: an append never reads a log whole."""

MAX_OWN_LINE_BYTES = 32 * 1024
"""Longest line :func:`core.audit.append` writes (32 KiB, half of :data:`TAIL_WINDOW`, so the
next append can always chain onto it). Bigger ``details`` are replaced by a note."""

CHUNK = 64 * 1024
"""Read size of the forward and backward readers, in bytes."""

BLANK = b" \t\r"
"""Bytes a blank line may hold (besides nothing): blank lines are not entries."""

VIAS = ("api", "cli", "gui")
"""Values of ``via``: which front end made the call (docs/DESIGN.md "Audit log")."""

OPERATIONS = (
    "acquire",
    "release",
    "reclaim",
    "force_release",
    "refresh",
    "acquire_refused",
    "release_refused",
    "reclaim_refused",
    "lost",
    "repair",
    "end_holder",
    "restore",
    "end_user",
)
"""Operations Lockwarden records (docs/audit.md); ``repair`` is the log's own entry after
an interrupted write, ``restore`` the undo of a force release (a kept file put back),
``end_user`` a process ended because it used a file (``lockwarden who``, the app). Not
enforced: other tools write their own (Task MCP writes ``reclaim``)."""

OWN_FIELDS = frozenset({"prev", "host", "via", "format", "result"})
"""Keys only Lockwarden's lines carry (Task MCP's have the other six). A line with any of them
is Lockwarden's and must carry a valid ``prev``; a line with none of them is *foreign*."""

_via_lock = threading.Lock()
_via = "api"


class LogRefused(OSError):
    """A log Lockwarden will not append to (not a regular file, hard-linked, another user's,
    a last line too long to chain onto...). ``strerror`` says why in plain words; the caller
    then writes to the fallback log."""


@dataclass(frozen=True)
class AuditWrite:
    """Where :func:`core.audit.append` wrote an entry.

    ``log_path``: the log written ("" when nothing could be written). ``fallback``: True when
    the entry went to the per-user fallback log (or nowhere) instead of the lock's directory.
    ``error``: set only when nothing was written (both logs failed), in plain words.
    ``reason``: why the directory log was not used, when ``fallback`` is True.
    ``repaired``: True when the log ended in an interrupted write (a torn last line) that this
    append terminated and recorded with a ``repair`` entry before its own.
    """

    log_path: str
    fallback: bool
    error: str | None = None
    reason: str | None = None
    repaired: bool = False


@dataclass(frozen=True)
class AuditEntry:
    """One non-blank line of an audit log, as read by :func:`core.audit.read`.

    ``line``: 1-based physical line number (blank lines count); 0 for an entry that stands for
    a log that could not be read at all (:func:`core.audit.read_many`); negative, counted from
    the end (-1 is the last line), in entries from :func:`core.audit.tail`, which never reads
    the whole file. ``offset``: byte offset of the line's first byte in the file (-1 unknown).
    ``timestamp``: an aware UTC datetime, None when missing or unparseable. Fields of the wrong
    JSON type read as None (``details`` as ``{}``). ``foreign``: a JSON object with none of
    Lockwarden's own keys (:data:`OWN_FIELDS`), i.e. another tool's line (Task MCP's
    ``logLockOperation``). ``error``: set (fields empty) when the line is not a JSON object:
    invalid UTF-8, invalid JSON, or longer than :data:`MAX_LINE_BYTES`. ``raw``: the line's
    text without its newline (cut at :data:`MAX_LINE_BYTES`, undecodable bytes replaced).
    ``digest``: SHA-256 hex of the whole line's bytes, the value the next line's ``prev`` must
    hold ("" when unknown: an over-long line met by ``tail``).
    """

    log_path: str
    line: int
    raw: str
    digest: str = ""
    timestamp: _dt.datetime | None = None
    operation: str | None = None
    lock_path: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    user: str | None = None
    pid: int | None = None
    host: str | None = None
    via: str | None = None
    format: str | None = None
    result: str | None = None
    prev: str | None = None
    foreign: bool = False
    error: str | None = None
    offset: int = -1


@dataclass(frozen=True)
class VerifyResult:
    """Outcome of :func:`core.audit.verify`.

    ``ok``: the chain holds and every line is a JSON object (an interrupted write at the very
    end does not count against it, see ``torn_tail``). ``entries``: non-blank lines (ours and
    foreign). ``foreign``: other tools' lines. ``bad_line``: 1-based number of the FIRST bad
    line, or None. ``reason``: plain words, e.g. ``"line 7: prev does not match line 6
    (edited, removed or reordered)"``; for a log that cannot be read at all ``bad_line`` is
    None and ``reason`` says why. ``log_path``: the log checked.

    ``torn_tail``: the last line is an interrupted write (no newline and not a JSON object:
    disk full or a crash during an append), not tampering; ``reason`` says so when ``ok``, and
    the next append repairs it. ``missing``: there is no log at ``log_path`` (``ok`` unless
    this user's chain head says one was written there). ``repaired``: interrupted writes
    earlier in the log that a ``repair`` entry accounts for. ``head_checked``: the log was
    compared with the chain head of this user's last append to it (:mod:`core.audit.heads`).
    """

    ok: bool
    entries: int
    foreign: int
    bad_line: int | None
    reason: str | None
    log_path: str = ""
    torn_tail: bool = False
    missing: bool = False
    repaired: int = 0
    head_checked: bool = field(default=False, compare=False)


def set_via(via: str) -> None:
    """Set, for the whole process, which front end later entries name in ``via``.

    ``via`` is ``"api"`` (the default), ``"cli"`` or ``"gui"``. The CLI and the GUI call this
    once at start-up. Raises ValueError for any other value.
    """
    global _via
    if via not in VIAS:
        raise ValueError(f"via must be one of {', '.join(VIAS)}, not {via!r}")
    with _via_lock:
        _via = via


def get_via() -> str:
    """The current process-wide ``via`` value (see :func:`set_via`)."""
    return _via


def log_path_for(lock_path: str) -> str:
    """Path of the audit log for ``lock_path``: ``.lock_audit.log`` in the lock's directory.

    Task MCP's rule (docs/specs/task-mcp.txt, ``logLockOperation``:
    ``path.join(path.dirname(lockPath), '.lock_audit.log')``), on the absolute path (symlinks in
    the directory part are not resolved). Pure string work; never raises for a string (an
    absolute path's answer is cached: it does not depend on the working directory).
    """
    if os.path.isabs(lock_path):
        return _log_path_for_absolute(lock_path)
    return os.path.join(os.path.dirname(os.path.abspath(lock_path)), AUDIT_LOG_NAME)


@functools.lru_cache(maxsize=1024)
def _log_path_for_absolute(lock_path: str) -> str:
    """:func:`log_path_for` of an absolute path (cached)."""
    return os.path.join(os.path.dirname(os.path.abspath(lock_path)), AUDIT_LOG_NAME)


def fallback_log_path() -> str:
    """The per-user fallback log, ``platformdirs.user_log_dir("lockwarden")/audit.log``.

    On Linux that is ``$XDG_STATE_HOME/lockwarden/log/audit.log`` (default
    ``~/.local/state/...``). The directory is not created here. Raises whatever platformdirs
    raises (nothing on the supported platforms).
    """
    import platformdirs

    return os.path.join(platformdirs.user_log_dir("lockwarden"), FALLBACK_LOG_NAME)


def logs_for(lock_path: str) -> tuple[str, str]:
    """Every log an entry about ``lock_path`` may be in: the lock's directory log
    (:func:`log_path_for`) and this user's own log (:func:`fallback_log_path`), which takes
    the entries a directory log may not (a lock in a git repository: docs/audit.md, "Where
    entries go"; a directory that is not writable). Never raises for a string."""
    return log_path_for(lock_path), _fallback_for(os.environ.get("XDG_STATE_HOME"),
                                                  os.environ.get("HOME"))


@functools.lru_cache(maxsize=8)
def _fallback_for(_xdg_state_home: str | None, _home: str | None) -> str:
    """:func:`fallback_log_path` for one environment (the arguments are only the cache key)."""
    return fallback_log_path()


def heads_dir() -> str:
    """Directory of this user's chain heads, ``platformdirs.user_state_dir("lockwarden")/
    audit_heads`` (Linux: ``~/.local/state/lockwarden/audit_heads``). Not created here.
    Looked up once per environment (``XDG_STATE_HOME``, ``HOME``): every audit entry asks."""
    return _heads_dir(os.environ.get("XDG_STATE_HOME"), os.environ.get("HOME"))


@functools.lru_cache(maxsize=8)
def _heads_dir(_xdg_state_home: str | None, _home: str | None) -> str:
    """:func:`heads_dir` for one environment (the arguments are only the cache key)."""
    import platformdirs

    return os.path.join(platformdirs.user_state_dir("lockwarden"), HEADS_DIR_NAME)


def resolve_log_path(path: str) -> str:
    """The log :func:`core.audit.read` reads for ``path`` (a string path; result absolute).

    A directory gives its ``.lock_audit.log`` -- but the per-user log's own folder, which has
    none, gives the per-user log (:func:`fallback_log_path`: ``audit.log``), as does any folder
    holding an ``audit.log`` and no ``.lock_audit.log`` (another user's or HOME's); a file named
    ``*.log`` or ``*.jsonl`` is a log itself; anything else is taken as a lock file and gives
    its directory's log (:func:`log_path_for`). Only stats ``path``; never raises for a string.
    """
    if os.path.isdir(path):
        log = os.path.join(os.path.abspath(path), AUDIT_LOG_NAME)
        if os.path.lexists(log):
            return log
        own = fallback_log_path()
        if _same_dir(path, os.path.dirname(own)):
            return own
        kept = os.path.join(os.path.abspath(path), FALLBACK_LOG_NAME)
        return kept if os.path.isfile(kept) else log  # a per-user log folder (another HOME's)
    name = os.path.basename(path)
    if name == AUDIT_LOG_NAME or name.endswith((".log", ".jsonl")):
        return os.path.abspath(path)
    return log_path_for(path)


def _same_dir(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` name the same existing directory; never raises."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def explain(exc: BaseException) -> str:
    """Plain-words reason for an error met on a log: :func:`core.fsutil.os_reason` for an
    ``OSError`` (a missing path there means the log's directory), the refusal's own words for
    :class:`LogRefused`, ``str(exc)`` otherwise."""
    if isinstance(exc, LogRefused):
        return exc.strerror or str(exc)
    if isinstance(exc, OSError):
        if exc.errno == errno.ENOENT:
            return "directory does not exist"
        return os_reason(exc)
    return str(exc)
