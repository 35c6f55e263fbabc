"""Appending to an audit log: the kernel lock, the bounded tail read that finds the line to
chain onto, the repair of an interrupted write, the per-user fallback log.

Part of :mod:`core.audit`. The steps of one append: docs/audit.md, "One append, step by step";
which entries are fsynced (:data:`DURABLE_OPERATIONS`): docs/architecture.md, "Durability".
:func:`append` never raises for I/O: a failure sends the entry to
:func:`~core.audit.model.fallback_log_path` and says so (docs/audit.md, "Guarantees").
"""

from __future__ import annotations

import errno
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from core.audit import appender, placement
from core.audit.entry import encode_line, make_entry, repair_entry
from core.audit.model import (
    TAIL_WINDOW,
    ZERO_HASH,
    AuditWrite,
    LogRefused,
    explain,
    fallback_log_path,
    log_path_for,
)
from core.audit.parse import is_entry_object
from core.fsutil import pread

DEFAULT_LOCK_TIMEOUT = 5.0
"""Seconds an append waits for another writer's lock on the log before it writes to the
per-user fallback log instead (appends take well under a millisecond each)."""

_BLANK_NL = b" \t\r\n"


@dataclass(frozen=True)
class TornLine:
    """An interrupted write at the end of a log: byte ``offset`` and ``length`` of the torn
    line, its SHA-256 hex ``digest``, and ``before``, the digest of the non-blank line before
    it (64 zeros when there is none)."""

    offset: int
    length: int
    digest: str
    before: str


@dataclass(frozen=True)
class TailState:
    """What an append needs from the end of a log: ``prev`` (SHA-256 hex of the last non-blank
    line, 64 zeros when there is none), ``needs_newline`` (the file does not end with LF) and
    ``torn`` (the last line is an interrupted write, or None)."""

    prev: str
    needs_newline: bool
    torn: TornLine | None


class _Written(NamedTuple):
    """The last line this process appended to one log: the log's ``(st_dev, st_ino)``, its
    size in bytes just after the append, the line (without LF) and its SHA-256 hex."""

    ident: tuple[int, int]
    size: int
    line: bytes
    digest: str


_written: dict[str, _Written] = {}
_MAX_WRITTEN = 64  # logs remembered per process (the cache is dropped whole beyond it)


DURABLE_OPERATIONS = frozenset({"reclaim", "force_release", "lost", "repair"})
"""Operations whose entries are always fsynced: the ones that break or lose someone's lock.
Routine entries (acquire, release, refresh, refusals) are written without an fsync unless the
lock is ``durable``: a crash of the process loses nothing (the page cache survives it), and a
power loss ends every holder anyway."""


LostListener = Callable[[str, str, str], None]
"""Called as ``listener(lock_path, operation, error)`` when an entry could be written nowhere."""

_lost_listeners: list[LostListener] = []


def add_lost_listener(listener: LostListener) -> Callable[[], None]:
    """Call ``listener(lock_path, operation, error)`` (from the thread that appended) each time
    an entry can be written neither to the lock's directory log nor to the per-user log (a
    full disk, a read-only file system), so the user hears of it where they look: the CLI on
    stderr, the app in its Problems panel (docs/audit.md, "When an entry cannot be written").
    Returns the function that removes the listener. A listener that raises is ignored."""
    _lost_listeners.append(listener)

    def remove() -> None:
        if listener in _lost_listeners:
            _lost_listeners.remove(listener)
    return remove


def has_lost_listeners() -> bool:
    """True when someone listens for entries written nowhere (:func:`add_lost_listener`)."""
    return bool(_lost_listeners)


def _report_lost(lock_path: str, operation: str, error: str) -> None:
    for listener in list(_lost_listeners):
        try:
            listener(lock_path, operation, error)
        except Exception:  # a listener's bug must not cost the operation
            pass


