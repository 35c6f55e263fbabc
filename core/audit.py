"""The audit log: one JSON object per line in ``.lock_audit.log`` beside the locks, hash-chained.

Rules and where they come from:

* File name, place and the first six fields (``timestamp``, ``operation``, ``lockPath``,
  ``details``, ``user``, ``pid``) are Task MCP's (spec ``specs/004_6119ce42cf21683e.txt``,
  "Audit logging", ``logLockOperation``; DESIGN.md "Formats", facts about Task MCP): the log is
  ``path.join(path.dirname(lockPath), '.lock_audit.log')`` and ``timestamp`` is JavaScript's
  ``toISOString()`` (UTC, milliseconds, ``Z``). Task MCP appends to the same file, so its lines
  (which have no ``prev``) are accepted as *foreign* entries.
* Lockwarden adds ``host``, ``via`` (``api``, ``cli``, ``gui``), ``format``, ``result`` and
  ``prev`` (DESIGN.md "Audit log"). ``prev`` is the SHA-256 (lower-case hex) of the bytes of the
  line right before it, without its ``\\n`` (a ``\\r`` before the ``\\n`` is part of the line);
  the first line of a log has ``prev`` = 64 zeros. Lines that are empty or hold only spaces,
  tabs and ``\\r`` are not entries and are skipped by both the writer and the reader, so "the
  line right before" means the previous non-blank line. Editing, deleting, inserting or
  swapping lines therefore breaks the chain at the first of *our* lines after the change
  (:func:`verify` reports it). Limits: a change to the last lines after our last entry (e.g.
  truncating the tail, or editing the very last line) leaves no later line to notice it.
* Lines are compact JSON (``separators=(",", ":")``) with ``ensure_ascii=False``, like
  ``JSON.stringify``, encoded in UTF-8. JSON escapes every control character, so a line never
  holds a raw newline whatever ``details`` contains. (A string with a lone surrogate cannot be
  UTF-8: that line is written with ``ensure_ascii=True`` instead, still valid JSON.)
* Appends are serialised with a kernel lock on the log itself (DESIGN.md "Audit log"): open
  with ``O_RDWR|O_APPEND|O_CREAT|O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC`` (mode 0o644; read access is
  needed to hash the last line; ``O_NONBLOCK`` makes a FIFO planted at the log's name fail at
  once instead of hanging), refuse anything but a regular file with one link, ``flock(LOCK_EX)``
  (Windows: ``msvcrt.locking`` of one byte far past the end of the file), read the last line
  backwards from the end, then ONE ``os.write`` of the whole line and ``os.fsync``.
* When the lock's directory log cannot be written (permission denied, read-only file system, a
  symlink or FIFO at the log's name, missing directory...) the entry goes to the per-user
  fallback log ``platformdirs.user_log_dir("lockwarden")/audit.log`` with the same format and
  chain rules, and :func:`append` says so (``AuditWrite.fallback``) so the UI can tell the user.
  :func:`append` never raises for I/O errors.
* The ``user`` field is the real OS user of the process (the name of the real uid from the
  password database on POSIX, :func:`getpass.getuser` on Windows), never an environment
  variable a caller could set: Task MCP's ``process.env.USER`` can lie.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import errno
import getpass
import hashlib
import json
import math
import os
import socket
import stat
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from core.errors import UnreadableError
from core.fsutil import AUDIT_LOG_NAME, READ_FLAGS, describe_mode, human_size, os_reason

__all__ = [
    "FALLBACK_LOG_NAME",
    "MAX_LINE_BYTES",
    "OPERATIONS",
    "VIAS",
    "ZERO_HASH",
    "AuditEntry",
    "AuditWrite",
    "VerifyResult",
    "append",
    "fallback_log_path",
    "get_via",
    "log_path_for",
    "read",
    "read_many",
    "resolve_log_path",
    "set_via",
    "verify",
]

ZERO_HASH = "0" * 64
"""``prev`` of the first line of a log (DESIGN.md "Audit log")."""

FALLBACK_LOG_NAME = "audit.log"
"""File name of the per-user fallback log inside ``platformdirs.user_log_dir("lockwarden")``."""

MAX_LINE_BYTES = 1024 * 1024
"""Longest line :func:`read` parses, in bytes (1 MiB). Longer lines are still hashed (so the
chain check stays exact) but become entries with ``error`` set; our own lines are a few hundred
bytes."""

VIAS = ("api", "cli", "gui")
"""Values of ``via``: which front end made the call (DESIGN.md "Audit log")."""

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
)
"""Operations the engine records (docs/INTERFACES.md, core/audit.py). Not enforced: other
tools write their own (Task MCP writes ``reclaim`` and others)."""

_BLANK = b" \t\r"
_CHUNK = 64 * 1024
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NOCTTY = getattr(os, "O_NOCTTY", 0)
_O_BINARY = getattr(os, "O_BINARY", 0)
_APPEND_FLAGS = (
    os.O_RDWR
    | os.O_APPEND
    | os.O_CREAT
    | _O_NOFOLLOW
    | _O_NONBLOCK
    | _O_CLOEXEC
    | _O_NOCTTY
    | _O_BINARY
)
_LOG_MODE = 0o644
_REOPEN_TRIES = 10
_WIN_LOCK_OFFSET = 0x7FFF_FFF0  # a byte past any real log: locking it never blocks readers

_via_lock = threading.Lock()
_via = "api"


# --------------------------------------------------------------------------- public types


@dataclass(frozen=True)
class AuditWrite:
    """Where :func:`append` wrote an entry.

    ``log_path``: the log written ("" when nothing could be written). ``fallback``: True when
    the entry went to the per-user fallback log (or nowhere) instead of the lock's directory.
    ``error``: set only when nothing was written (both logs failed), in plain words.
    ``reason``: why the directory log was not used, when ``fallback`` is True.
    """

    log_path: str
    fallback: bool
    error: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class AuditEntry:
    """One non-blank line of an audit log, as read by :func:`read`.

    ``line`` is 1-based (physical line in the file; 0 for an entry that stands for a log that
    could not be read at all, from :func:`read_many`). ``timestamp`` is an aware UTC datetime
    or None when missing/unparseable. Fields of the wrong JSON type read as None (``details``
    as ``{}``). ``foreign`` is True for a valid JSON object without ``prev`` (a line written
    by another tool, e.g. Task MCP's ``logLockOperation``). ``error`` is set (and the fields
    are empty) when the line is not a JSON object: invalid UTF-8, invalid JSON, or longer than
    :data:`MAX_LINE_BYTES`. ``raw`` is the line's text without its newline (cut at
    :data:`MAX_LINE_BYTES`, undecodable bytes replaced). ``digest`` is the SHA-256 hex of the
    whole line's bytes, the value the next line's ``prev`` must hold.
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


