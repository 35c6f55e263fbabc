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

_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
"""Characters no human output may show as they are: C0 and C1 controls and DEL (line breaks,
terminal escapes, bells), the Unicode line/paragraph separators, the bidirectional overrides
(they reorder what a terminal or a label shows), and lone surrogates (an undecodable byte of a
file name, ``os.fsdecode``'s ``surrogateescape``: printing one raises ``UnicodeEncodeError``
under a strict UTF-8 stdout). Every other Unicode *format* character (category ``Cf``: zero
width spaces and joiners, the byte-order mark, the soft hyphen, tag characters) is escaped too:
:func:`printable` asks :mod:`unicodedata` for the non-ASCII characters of a text."""

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


def is_unsafe(c: str) -> bool:
    """True for one character that :func:`printable` escapes: a character of :data:`_UNSAFE`
    or any other Unicode format character (category ``Cf``)."""
    if _UNSAFE.match(c) is not None:
        return True
    if c < "\x80":
        return False
    import unicodedata

    return unicodedata.category(c) == "Cf"


def printable(text: str) -> str:
    """``text`` safe to show a person, on one line: every character of :data:`_UNSAFE` and
    every other Unicode format character (category ``Cf``) is escaped -- ``\\n``, ``\\r``,
    ``\\t``, ``\\xNN`` (other controls, and the raw byte of an undecodable file name),
    ``\\uNNNN`` / ``\\UNNNNNNNN`` (separators, bidi overrides, zero width characters).
    Everything else, backslashes included, is kept, so escaping twice changes nothing more. Used
    by every human output: CLI lines, table cells, the detail pane, tray menus and notifications
    (docs/cli.md, "Control characters")."""
    if text.isascii():
        if _UNSAFE.search(text) is None:
            return text
        return _UNSAFE.sub(_escape, text)
    return "".join(_escape_char(c) if is_unsafe(c) else c for c in text)


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
