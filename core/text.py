"""Text safe to show a person: escaping what could move a terminal's cursor or reorder a line
(:func:`printable`, :func:`printable_lines`), durations and counts in words
(:func:`human_duration`, :func:`plural`). Used by the one renderer of reasons
(:mod:`core.reasons`, which re-exports these names) and by every human output of the CLI and the
GUI (docs/cli.md, "Control characters").

Imports only the standard library, so every module of ``core`` may use it.
"""

from __future__ import annotations

import math
import re

FORMAT_CHARACTERS = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f]")
"""The Unicode *format* characters (general category ``Cf``, Unicode 15): the bidirectional
controls (U+202A..U+202E, U+2066..U+2069, U+200E, U+200F, U+061C), zero width spaces and
joiners (U+200B..U+200D, U+2060), the byte-order mark U+FEFF, the soft hyphen U+00AD, tag
characters (U+E0001, U+E0020..U+E007F) and the rest of the category. They can reorder or hide
what a reader sees. Written out rather than asked of :mod:`unicodedata` per character, which
costs ~0.4 µs a character; ``tests/core/formats/test_format_chars.py`` checks it against the running
Python's Unicode tables."""

_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]|" + FORMAT_CHARACTERS.pattern)
"""Characters no human output may show as they are: C0 and C1 controls and DEL (line breaks,
terminal escapes, bells), the Unicode line/paragraph separators, lone surrogates (an
undecodable byte of a file name, ``os.fsdecode``'s ``surrogateescape``: printing one raises
``UnicodeEncodeError`` under a strict UTF-8 stdout), and every format character
(:data:`FORMAT_CHARACTERS`: the bidirectional overrides, zero width characters...)."""

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_char(c: str) -> str:
    named = _NAMED.get(c)
    if named is not None:
        return named
    o = ord(c)
    if o < 0x100:
        return f"\\x{o:02x}"
    if 0xDC80 <= o <= 0xDCFF:  # surrogateescape: the undecodable byte itself
        return f"\\x{o - 0xDC00:02x}"
    if o > 0xFFFF:
        return f"\\U{o:08x}"
    return f"\\u{o:04x}"


def _escape(m: re.Match[str]) -> str:
    return _escape_char(m.group())


def printable(text: str) -> str:
    """``text`` safe to show a person, on one line: every character of :data:`_UNSAFE` (controls,
    separators, lone surrogates, every Unicode format character) is escaped -- ``\\n``, ``\\r``,
    ``\\t``, ``\\xNN`` (other controls, and the raw byte of an undecodable file name),
    ``\\uNNNN`` / ``\\UNNNNNNNN`` (separators, bidi overrides, zero width characters).
    Everything else, backslashes included, is kept, so escaping twice changes nothing more. Used
    by every human output: CLI lines, table cells, the detail pane, tray menus and notifications
    (docs/cli.md, "Control characters")."""
    if _UNSAFE.search(text) is None:
        return text
    return _UNSAFE.sub(_escape, text)


def printable_lines(text: str, *, tabs: bool = False) -> str:
    """Text of several lines safe to show a person: each line as :func:`printable` makes it,
    the line breaks kept (``\\n``, and ``\\r\\n`` as one break), tab characters kept when
    ``tabs`` is True (the raw-file pane). For multi-line messages, notifications and file
    contents, where a line break is the sender's and not the data's: the data (a path, a tag)
    is still escaped by :func:`printable` before it is put in the text."""
    out: list[str] = []
    for line in text.split("\n"):
        if line.endswith("\r"):
            line = line[:-1]
        if tabs:
            out.append("\t".join(printable(part) for part in line.split("\t")))
        else:
            out.append(printable(line))
    return "\n".join(out)


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """``n`` and the noun in the right number: "1 entry" needs ``nouns="entries"``,
    "3 locks", "1 session" (``nouns``: the plural when it is not ``noun + "s"``)."""
    return f"{n} {noun if n == 1 else (nouns or noun + 's')}"


def human_duration(seconds: float) -> str:
    """A duration in seconds as short text: ``0.4s``, ``45s``, ``3m 12s``, ``2h 0m``,
    ``3d 4h``. Negative durations get a leading ``-``; non-finite ones are ``"forever"``."""
    if math.isnan(seconds) or math.isinf(seconds):
        return "forever"
    if seconds < 0:
        return "-" + human_duration(-seconds)
    if seconds < 10:
        text = f"{seconds:.1f}".rstrip("0").rstrip(".")
        return f"{text}s"
    total = int(seconds)
    if total < 60:
        return f"{total}s"
    if total < 3600:
        return f"{total // 60}m {total % 60}s"
    if total < 86400:
        return f"{total // 3600}h {total % 3600 // 60}m"
    return f"{total // 86400}d {total % 86400 // 3600}h"


DURATION_UNITS: dict[str, float] = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0,
                                    "w": 7 * 86400.0}
"""Units of :func:`parse_duration`, in seconds."""

MAX_DURATION_S = 100 * 365 * 86400.0
"""Longest duration :func:`parse_duration` accepts (100 years, in seconds)."""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$", re.IGNORECASE)


def parse_duration(text: str | float) -> float:
    """Seconds of a duration written ``"30d"``, ``"12h"``, ``"90m"``, ``"45s"``, ``"2w"``, or a
    number of seconds (``3600`` or ``"3600"``): ``[history] keep`` and ``--since``
    (docs/history.md, "Settings").

    Raises:
        ValueError: not a duration of more than 0 and at most 100 years.
    """
    if isinstance(text, bool):
        raise ValueError(f"not a span of time: {text!r}")
    if isinstance(text, int | float):
        seconds = float(text)
    else:
        m = _DURATION.match(text)
        if not m:
            raise ValueError(f"not a span of time (e.g. 30d, 12h, 90m): {text!r}")
        seconds = float(m.group(1)) * DURATION_UNITS[(m.group(2) or "s").lower()]
    if not math.isfinite(seconds) or seconds <= 0 or seconds > MAX_DURATION_S:
        raise ValueError(f"a span must be more than 0 and at most 100 years: {text!r}")
    return seconds


def same_host_name(a: str, b: str) -> bool:
    """True when host names ``a`` and ``b`` name the same host: case-insensitive, a trailing
    dot ignored; a short name matches a fully qualified one by its first label
    (``devbox`` == ``devbox.example.org``); two fully qualified names must be equal; an empty
    name matches nothing (docs/verdicts.md, "Liveness of a holder")."""
    x = a.strip().rstrip(".").lower()
    y = b.strip().rstrip(".").lower()
    if not x or not y:
        return False
    if x == y:
        return True
    if "." in x and "." in y:
        return False
    return x.split(".", 1)[0] == y.split(".", 1)[0]