@dataclass(frozen=True)
class VerifyResult:
    """Outcome of :func:`verify`.

    ``ok``: the whole chain holds and every line is a JSON object. ``entries``: non-blank lines
    in the log (ours and foreign). ``foreign``: lines without ``prev`` (other tools').
    ``bad_line``: 1-based number of the FIRST bad line, or None. ``reason``: plain words, e.g.
    ``"line 7: prev does not match line 6 (edited, removed or reordered)"``; for a log that
    cannot be read at all, ``bad_line`` is None and ``reason`` says why. ``log_path``: the log
    checked.
    """

    ok: bool
    entries: int
    foreign: int
    bad_line: int | None
    reason: str | None
    log_path: str = ""


# --------------------------------------------------------------------------- configuration


def set_via(via: str) -> None:
    """Set, for the whole process, which front end later entries name in ``via``.

    ``via`` is ``"api"`` (the default), ``"cli"`` or ``"gui"`` (DESIGN.md "Audit log"). The CLI
    and the GUI call this once at start-up. Raises ValueError for any other value.
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

    Task MCP's rule (spec 004, ``logLockOperation``: ``path.join(path.dirname(lockPath),
    '.lock_audit.log')``), on the absolute path (symlinks in the directory part are not
    resolved). Pure string work; never raises for a string.
    """
    return os.path.join(os.path.dirname(os.path.abspath(lock_path)), AUDIT_LOG_NAME)


