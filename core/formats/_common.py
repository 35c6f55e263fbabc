"""Helpers shared by the lock formats: strict text decoding, control-character sanitising,
RFC 3339 / ISO 8601 time parsing, guarded JSON decoding and number checks.

Every helper that looks at untrusted bytes raises only :class:`core.errors.ParseError` with a
reason written for people; callers never see ``UnicodeDecodeError``, ``RecursionError``,
``OverflowError`` or friends.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from core.errors import ParseError
from core.text import FORMAT_CHARACTERS

MAX_PARSE_BYTES = 1024 * 1024
"""Largest input :func:`core.formats.parse` looks at (1 MiB). Lock files are read with a 64 KiB
limit (``core.fsutil``); this bound only keeps a parser call cheap whatever a caller passes."""

MAX_PID = 2**32 - 1
"""Largest PID we accept (PIDs are 32-bit on every OS we run on; Windows uses a DWORD)."""

WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
"""Characters trimmed around sema keys and values: Unicode ``White_Space``, as Rust's
``str::trim`` (sema) and JavaScript's ``String.prototype.trim`` (semats) strip them. Python's
``str.strip()`` would also strip U+001C..U+001F, which the reference tools keep."""

_CONTROL_RE = re.compile("[\x00-\x1f\x7f\x80-\x9f]")
_SURROGATE_RE = re.compile("[\ud800-\udfff]")

_TOKEN_RE = re.compile(r"^[0-9a-f]{32}\Z")

_RFC3339_RE = re.compile(
    r"^(?P<date>[0-9]{4}-[0-9]{2}-[0-9]{2})[Tt ]"
    r"(?P<h>[0-9]{2}):(?P<mi>[0-9]{2}):(?P<s>[0-9]{2})"
    r"(?:[.,](?P<frac>[0-9]{1,32}))?"
    r"(?P<tz>[Zz]|[+-][0-9]{2}:?[0-9]{2})?\Z"
)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def sanitize(text: str) -> str:
    """Replace control characters by spaces.

    Rule: ``docs/specs/semats.txt``, "Tag Sanitization": all control characters
    (0x00-0x1F, 0x7F) become spaces, so a value can never inject a line (a fake ``key=value``),
    a terminal escape sequence or a NUL. We also replace the C1 controls U+0080..U+009F (U+009B
    is a one-character CSI in some terminals), because tags are shown in terminals and the GUI.
    Lone surrogates (which UTF-8 cannot encode) become U+FFFD.
    """
    text = _CONTROL_RE.sub(" ", text)
    if _SURROGATE_RE.search(text):  # not encodable as UTF-8: U+FFFD, as a decoder would show
        text = _SURROGATE_RE.sub("\ufffd", text)
    return text


def clean_value(text: str) -> str:
    """:func:`sanitize` then trim :data:`WHITESPACE`: the exact text a sema reader gets back
    from a ``key=value`` line we write (docs/specs/semats.txt "Parsing Rules" 3: trim
    key and value)."""
    return sanitize(text).strip(WHITESPACE)


def clean_tag(text: str) -> str:
    """A tag as Lockwarden writes it: :func:`clean_value`, with every Unicode format character
    (category ``Cf``, :data:`core.text.FORMAT_CHARACTERS`: the bidirectional overrides such as
    U+202E, zero width spaces and joiners, the byte-order mark) also replaced by a space, as
    control characters are
    (docs/specs/semats.txt, "Tag Sanitization", extended: a tag is shown in terminals and the
    GUI, where a bidi override reorders what the reader sees). Tags of other tools' files are
    read as they are (:func:`clean_value`) and escaped where they are shown
    (:func:`core.text.printable`)."""
    return FORMAT_CHARACTERS.sub(" ", sanitize(text)).strip(WHITESPACE)


def is_token(value: object) -> bool:
    """True when ``value`` is a Lockwarden acquisition token: 32 lowercase hex digits
    (128 random bits, docs/DESIGN.md "Formats")."""
    return isinstance(value, str) and _TOKEN_RE.match(value) is not None


_PROC_RE = re.compile(r"^[0-9A-Za-z._-]{1,64}:[0-9]{1,20}$")


def is_proc_id(value: object) -> bool:
    """True when ``value`` looks like a process identity written by Lockwarden
    (``"<boot id>:<start ticks>"``, see :func:`core.verdicts.liveness.process_identity`)."""
    return isinstance(value, str) and _PROC_RE.match(value) is not None


def short(value: object, limit: int = 40) -> str:
    """``repr`` of a value cut to ``limit`` characters, for reasons shown to people."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def as_bytes(data: object) -> bytes:
    """Accept ``bytes``, ``bytearray`` or ``memoryview``; anything else is a ParseError."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise ParseError(f"expected the bytes of a file, got {type(data).__name__}")


def raw_text(data: bytes) -> str:
    """The file's text for display: UTF-8 with undecodable bytes replaced (``LockRecord.raw``)."""
    return data.decode("utf-8", errors="replace")


