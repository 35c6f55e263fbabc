"""Tokens of Redis locks (docs/remote.md, "Redis"): the self-describing tokens Lockwarden
writes (``lockwarden:<host>:<pid>:<uuid1 hex>``), redis-py's uuid1 tokens and the time they
carry, values that are not UTF-8 (kept as their exact bytes through surrogate escapes), and
values longer than :data:`MAX_VALUE_BYTES`, identified by their length and the SHA-1 of their
first bytes. No driver is imported here."""

from __future__ import annotations

import hashlib
import os
import uuid
from datetime import UTC, datetime, timedelta

from core.verdicts import liveness

MAX_VALUE_BYTES = 4096
"""Bytes of a lock's value read (``GETRANGE 0 4095``): a token is short; a longer value is
identified by its length and the SHA-1 of these first bytes (:func:`long_token`), so one
200 MB value costs 4 KiB, not 200 MB (docs/remote.md, "Redis")."""

_UUID_EPOCH = datetime(1582, 10, 15, tzinfo=UTC)
_OURS = "lockwarden:"


def own_token(pid: int | None = None) -> str:
    """A token naming process ``pid`` (default this one) on this host:
    ``lockwarden:<host>:<pid>:<uuid1 hex>`` (the spec's self-describing token; the uuid1
    carries the acquisition time)."""
    return f"{_OURS}{liveness.hostname()}:{pid or os.getpid()}:{uuid.uuid1().hex}"


def parse_own_token(token: str) -> tuple[str, int, datetime] | None:
    """``(host, pid, acquired_at)`` of a token from :func:`own_token`, else None."""
    if not token.startswith(_OURS):
        return None
    parts = token[len(_OURS):].rsplit(":", 2)
    if len(parts) != 3:
        return None
    host, pid, hexid = parts
    when = uuid1_time(hexid)
    if not host or not pid.isdigit() or when is None:
        return None
    return host, int(pid), when


def uuid1_time(token: str) -> datetime | None:
    """The acquisition time in a uuid1 token (redis-py's default ``uuid1().hex``: 32 hex
    digits, version 1, RFC 4122 variant), when it lies between 2000 and a day from now; else
    None."""
    if len(token) != 32:
        return None
    try:
        u = uuid.UUID(hex=token)
    except ValueError:
        return None
    if u.version != 1 or u.variant != uuid.RFC_4122:
        return None
    when = _UUID_EPOCH + timedelta(microseconds=u.time // 10)
    if not datetime(2000, 1, 1, tzinfo=UTC) <= when <= datetime.now(UTC) + timedelta(days=1):
        return None
    return when


def holder_of(token: str) -> str:
    """Who a foreign token names: the uuid1 node (MAC or random node id) when it is one."""
    if uuid1_time(token) is not None:
        return f"uuid1 node {uuid.UUID(hex=token).node:012x}"
    return f"token {shown(token[:40])}"


def text_of(raw: bytes | str) -> str:
    """Bytes from Redis as text; bytes that are not UTF-8 survive as surrogate escapes, so
    :func:`raw_of` gives back the exact key."""
    return raw if isinstance(raw, str) else raw.decode("utf-8", "surrogateescape")


def raw_of(text: str) -> bytes:
    """The exact bytes of a key or token read by :func:`text_of` (the inverse)."""
    return text.encode("utf-8", "surrogateescape")


def is_utf8(text: str) -> bool:
    """True when ``text`` (read by :func:`text_of`) was valid UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown(text: str) -> str:
    """A key or token for people: bytes that are not UTF-8 as ``\\xff`` escapes (the value
    itself keeps them: :func:`raw_of`)."""
    return raw_of(text).decode("utf-8", "backslashreplace")




_LONG = "\x00long:"


def long_token(length: int, head: bytes) -> str:
    """The token of a value longer than :data:`MAX_VALUE_BYTES`: its length and the SHA-1 of
    its first :data:`MAX_VALUE_BYTES` bytes (``"\\0long:<length>:<sha1 hex>"``; a NUL first,
    which no token a library writes starts with). Release compares both on the server."""
    return f"{_LONG}{length}:{hashlib.sha1(head).hexdigest()}"


def parse_long_token(token: str) -> tuple[int, str] | None:
    """``(length, sha1 hex)`` of a :func:`long_token`, else None."""
    if not token.startswith(_LONG):
        return None
    length, _, digest = token[len(_LONG):].partition(":")
    if not length.isdigit() or len(digest) != 40:
        return None
    return int(length), digest


def token_of(length: object, head: object) -> str | None:
    """The token of a value read as ``STRLEN`` + ``GETRANGE 0 MAX-1``: the value itself when
    it was read whole, else :func:`long_token`; None for another type (a missing key reads
    as "" with PTTL -2: the caller skips it)."""
    if not isinstance(length, int) or not isinstance(head, bytes):
        return None  # an error reply: not a string (any more)
    if length > len(head):
        return long_token(length, head)
    return text_of(head)


__all__ = ["MAX_VALUE_BYTES", "holder_of", "is_utf8", "long_token", "own_token",
           "parse_long_token", "parse_own_token", "raw_of", "shown", "text_of", "token_of",
           "uuid1_time"]