def fallback_log_path() -> str:
    """The per-user fallback log, ``platformdirs.user_log_dir("lockwarden")/audit.log``
    (DESIGN.md "Audit log"). On Linux that is ``$XDG_STATE_HOME/lockwarden/log/audit.log``
    (default ``~/.local/state/...``). The directory is not created here."""
    import platformdirs

    return os.path.join(platformdirs.user_log_dir("lockwarden"), FALLBACK_LOG_NAME)


# --------------------------------------------------------------------------- writing


def append(
    lock_path: str,
    operation: str,
    *,
    result: str = "ok",
    details: dict[str, Any] | None = None,
    format: str | None = None,
) -> AuditWrite:
    """Append one entry about ``operation`` on ``lock_path`` to its directory's audit log.

    Args:
        lock_path: the lock the operation was about (made absolute for ``lockPath``).
        operation: ``acquire``, ``release``, ``reclaim``, ``force_release``, ``refresh``,
            ``acquire_refused``, ``release_refused``, ``reclaim_refused``, ``lost``
            (docs/INTERFACES.md).
        result: ``ok``, ``refused``, ``lost``, ``error``...
        details: JSON-like data (``holder``/``displaced``, ``reason``, ``decision``, ``token``).
            Values JSON cannot hold are converted (datetimes to ISO strings, NaN to text,
            other objects to ``str``), so a bad value never costs the entry.
        format: the lock's format name, or None.

    Returns:
        :class:`AuditWrite`. ``fallback`` is True when the lock's directory log could not be
        written (``reason`` says why) and the entry went to :func:`fallback_log_path`. When
        that failed too, ``log_path`` is "" and ``error`` says why.

    Never raises for I/O errors (the engine calls it from every lock operation; auditing must
    not turn a done operation into a failure). Rules: DESIGN.md "Audit log"; spec 004
    ``logLockOperation``; see the module docstring.
    """
    entry: dict[str, Any] = {
        "timestamp": _now_iso(),
        "operation": str(operation),
        "lockPath": os.path.abspath(lock_path),
        "details": _jsonable(details if details is not None else {}),
        "user": _os_user(),
        "pid": os.getpid(),
        "host": _hostname(),
        "via": _via,
        "format": None if format is None else str(format),
        "result": str(result),
    }
    if not isinstance(entry["details"], dict):
        entry["details"] = {"value": entry["details"]}
    primary = log_path_for(lock_path)
    try:
        _append_entry(primary, entry)
        return AuditWrite(log_path=primary, fallback=False)
    except OSError as exc:
        reason = f"{primary}: {_os_reason(exc)}"
    fallback = ""
    try:
        fallback = fallback_log_path()
        os.makedirs(os.path.dirname(fallback), mode=0o700, exist_ok=True)
        _append_entry(fallback, entry)
        return AuditWrite(log_path=fallback, fallback=True, reason=reason)
    except Exception as exc:  # platformdirs or the file system: never raise from append
        where = fallback or "the per-user log directory"
        detail = _os_reason(exc) if isinstance(exc, OSError) else str(exc)
        return AuditWrite(
            log_path="", fallback=True, error=f"{reason}; {where}: {detail}", reason=reason
        )


def _append_entry(log_path: str, entry: dict[str, Any]) -> None:
    """Append ``entry`` (without ``prev``) to ``log_path`` under the kernel lock.

    Raises OSError (errno set where the OS gave one) for anything that stops the write,
    including a log that is a symlink (ELOOP), not a regular file or hard-linked elsewhere.
    If the log was renamed or replaced between our open and our lock (rotation by another
    tool), the lock is dropped and the open retried, so the entry never lands in a file that is
    no longer at ``log_path``.
    """
    for _attempt in range(_REOPEN_TRIES):
        fd = os.open(log_path, _APPEND_FLAGS, _LOG_MODE)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                kind = describe_mode(st.st_mode) or "not a regular file"
                raise OSError(errno.EINVAL, f"is {kind}, not an audit log")
            with _locked(fd):
                st = os.fstat(fd)
                try:
                    now = os.lstat(log_path)
                except FileNotFoundError:
                    continue  # removed meanwhile: open (create) again
                if (now.st_ino, now.st_dev) != (st.st_ino, st.st_dev):
                    continue  # replaced meanwhile
                if st.st_nlink > 1:
                    raise OSError(
                        errno.EMLINK, "has other hard links; refusing to write through them"
                    )
                prev, needs_newline = _last_line_digest(fd, st.st_size)
                line = _encode_entry({**entry, "prev": prev})
                data = (b"\n" if needs_newline else b"") + line + b"\n"
                written = os.write(fd, data)
                while written < len(data):  # only on a nearly full disk; still under our lock
                    n = os.write(fd, data[written:])
                    if n <= 0:
                        raise OSError(errno.EIO, "short write")
                    written += n
                os.fsync(fd)
                return
        finally:
            os.close(fd)
    raise OSError(errno.EAGAIN, "kept being replaced while we tried to append")


