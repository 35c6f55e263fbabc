"""Reading audit logs: forwards (:func:`read`, :func:`read_many`, and the lines :func:`verify
<core.audit.verify>` checks) and backwards from the end (:func:`tail`).

Part of :mod:`core.audit`. Safety rules as :mod:`core.fsutil`: a log is never followed through
a symlink, a FIFO, socket, device or directory is never opened (so never a hang), and reads go
in 64 KiB chunks, never more than :data:`~core.audit.model.MAX_LINE_BYTES` of a line kept.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from core.audit.model import CHUNK, MAX_LINE_BYTES, AuditEntry, explain, resolve_log_path
from core.audit.parse import is_blank, parse_line
from core.errors import UnreadableError
from core.fsutil import READ_FLAGS, describe_mode, human_size, pread

_BLANK_NL = b" \t\r\n"


@dataclass(frozen=True)
class RawLine:
    """One physical line as the forward reader splits it (on LF).

    ``lineno``: 1-based. ``offset``: byte offset of its first byte. ``data``: its bytes without
    the LF, at most ``MAX_LINE_BYTES + 1`` of them. ``total``: its full length in bytes.
    ``digest``: SHA-256 hex of all of it. ``terminated``: an LF follows it (only the last line
    of a file can lack one).
    """

    lineno: int
    offset: int
    data: bytes
    total: int
    digest: str
    terminated: bool


def open_log(log: str) -> int | None:
    """A read-only fd of the log ``log`` (a path), or None when there is none.

    Raises :class:`core.errors.UnreadableError` when the log is a symlink (never followed), a
    FIFO, socket, device or directory (never opened), permission is denied, or it changed
    between our ``lstat`` and our ``open``. The caller closes the fd.
    """
    try:
        st = os.lstat(log)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnreadableError(explain(exc), path=log) from exc
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
        raise UnreadableError(explain(exc), path=log) from exc
    fst = os.fstat(fd)
    if (fst.st_ino, fst.st_dev) != (st.st_ino, st.st_dev) or not stat.S_ISREG(fst.st_mode):
        os.close(fd)
        raise UnreadableError("changed while being opened; try again", path=log)
    return fd


def iter_lines(fd: int) -> Iterator[RawLine]:
    """Every physical line of the open file ``fd``, first to last, read in 64 KiB chunks from
    its current position (0 when just opened). A final line without LF is included when it is
    not empty. Memory: at most ``MAX_LINE_BYTES + 1`` bytes of a line are kept. Raises OSError
    from the OS."""
    lineno = 0
    h = hashlib.sha256()
    kept: list[bytes] = []
    kept_len = total = offset = pos = 0
    while True:
        try:
            chunk = os.read(fd, CHUNK)
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
            yield RawLine(lineno, offset, b"".join(kept), total, h.hexdigest(), True)
            offset = pos + nl + 1
            h = hashlib.sha256()
            kept, kept_len, total = [], 0, 0
            start = nl + 1
        pos += len(chunk)
    if total or kept_len:
        yield RawLine(lineno + 1, offset, b"".join(kept), total, h.hexdigest(), False)


def is_entry_line(raw: RawLine) -> bool:
    """False for a blank line (not an entry, not in the chain); a blank line longer than
    ``MAX_LINE_BYTES`` is not trusted to be blank and counts as an (erroneous) entry."""
    return raw.total > MAX_LINE_BYTES or not is_blank(raw.data)


def entry_of(log: str, raw: RawLine) -> AuditEntry:
    """The :class:`AuditEntry` of a non-blank line of ``log``."""
    return parse_line(log, raw.lineno, raw.data, raw.total, raw.digest, raw.offset)


def iter_entries(log: str) -> Iterator[AuditEntry]:
    """The entries (non-blank lines) of the log at path ``log``, first to last; nothing when
    it is missing. Raises :class:`core.errors.UnreadableError` as :func:`open_log`."""
    fd = open_log(log)
    if fd is None:
        return
    try:
        for raw in iter_lines(fd):
            if is_entry_line(raw):
                yield entry_of(log, raw)
    except OSError as exc:
        raise UnreadableError(explain(exc), path=log) from exc
    finally:
        os.close(fd)


def read(path: str) -> list[AuditEntry]:
    """All entries of an audit log, oldest first.

    ``path`` (str) is a log file, a lock file (its directory's log) or a directory (its
    ``.lock_audit.log``); see :func:`core.audit.model.resolve_log_path`. A missing log gives
    ``[]``. Blank lines are skipped; line numbers stay physical (1-based). Lines are read in
    64 KiB chunks, never more than ``MAX_LINE_BYTES`` of a line kept, so large logs and huge
    lines are fine; for the last few entries of a big log use :func:`tail`.

    Never raises on content: a line that is not a JSON object becomes an entry with ``error``.
    Raises :class:`core.errors.UnreadableError` when the log itself cannot be read (symlink,
    FIFO, socket, device, directory, permission denied).
    """
    return list(iter_entries(resolve_log_path(path)))


def read_many(paths: Iterable[str]) -> list[AuditEntry]:
    """Entries of several logs (each as :func:`read`), newest first, for the GUI's viewer.

    Entries without a timestamp come last. The same log named twice (a directory and a lock in
    it) is read once. A log that cannot be read gives one entry with ``line`` 0 and ``error``
    saying why instead of an exception; missing logs give nothing. Never raises for I/O.
    """
    seen: set[str] = set()
    out: list[AuditEntry] = []
    for p in paths:
        log = resolve_log_path(p)
        if log in seen:
            continue
        seen.add(log)
        try:
            out.extend(iter_entries(log))
        except UnreadableError as exc:
            out.append(AuditEntry(log_path=log, line=0, raw="", error=exc.reason))
    epoch = _dt.datetime.min.replace(tzinfo=_dt.UTC)
    out.sort(
        key=lambda e: (e.timestamp is not None, e.timestamp or epoch, e.log_path, e.line),
        reverse=True,
    )
    return out


def tail(path: str, n: int) -> list[AuditEntry]:
    """The last ``n`` entries of an audit log, oldest first, read backwards from its end.

    ``path`` as for :func:`read`; ``n`` (int) must be >= 0 (ValueError otherwise). Reads 64 KiB
    blocks from the end until it has ``n`` non-blank lines, so the time and memory it takes
    depend on those lines, not on the log's size (runs of blank lines are skipped a block at
    a time).
    Entries are those :func:`read` gives for the same lines except ``line``, which counts
    from the end: -1 is the last physical line. A line longer than ``MAX_LINE_BYTES`` ends
    the walk: it is returned as an error entry (``digest`` "", ``offset`` -1) and earlier lines
    are not read. A missing log gives ``[]``.

    Raises :class:`core.errors.UnreadableError` as :func:`read`; never raises on content.
    """
    if n < 0:
        raise ValueError(f"tail needs a count >= 0, not {n}")
    log = resolve_log_path(path)
    fd = open_log(log)
    if fd is None or n == 0:
        if fd is not None:
            os.close(fd)
        return []
    try:
        out = list(_backwards(fd, log, n))
    except OSError as exc:
        raise UnreadableError(explain(exc), path=log) from exc
    finally:
        os.close(fd)
    out.reverse()
    return out


def _backwards(fd: int, log: str, n: int) -> Iterator[AuditEntry]:
    """Up to ``n`` entries of the open log, last first (see :func:`tail`)."""
    size = os.fstat(fd).st_size
    pos = size
    if size > 0 and pread(fd, 1, size - 1) == b"\n":
        pos -= 1  # the final LF ends the last line; it starts no new one
    carry = b""  # bytes [pos, end of the current line): the line being assembled
    below = 0  # physical lines already passed, counted from the end
    found = 0
    while pos > 0:
        start = max(0, pos - CHUNK)
        data = pread(fd, pos - start, start) + carry
        pos = start
        if not data.strip(_BLANK_NL):  # a block of blank lines: count them at C speed
            below += data.count(b"\n")
            carry = data[: data.find(b"\n")] if b"\n" in data else data
        else:
            pieces = data.split(b"\n")
            end = pos + len(data)
            for piece in reversed(pieces[1:]):
                below += 1
                end -= len(piece)
                if len(piece) > MAX_LINE_BYTES or not is_blank(piece):
                    yield _entry(log, -below, piece, end)
                    found += 1
                    if found >= n:
                        return
                end -= 1  # the LF before this piece
            carry = pieces[0]
        if pos > 0 and len(carry) > MAX_LINE_BYTES:  # its start is further back: stop here
            yield _overlong(log, -(below + 1), carry)
            return
    if len(carry) > MAX_LINE_BYTES or not is_blank(carry):
        yield _entry(log, -(below + 1), carry, 0)


def _entry(log: str, lineno: int, data: bytes, offset: int) -> AuditEntry:
    """The entry of a whole line ``data`` (bytes without LF) found by the backward reader."""
    digest = hashlib.sha256(data).hexdigest()
    return parse_line(log, lineno, data[: MAX_LINE_BYTES + 1], len(data), digest, offset)


def _overlong(log: str, lineno: int, data: bytes) -> AuditEntry:
    """The error entry for a line longer than ``MAX_LINE_BYTES`` whose start the backward
    reader did not look for; ``data`` is its end."""
    reason = (
        f"line is longer than the {human_size(MAX_LINE_BYTES)} an audit entry can be; "
        "earlier lines are not shown"
    )
    raw = data[-MAX_LINE_BYTES:].decode("utf-8", errors="replace")
    return AuditEntry(log, lineno, raw, "", error=reason, offset=-1)
