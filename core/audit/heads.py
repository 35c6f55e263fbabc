"""Chain heads: where this user's last entry in each log is, kept in the user's own state.

Part of :mod:`core.audit`. The chain proves the order and integrity of a log's lines, not who
wrote them; the head recorded after each append (the log's path and inode, the byte range and
SHA-256 of the line) lets :func:`core.audit.verify` run by the same user report a log
rewritten, truncated or replaced since. Where and how heads are kept (at most
:data:`MAX_HEADS`; recording and loading never raise): docs/audit.md, "Chain heads written in
batches".
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import json
import os
import sys
from dataclasses import dataclass

from core.audit.model import heads_dir
from core.fsutil import READ_FLAGS

MAX_HEADS = 256
"""Most chain heads kept per user (one per log appended to)."""

_MAX_HEAD_FILE = 16 * 1024
_WRITE_FLAGS = (
    os.O_RDWR
    | os.O_CREAT
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)


@dataclass(frozen=True)
class ChainHead:
    """The last line this user appended to one log.

    ``log``: the log's path (directory resolved, see :func:`head_key`). ``dev``, ``ino``: the
    log file's device and inode when written. ``offset``: byte offset of the line's first byte;
    ``end``: byte offset just past its LF. ``digest``: SHA-256 hex of the line (without LF).
    ``written``: the entry's timestamp (ISO 8601 text), for messages.
    """

    log: str
    dev: int
    ino: int
    offset: int
    end: int
    digest: str
    written: str


def head_key(log: str) -> str:
    """The path a head is filed under: the log's directory with symlinks resolved, plus its
    name (the log itself is never a symlink), so two spellings of one directory share a head."""
    return os.path.join(os.path.realpath(os.path.dirname(log)), os.path.basename(log))


def head_file(log: str) -> str:
    """Path of the file holding the head of ``log`` (inside :func:`heads_dir`)."""
    return _file_for_key(head_key(log))


def _file_for_key(key: str) -> str:
    return os.path.join(heads_dir(), _file_name(key))


@functools.lru_cache(maxsize=256)
def _file_name(key: str) -> str:
    """The head file's name for ``key``: 40 hex digits of its SHA-256, then ``.json``."""
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:40] + ".json"


def record(head: ChainHead) -> bool:
    """Store ``head`` as this user's head of ``head.log`` (a :func:`head_key`); True when
    stored.

    Rewrites the head's file in place (created 0600 in :func:`heads_dir`, itself created
    0700): one ``pwrite`` of the JSON record and its SHA-256, then ``ftruncate`` when the old
    record was longer. No rename and no fsync, so it costs microseconds; a reader that catches
    a half-written record sees a bad checksum and treats it as no head, and after a crash the
    head may be an older one, which still matches the log. Never raises (a head is a second
    line of defence; the entry itself is already written).
    """
    try:
        target = _file_for_key(head.log)
        payload = json.dumps(vars(head), ensure_ascii=True).encode("ascii")
        data = payload + b"\n" + hashlib.sha256(payload).hexdigest().encode("ascii") + b"\n"
        try:
            fd = os.open(target, _WRITE_FLAGS, 0o600)
        except FileNotFoundError:
            os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
            fd = os.open(target, _WRITE_FLAGS, 0o600)
        try:
            size = os.fstat(fd).st_size
            created = size == 0
            _pwrite_all(fd, data)
            if size > len(data):  # a longer record was there: cut its tail off
                os.ftruncate(fd, len(data))
        finally:
            os.close(fd)
        if created:
            _prune(os.path.dirname(target), keep=os.path.basename(target))
        return True
    except Exception:
        return False


def _pwrite_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` at offset 0 of ``fd``. Raises OSError from the OS."""
    done = 0
    while done < len(data):
        if sys.platform != "win32":
            n = os.pwrite(fd, data[done:], done)
        else:  # pragma: no cover - Windows
            os.lseek(fd, done, os.SEEK_SET)
            n = os.write(fd, data[done:])
        if n <= 0:
            raise OSError(errno.EIO, "short write")
        done += n


def load(log: str) -> ChainHead | None:
    """This user's head of the log at path ``log``, or None (none recorded, or unreadable,
    malformed or caught half-written, all treated as none). Never raises."""
    try:
        fd = os.open(head_file(log), READ_FLAGS)
    except Exception:
        return None
    try:
        payload, check = os.read(fd, _MAX_HEAD_FILE).split(b"\n")[:2]
        if hashlib.sha256(payload).hexdigest().encode("ascii") != check:
            return None
        head = ChainHead(**json.loads(payload))
    except Exception:
        return None
    finally:
        os.close(fd)
    ints = (head.dev, head.ino, head.offset, head.end)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in ints):
        return None
    if not isinstance(head.digest, str) or not isinstance(head.written, str):
        return None
    if head.log != head_key(log) or not 0 <= head.offset < head.end:
        return None
    return head


def _prune(folder: str, keep: str) -> None:
    """Remove the least recently written heads beyond :data:`MAX_HEADS`, never the file named
    ``keep`` (the one just written: file times may be too coarse to rank it). Never raises."""
    try:
        names = [n for n in os.listdir(folder) if n.endswith(".json") and n != keep]
        if len(names) < MAX_HEADS:
            return
        aged = []
        for n in names:
            with contextlib.suppress(OSError):
                aged.append((os.stat(os.path.join(folder, n)).st_mtime_ns, n))
        aged.sort()
        for _, n in aged[: len(aged) - MAX_HEADS + 1]:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, n))
    except OSError:
        pass