def decode_text(data: bytes) -> str:
    """Decode a lock file as UTF-8 text (all specs: "File encoding: UTF-8").

    A leading UTF-8 byte-order mark is dropped (Windows editors add one).

    The text of the last bytes object decoded is remembered (detection then the format's
    parser decode the same bytes: one decoding).

    Raises:
        ParseError: the file is empty, only whitespace, holds a NUL byte or is not valid UTF-8
            (docs/specs/semats.txt "Error Cases": "File is empty or contains only
            whitespace", "File contains binary garbage").
    """
    global _LAST_DECODED
    last = _LAST_DECODED  # one tuple, replaced whole: safe across threads
    if last[0] is data:
        return last[1]
    text = _decode_text(data)
    _LAST_DECODED = (data, text)
    return text


_LAST_DECODED: tuple[bytes | None, str] = (None, "")
"""The last bytes :func:`decode_text` decoded, and their text (held: its id is not reused)."""


def _decode_text(data: bytes) -> str:
    if len(data) > MAX_PARSE_BYTES:
        raise ParseError(f"is {len(data)} bytes, far too large for a lock file")
    if not data:
        raise ParseError("the file is empty")
    nul = data.find(b"\x00")
    if nul >= 0:
        raise ParseError(f"holds binary data, not text (NUL byte at offset {nul})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 1].hex()
        raise ParseError(
            f"holds binary data, not UTF-8 text (byte 0x{bad} at offset {exc.start})"
        ) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip(WHITESPACE):
        raise ParseError("the file holds only whitespace")
    return text


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def load_json_object(text: str, what: str = "lock") -> dict[str, Any]:
    """Decode ``text`` as one JSON object.

    ``NaN``/``Infinity`` (not JSON) are refused, as are integers longer than Python's digit
    limit and nesting deep enough to exhaust the stack (``RecursionError`` is caught).

    Raises:
        ParseError: not JSON, or JSON but not an object.
    """
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ParseError(
            f"{what} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None
    except RecursionError:
        raise ParseError(f"{what} JSON is nested too deeply") from None
    except (ValueError, TypeError, OverflowError) as exc:
        raise ParseError(f"{what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ParseError(f"{what} JSON is {a_type(value)}, not an object")
    return value


def json_type(value: object) -> str:
    """JSON name of a decoded value's type (``"string"``, ``"number"``, ``"array"``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def a_type(value: object) -> str:
    """JSON type of a value with its article: ``"an array"``, ``"a string"``, ``"null"``."""
    name = json_type(value)
    if name == "null":
        return name
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"


def as_finite(value: object) -> float | None:
    """A JSON number as a finite ``float``, or ``None`` (``bool``, ``NaN``, infinities,
    integers too large for a float, anything that is not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def require_str(obj: dict[str, Any], key: str, what: str) -> str:
    """``obj[key]`` as a string; ParseError naming ``what`` and the key otherwise."""
    if key not in obj:
        raise ParseError(f"{what} has no {key!r} field")
    value = obj[key]
    if not isinstance(value, str):
        raise ParseError(f"{what} field {key!r} is {a_type(value)}, not a string")
    return value


def parse_time(value: str, field: str) -> datetime:
    """Parse an RFC 3339 / ISO 8601 date-time into an aware UTC ``datetime``.

    Accepts ``YYYY-MM-DDTHH:MM:SS[.fraction][Z|±HH:MM]`` (``t``/space separator, ``z``,
    ``±HHMM`` too). Go's ``time.RFC3339Nano`` writes up to 9 fractional digits
    (docs/specs/af.txt §2 "Lock File Format"); Python keeps microseconds, so extra
    digits are truncated, never rounded (a claim never looks longer than it is). A time without an
    offset is taken as UTC (JavaScript's ``toISOString`` and Go's RFC 3339 always write one).

    Raises:
        ParseError: not such a time, or not a valid date, or outside years 1..9999.
    """
    m = _RFC3339_RE.match(value)
    if m is None:
        raise ParseError(f"{field} is not an RFC 3339 time: {short(value)}")
    frac = (m.group("frac") or "")[:6].ljust(6, "0")
    tz = m.group("tz")
    try:
        base = datetime.fromisoformat(
            f"{m.group('date')}T{m.group('h')}:{m.group('mi')}:{m.group('s')}"
        )
        offset = timedelta(0)
        if tz and tz not in ("Z", "z"):
            digits = tz[1:].replace(":", "")
            offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
            if tz[0] == "-":
                offset = -offset
        result = base.replace(microsecond=int(frac), tzinfo=timezone(offset))
        return result.astimezone(UTC)
    except (ValueError, OverflowError) as exc:
        raise ParseError(f"{field} is not a valid time: {short(value)} ({exc})") from None


def format_time(dt: datetime, *, digits: int = 6) -> str:
    """RFC 3339 UTC text of ``dt`` ending in ``Z``, with ``digits`` fractional digits
    (0, 3 or 6; with 6 the fraction is left out when it is zero, as Go's RFC3339Nano does).
    A naive ``dt`` is taken as UTC."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    dt = dt.astimezone(UTC)
    base = dt.strftime("%Y-%m-%dT%H:%M:%S")
    if len(base) != 19:  # years below 1000: strftime does not pad everywhere
        base = f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt:%H:%M:%S}"
    if digits == 3:
        return f"{base}.{dt.microsecond // 1000:03d}Z"
    if digits == 6 and dt.microsecond:
        return f"{base}.{dt.microsecond:06d}".rstrip("0") + "Z"
    return base + "Z"


def from_unix(seconds: float, field: str) -> datetime:
    """Aware UTC datetime of Unix seconds; ParseError when outside years 1..9999 or not
    finite. Whole seconds seen lately give the same (immutable) object: a directory of locks
    taken in the same second shares one (docs/performance.md, "Listing and watching 100,000
    locks")."""
    if type(seconds) is int:
        shared = _SECONDS.get(seconds)
        if shared is not None:
            return shared
    try:
        if not math.isfinite(seconds):
            raise ValueError("not finite")
        dt = EPOCH + timedelta(seconds=seconds)
    except (ValueError, OverflowError):
        raise ParseError(f"{field} is out of range: {short(seconds)}") from None
    if type(seconds) is int:
        if len(_SECONDS) >= 4096:
            _SECONDS.clear()
        _SECONDS[seconds] = dt
    return dt


_SECONDS: dict[int, datetime] = {}
"""The datetimes :func:`from_unix` gave for whole seconds lately (at most 4,096)."""


def add_seconds(dt: datetime, seconds: float) -> datetime | None:
    """``dt + seconds``, or ``None`` when that leaves the ``datetime`` range (or the value is
    not finite)."""
    try:
        if not math.isfinite(seconds):
            return None
        return dt + timedelta(seconds=seconds)
    except (ValueError, OverflowError):
        return None


def as_utc(dt: datetime) -> datetime:
    """``dt`` as aware UTC; a naive ``dt`` is taken as UTC already."""
    if dt.tzinfo is None:
        return dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def valid_pid(value: object) -> int | None:
    """``value`` as a PID (1..2**32-1) when it is an integral JSON number, else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and 0 < value <= MAX_PID:
        return value
    return None


def number_text(value: float) -> str:
    """Short exact text of a float: ``3600.0`` -> ``"3600"``, ``0.5`` -> ``"0.5"``."""
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)