def append(
    lock_path: str,
    operation: str,
    *,
    result: str = "ok",
    details: dict[str, Any] | None = None,
    format: str | None = None,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    durable: bool = False,
    user_log: bool = False,
) -> AuditWrite:
    """Append one entry about ``operation`` on ``lock_path`` to its directory's audit log.

    Args:
        lock_path: the lock the operation was about (made absolute for ``lockPath``).
        operation: ``acquire``, ``release``, ``reclaim``, ``force_release``, ``refresh``,
            ``acquire_refused``, ``release_refused``, ``reclaim_refused``, ``lost``.
        result: ``ok``, ``refused``, ``lost``, ``error``...
        details: JSON-like data; values JSON cannot hold are converted (datetimes to ISO text,
            NaN to text, other objects to ``str``), so a bad value never costs the entry.
        format: the lock's format name, or None.
        lock_timeout: seconds to wait for another writer's lock on the log (then fallback).
        durable: fsync the entry even when ``operation`` is not in :data:`DURABLE_OPERATIONS`.
        user_log: write to the per-user log only: the path is no lock and its directory is
            nobody's lock directory (``end_user``: a process ended because it used a file).

    Returns:
        :class:`AuditWrite`: ``fallback`` True when the lock's directory log was not used
        (``reason`` says why: it could not be written, or it lies in a git working tree or git
        directory, :mod:`core.audit.placement`) and the entry went to the per-user log;
        ``log_path`` "" and ``error`` set when that failed too (then every
        :func:`add_lost_listener` listener is told); ``repaired`` when an interrupted write was
        repaired.

    Never raises for I/O errors: auditing must not turn a done lock operation into a failure.
    """
    entry = make_entry(lock_path, operation, result, details, format)
    primary = log_path_for(lock_path)
    durable = durable or operation in DURABLE_OPERATIONS
    reason = "not a lock directory" if user_log else placement.refusal(primary)  # nor a repo
    if reason is None:
        try:
            repaired = append_entry(primary, entry, lock_timeout, durable)
            return AuditWrite(log_path=primary, fallback=False, repaired=repaired)
        except OSError as exc:
            reason = f"{primary}: {explain(exc)}"
    fallback = ""
    try:
        fallback = fallback_log_path()
        os.makedirs(os.path.dirname(fallback), mode=0o700, exist_ok=True)
        repaired = append_entry(fallback, entry, lock_timeout, durable)
        return AuditWrite(log_path=fallback, fallback=True, reason=reason, repaired=repaired)
    except Exception as exc:  # platformdirs or the file system: never raise from append
        where = fallback or "the per-user log directory"
        error = f"{reason}; {where}: {explain(exc)}"
        _report_lost(os.path.abspath(lock_path), operation, error)
        return AuditWrite(log_path="", fallback=True, error=error, reason=reason)


def append_entry(log_path: str, entry: dict[str, Any], lock_timeout: float,
                 durable: bool = True) -> bool:
    """Append ``entry`` (fields without ``prev``) to the log at ``log_path`` under its kernel
    lock, chained onto its last line (fsynced when ``durable``); True when an interrupted write
    was repaired first.

    The log is opened once per process and kept open (:mod:`core.audit.appender`); its
    identity is re-checked under the lock at every append, and this user's chain head is
    written in batches (:func:`core.audit.appender.note_head`; at once for a durable entry).

    Raises :class:`~core.audit.model.LogRefused` for a log that is not a regular file, has
    other hard links, belongs to another user or whose last line is too long to chain onto;
    ``TimeoutError`` when another process holds the lock past ``lock_timeout`` seconds; other
    ``OSError`` from the OS (ELOOP for a symlink). A log renamed or replaced between our open
    and our lock (rotation) is re-opened, so the entry never lands in a file no longer at
    ``log_path``.
    """
    with appender.mutex(log_path):
        fd, st = appender.lock_log(log_path, lock_timeout)
        done = False
        try:
            if st.st_nlink > 1:
                raise LogRefused(
                    errno.EMLINK, "has other hard links; refusing to write through them"
                )
            state = cached_tail(log_path, fd, st) or tail_state(fd, st.st_size)
            data, line = compose(log_path, entry, state)
            _write_all(fd, data)
            appender.step("written")
            repaired = state.torn is not None
            if durable or repaired:
                os.fsync(fd)
                appender.step("synced")
            end = os.lseek(fd, 0, os.SEEK_CUR)
            digest = hashlib.sha256(line).hexdigest()
            if len(_written) >= _MAX_WRITTEN:
                _written.clear()
            _written[log_path] = _Written((st.st_dev, st.st_ino), end, line, digest)
            appender.note_head(log_path, appender.Line(
                st.st_dev, st.st_ino, end - len(line) - 1, end, digest, str(entry["timestamp"])
            ), now=durable or repaired)  # fmt: skip
            done = True
        finally:
            appender.unlock(fd)
            if not done:
                appender.forget(log_path)  # an error: open afresh next time
        appender.step("unlocked")
        return repaired


