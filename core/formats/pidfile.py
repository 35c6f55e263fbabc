"""The ``pidfile`` format: a file holding only a process ID, as daemons write ``/run/*.pid``
and the X server writes ``/tmp/.X0-lock`` (``"%10d\\n"``: right-aligned in 10 columns).

Common practice rather than a spec (docs/DESIGN.md "Formats", last row of the table). Lockwarden
reads these but never acquires in this format.
"""

from __future__ import annotations

import re

from core.errors import ParseError
from core.formats._common import MAX_PID, WHITESPACE, decode_text, raw_text, short
from core.record import LockRecord

FORMAT = "pidfile"

_DIGITS_ONLY_RE = re.compile(r"^[0-9\t\n\x0b\x0c\r ]+\Z")


def looks_like(text: str) -> bool:
    """True when ``text`` holds only ASCII whitespace and decimal digits (and some digit)."""
    return _DIGITS_ONLY_RE.match(text) is not None and any(c.isdigit() for c in text)


def parse(data: bytes, path: str = "") -> LockRecord:
    """Parse a PID file: optional whitespace, one positive decimal PID, optional whitespace
    (so both ``"4242\\n"`` and X11's ``"      4242\\n"`` work).

    ``pid`` is the number; ``acquired_at`` is ``None`` (the file's mtime is the only clue and
    is the caller's to read); ``host`` is ``None`` (this host).

    Raises:
        ParseError: empty, binary, more than one number, not a number, zero or out of range.
    """
    text = decode_text(data)
    words = text.strip(WHITESPACE).split()
    if len(words) != 1:
        raise ParseError(f"a PID file holds one number, this one holds {len(words)} words")
    word = words[0]
    if not word.isascii() or not word.isdigit():
        raise ParseError(f"PID is not a decimal number: {short(word)}")
    if len(word) > 12 or int(word) > MAX_PID:
        raise ParseError(f"PID is out of range: {short(word)}")
    pid = int(word)
    if pid <= 0:
        raise ParseError("PID must be a positive integer, not 0")
    return LockRecord(path=path, format=FORMAT, pid=pid, raw=raw_text(data))


def serialize(record: LockRecord) -> bytes:
    """``"<pid>\\n"``. Lockwarden does not acquire in this format; this exists for tests and
    tools.

    Raises:
        ValueError: no valid PID.
    """
    if record.pid is None or not 0 < record.pid <= MAX_PID:
        raise ValueError(f"a PID file needs a PID in 1..{MAX_PID}, not {record.pid!r}")
    return f"{record.pid}\n".encode("ascii")