LOCK_TIMEOUT = 5.0
"""Seconds an append waits for another writer's lock on the log before it writes to the
per-user fallback log instead (appends take well under a millisecond each)."""


@contextlib.contextmanager
def _locked(fd: int) -> Iterator[None]:
    """Hold an exclusive kernel lock on the open log ``fd``; on POSIX wait at most
    :data:`LOCK_TIMEOUT` seconds (``TimeoutError``, an ``OSError``: the caller falls back)."""
    if os.name == "nt":  # pragma: no cover - not testable on Linux CI
        import msvcrt

        os.lseek(fd, _WIN_LOCK_OFFSET, os.SEEK_SET)
        while True:
            try:
                msvcrt.locking(fd, msvcrt.LK_LOCK, 1)  # type: ignore[attr-defined]
                break
            except OSError as exc:  # LK_LOCK gives up after ~10 s; keep waiting
                if exc.errno not in (errno.EDEADLK, errno.EACCES):
                    raise
        try:
            yield
        finally:
            os.lseek(fd, _WIN_LOCK_OFFSET, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]
    else:
        import fcntl

        # bounded: a stopped or hostile process holding the log's lock must not hang every
        # lock operation in the directory; past the limit the entry goes to the fallback log
        deadline = time.monotonic() + LOCK_TIMEOUT
        delay = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise TimeoutError(
                        errno.ETIMEDOUT,
                        f"the audit log stayed locked by another process for {LOCK_TIMEOUT:g} s",
                    ) from None
                time.sleep(delay)  # flock has no wake-up event: short, growing waits
                delay = min(delay * 2, 0.05)
            except InterruptedError:  # pragma: no cover - PEP 475 retries already
                continue
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)


def _pread(fd: int, n: int, offset: int) -> bytes:
    """Read up to ``n`` bytes at ``offset`` (portable: lseek + read; writes use O_APPEND so
    the file position does not matter to them)."""
    if hasattr(os, "pread"):
        return os.pread(fd, n, offset)
    os.lseek(fd, offset, os.SEEK_SET)  # pragma: no cover - Windows
    return os.read(fd, n)  # pragma: no cover - Windows


def _last_line_digest(fd: int, size: int) -> tuple[str, bool]:
    """SHA-256 hex of the last non-blank line of the open log (``ZERO_HASH`` when there is
    none) and whether the file lacks a final newline.

    Reads backwards from the end in 64 KiB steps to find the line, then hashes it forwards, so
    neither the file nor a huge last line is held in memory.
    """
    if size <= 0:
        return ZERO_HASH, False
    needs_newline = _pread(fd, 1, size - 1) != b"\n"
    # 1. skip trailing blank bytes (spaces, tabs, CR, LF) to find the end of the content
    pos = size
    content_end = -1
    while pos > 0 and content_end < 0:
        start = max(0, pos - _CHUNK)
        chunk = _pread(fd, pos - start, start)
        stripped = chunk.rstrip(_BLANK + b"\n")
        if stripped:
            content_end = start + len(stripped)
        pos = start
    if content_end < 0:
        return ZERO_HASH, needs_newline
    # 2. the line ends at the first LF at or after content_end (or at EOF)
    tail = _pread(fd, min(_CHUNK, size - content_end), content_end)
    nl = tail.find(b"\n")
    line_end = content_end + nl if nl >= 0 else size
    if nl < 0 and size - content_end > _CHUNK:  # pragma: no cover - blank run > 64 KiB
        line_end = _find_forward(fd, content_end, size)
    # 3. the line starts after the last LF before content_end (or at 0)
    pos = content_end
    line_start = 0
    while pos > 0:
        start = max(0, pos - _CHUNK)
        chunk = _pread(fd, pos - start, start)
        nl = chunk.rfind(b"\n")
        if nl >= 0:
            line_start = start + nl + 1
            break
        pos = start
    # 4. hash it forwards
    h = hashlib.sha256()
    pos = line_start
    while pos < line_end:
        chunk = _pread(fd, min(_CHUNK, line_end - pos), pos)
        if not chunk:
            break
        h.update(chunk)
        pos += len(chunk)
    return h.hexdigest(), needs_newline