def _write_all(fd: int, data: bytes) -> None:
    """Write ``data`` with one ``os.write``; more only after a short write (a nearly full disk),
    still under our lock. Raises OSError (ENOSPC, EFBIG...) when the rest cannot be written:
    the bytes already written stay, a torn line the next append repairs."""
    written = os.write(fd, data)
    while written < len(data):
        n = os.write(fd, data[written:])
        if n <= 0:
            raise OSError(errno.EIO, "short write")
        written += n


def compose(log_path: str, entry: dict[str, Any], state: TailState) -> tuple[bytes, bytes]:
    """The bytes to append for ``entry`` given the log's :class:`TailState`, and the entry's
    own line (without LF): an LF if the log lacks a final one, then a ``repair`` entry if the
    log ends in an interrupted write, then the entry, each line ending in LF."""
    prev = state.prev
    lines: list[bytes] = []
    if state.torn is not None:
        t = state.torn
        rep = repair_entry(
            entry, log_path, offset=t.offset, length=t.length, digest=t.digest, before=t.before
        )
        lines.append(encode_line({**rep, "prev": prev}))
        prev = hashlib.sha256(lines[-1]).hexdigest()
    line = encode_line({**entry, "prev": prev})
    lines.append(line)
    prefix = b"\n" if state.needs_newline else b""
    return prefix + b"".join(x + b"\n" for x in lines), line


def cached_tail(log_path: str, fd: int, st: os.stat_result) -> TailState | None:
    """The :class:`TailState` of the open, locked log ``fd`` (``st``: its ``fstat``) when this
    process wrote its last line, else None (the caller then reads the tail: :func:`tail_state`).

    A hit needs the same file (device and inode), the exact size the log had just after our
    append, and the bytes at its end equal to ``LF + our line + LF`` (or ``our line + LF`` when
    it is the whole file), read back with one ``pread`` of the line's length: then the last
    non-blank line is byte for byte the one we hashed, so the digest is the one
    :func:`tail_state` would compute, and nothing is to be repaired (the log ends with LF).
    Another writer's append, a truncation, a rewrite or a replacement makes it a miss. Raises
    OSError from the OS.
    """
    hit = _written.get(log_path)
    if hit is None or hit.ident != (st.st_dev, st.st_ino) or hit.size != st.st_size:
        return None
    want = b"\n" + hit.line + b"\n"
    start = st.st_size - len(want)
    if start < 0:  # our line is the whole log
        want, start = want[1:], 0
        if st.st_size != len(want):
            return None
    if pread(fd, len(want), start) != want:
        return None
    return TailState(hit.digest, False, None)


def tail_state(fd: int, size: int) -> TailState:
    """Read the last ``min(size, TAIL_WINDOW)`` bytes of the open log ``fd`` (``size`` bytes
    long) with one bounded read and find the line to chain onto.

    Raises :class:`~core.audit.model.LogRefused` (EFBIG) when the last non-blank line, or for an
    interrupted write the line before it, does not fit in those bytes, and OSError from the OS.
    """
    start = max(0, size - TAIL_WINDOW)
    buf = pread(fd, size - start, start)
    whole = start == 0
    if not buf:
        return TailState(ZERO_HASH, False, None)
    needs_newline = not buf.endswith(b"\n")
    last = _last_line(buf, len(buf), whole, "its last line")
    if last is None:
        return TailState(ZERO_HASH, needs_newline, None)
    ls, le = last
    line = buf[ls:le]
    digest = hashlib.sha256(line).hexdigest()
    if le < len(buf) or is_entry_object(line):
        return TailState(digest, needs_newline, None)
    before = _last_line(buf, ls, whole, "the line before its interrupted last line")
    before_digest = ZERO_HASH if before is None else hashlib.sha256(buf[slice(*before)]).hexdigest()
    return TailState(digest, True, TornLine(start + ls, len(line), digest, before_digest))


def _last_line(buf: bytes, end: int, whole: bool, what: str) -> tuple[int, int] | None:
    """Start and end (exclusive, before its LF) in ``buf`` of the last non-blank line that ends
    before ``end``; None when there is none and ``buf`` starts at the file's start (``whole``).
    Raises LogRefused when the line may begin before ``buf`` does."""
    content = buf[:end].rstrip(_BLANK_NL)
    if not content and whole:
        return None
    ls = content.rfind(b"\n") + 1
    if not content or (ls == 0 and not whole):
        raise LogRefused(
            errno.EFBIG,
            f"{what} is longer than the {TAIL_WINDOW // 1024} KiB read from its end (or blank "
            "that far): not an audit log Lockwarden can chain onto without reading it whole",
        )
    nl = buf.find(b"\n", len(content), end)
    return ls, (nl if nl >= 0 else end)