def _find_forward(fd: int, pos: int, size: int) -> int:  # pragma: no cover - rare
    while pos < size:
        chunk = _pread(fd, min(_CHUNK, size - pos), pos)
        if not chunk:
            break
        nl = chunk.find(b"\n")
        if nl >= 0:
            return pos + nl
        pos += len(chunk)
    return size


def _encode_entry(entry: dict[str, Any]) -> bytes:
    """Compact one-line JSON in UTF-8 (``ensure_ascii=False``; ``True`` if a lone surrogate
    makes the text unencodable)."""
    text = json.dumps(entry, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(entry, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _jsonable(value: Any, depth: int = 0) -> Any:
    """``value`` made JSON-safe: dict keys as strings, tuples/sets as lists, non-finite floats
    and datetimes as strings, objects with ``to_dict()`` through it, anything else ``str()``.
    Nesting deeper than 32 levels is cut (also breaks reference cycles)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth >= 32:
        return "..."
    if isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v, depth + 1) for v in value]
    if isinstance(value, _dt.datetime):
        return value.isoformat()
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        try:
            return _jsonable(to_dict(), depth + 1)
        except Exception:
            pass
    return str(value)


def _now_iso() -> str:
    """Now in JavaScript ``toISOString()`` form: ``2026-11-21T09:31:00.000Z`` (UTC, ms)."""
    now = _dt.datetime.now(_dt.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


_user_cache: str | None = None


def _os_user() -> str:
    """Name of the real OS user (real uid on POSIX); the uid as text when it has no name."""
    global _user_cache
    if _user_cache is None:
        name: str
        try:
            if os.name == "posix":
                import pwd

                name = pwd.getpwuid(os.getuid()).pw_name
            else:  # pragma: no cover - Windows
                name = getpass.getuser()
        except (KeyError, OSError, ImportError):
            name = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
        _user_cache = name
    return _user_cache


def _hostname() -> str:
    try:
        return socket.gethostname()
    except OSError:  # pragma: no cover
        return "unknown"


# --------------------------------------------------------------------------- reading


def resolve_log_path(path: str) -> str:
    """The log :func:`read` reads for ``path``: a directory gives its ``.lock_audit.log``; a
    file named ``*.log`` or ``*.jsonl`` is a log itself; anything else is taken as a lock file
    and gives its directory's log (:func:`log_path_for`)."""
    if os.path.isdir(path):
        return os.path.join(os.path.abspath(path), AUDIT_LOG_NAME)
    name = os.path.basename(path)
    if name == AUDIT_LOG_NAME or name.endswith((".log", ".jsonl")):
        return os.path.abspath(path)
    return log_path_for(path)


def read(path: str) -> list[AuditEntry]:
    """All entries of an audit log, oldest first.

    ``path`` is a log file, a lock file (its directory's log) or a directory (its
    ``.lock_audit.log``); see :func:`resolve_log_path`. A missing log gives ``[]``. Blank lines
    are skipped; line numbers stay physical. Lines are read in 64 KiB chunks, never more than
    :data:`MAX_LINE_BYTES` of a line kept, so large logs and huge lines are fine.

    Never raises on content: a line that is not a JSON object becomes an entry with ``error``.
    Raises :class:`core.errors.UnreadableError` when the log itself cannot be read: it is a
    symlink (never followed), a FIFO, socket, device or directory (never opened, so never a
    hang), or permission is denied. Safety rules as ``core.fsutil`` (DESIGN.md "Formats").
    """
    log = resolve_log_path(path)
    return list(_iter_entries(log))


def read_many(paths: Iterable[str]) -> list[AuditEntry]:
    """Entries of several logs (each as :func:`read`), newest first, for the GUI's viewer.

    Entries without a timestamp come last. The same log named twice (e.g. a directory and a
    lock in it) is read once. A log that cannot be read gives one entry with ``line`` 0 and
    ``error`` saying why, instead of an exception; missing logs give nothing.
    """
    seen: set[str] = set()
    out: list[AuditEntry] = []
    for p in paths:
        log = resolve_log_path(p)
        if log in seen:
            continue
        seen.add(log)
        try:
            out.extend(_iter_entries(log))
        except UnreadableError as exc:
            out.append(AuditEntry(log_path=log, line=0, raw="", error=exc.reason))
    epoch = _dt.datetime.min.replace(tzinfo=_dt.UTC)
    out.sort(
        key=lambda e: (e.timestamp is not None, e.timestamp or epoch, e.log_path, e.line),
        reverse=True,
    )
    return out


def verify(path: str) -> VerifyResult:
    """Check the hash chain of an audit log (``lockwarden audit --verify``).

    ``path`` as for :func:`read`. Every line must be a JSON object; every line with ``prev``
    (ours) must carry the SHA-256 of the previous non-blank line, or 64 zeros when it is the
    first; foreign lines (no ``prev``, e.g. Task MCP's) are counted and hashed into the chain.
    Reports the FIRST bad line with a plain reason, e.g. ``"line 7: prev does not match line 6
    (edited, removed or reordered)"`` or ``"line 3: not valid JSON"``. A missing log is ok with
    0 entries. Never raises: an unreadable log gives ``ok=False`` with the reason. Rule:
    DESIGN.md "Audit log".
    """
    log = resolve_log_path(path)
    entries = 0
    foreign = 0
    bad_line: int | None = None
    reason: str | None = None
    prev_digest: str | None = None
    prev_line = 0
    try:
        for e in _iter_entries(log):
            entries += 1
            if bad_line is None:
                problem = _check(e, prev_digest, prev_line)
                if problem is not None:
                    bad_line, reason = e.line, f"line {e.line}: {problem}"
            if e.foreign and e.error is None:
                foreign += 1
            prev_digest, prev_line = e.digest, e.line
    except UnreadableError as exc:
        return VerifyResult(False, entries, foreign, None, f"{log}: {exc.reason}", log)
    return VerifyResult(bad_line is None, entries, foreign, bad_line, reason, log)


def _check(e: AuditEntry, prev_digest: str | None, prev_line: int) -> str | None:
    if e.error is not None:
        return e.error
    if e.foreign:
        return None
    if not isinstance(e.prev, str) or len(e.prev) != 64 or _not_hex(e.prev):
        return "prev is not a SHA-256 hex digest"
    if prev_digest is None:
        if e.prev != ZERO_HASH:
            return (
                "prev should be 64 zeros in the first line of a log (lines before it were removed)"
            )
        return None
    if e.prev != prev_digest:
        return f"prev does not match line {prev_line} (edited, removed or reordered)"
    return None


def _not_hex(s: str) -> bool:
    return any(c not in "0123456789abcdef" for c in s)


def _open_log(log: str) -> int | None:
    """fd of the log opened for reading, None if missing; UnreadableError otherwise."""
    try:
        st = os.lstat(log)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnreadableError(_os_reason(exc), path=log) from exc
    if stat.S_ISLNK(st.st_mode):
        raise UnreadableError("is a symbolic link; links are never followed", path=log)
    kind = describe_mode(st.st_mode)
    if kind is not None:
        raise UnreadableError(f"is {kind}, not an audit log", path=log)
    try:
        fd = os.open(log, READ_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnreadableError(_os_reason(exc), path=log) from exc
    fst = os.fstat(fd)
    if (fst.st_ino, fst.st_dev) != (st.st_ino, st.st_dev) or not stat.S_ISREG(fst.st_mode):
        os.close(fd)
        raise UnreadableError("changed while being opened; try again", path=log)
    return fd


def _iter_lines(fd: int) -> Iterator[tuple[int, bytes, int, str]]:
    """``(lineno, kept_bytes, total_len, sha256_hex)`` per line split on LF; ``kept_bytes``
    is at most ``MAX_LINE_BYTES + 1`` bytes of it. A final line without LF is included."""
    lineno = 0
    h = hashlib.sha256()
    kept: list[bytes] = []
    kept_len = 0
    total = 0
    while True:
        try:
            chunk = os.read(fd, _CHUNK)
        except BlockingIOError:  # pragma: no cover - regular files never block
            continue
        if not chunk:
            break
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            piece = chunk[start:] if nl < 0 else chunk[start:nl]
            h.update(piece)
            total += len(piece)
            if kept_len <= MAX_LINE_BYTES:
                room = MAX_LINE_BYTES + 1 - kept_len
                kept.append(piece[:room])
                kept_len += min(len(piece), room)
            if nl < 0:
                break
            lineno += 1
            yield lineno, b"".join(kept), total, h.hexdigest()
            h = hashlib.sha256()
            kept, kept_len, total = [], 0, 0
            start = nl + 1
    if total or kept_len:
        lineno += 1
        yield lineno, b"".join(kept), total, h.hexdigest()


def _iter_entries(log: str) -> Iterator[AuditEntry]:
    fd = _open_log(log)
    if fd is None:
        return
    try:
        for lineno, data, total, digest in _iter_lines(fd):
            if total <= MAX_LINE_BYTES and not data.strip(_BLANK):
                continue  # blank line: not an entry, not in the chain
            yield _parse_line(log, lineno, data, total, digest)
    finally:
        os.close(fd)


def _parse_line(log: str, lineno: int, data: bytes, total: int, digest: str) -> AuditEntry:
    raw = data[:MAX_LINE_BYTES].decode("utf-8", errors="replace")
    if total > MAX_LINE_BYTES:
        reason = (
            f"line is {human_size(total)}, longer than the "
            f"{human_size(MAX_LINE_BYTES)} an audit entry can be"
        )
        return AuditEntry(log, lineno, raw, digest, error=reason)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return AuditEntry(log, lineno, raw, digest, error=f"not valid UTF-8 (byte {exc.start})")
    try:
        obj = json.loads(text)
    except ValueError:
        return AuditEntry(log, lineno, raw, digest, error="not valid JSON")
    if not isinstance(obj, dict):
        return AuditEntry(log, lineno, raw, digest, error="not a JSON object")
    details = obj.get("details")
    pid = obj.get("pid")
    return AuditEntry(
        log_path=log,
        line=lineno,
        raw=raw.rstrip("\r"),
        digest=digest,
        timestamp=_parse_ts(obj.get("timestamp")),
        operation=_str(obj.get("operation")),
        lock_path=_str(obj.get("lockPath")),
        details=details if isinstance(details, dict) else {},
        user=_str(obj.get("user")),
        pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        host=_str(obj.get("host")),
        via=_str(obj.get("via")),
        format=_str(obj.get("format")),
        result=_str(obj.get("result")),
        prev=_str(obj.get("prev")),
        foreign="prev" not in obj,
    )


def _str(v: object) -> str | None:
    return v if isinstance(v, str) else None


def _parse_ts(v: object) -> _dt.datetime | None:
    """ISO 8601 (``Z`` or offset; naive taken as UTC) to an aware UTC datetime, else None."""
    if not isinstance(v, str):
        return None
    try:
        ts = _dt.datetime.fromisoformat(v)
    except ValueError:
        return None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=_dt.UTC)
    return ts.astimezone(_dt.UTC)


def _os_reason(exc: OSError) -> str:
    """:func:`core.fsutil.os_reason`; a missing path here means the log's directory."""
    if exc.errno == errno.ENOENT:
        return "directory does not exist"
    return os_reason(exc)
