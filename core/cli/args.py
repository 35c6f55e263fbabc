"""Argument types of the ``lockwarden`` command line: every number and path is validated here,
at the boundary, so a bad value is a usage error (exit 2, one line, no traceback) and never
reaches the engine.

The bounds (seconds unless said otherwise; floats allowed): :data:`TIMEOUT`, :data:`TTL`,
:data:`STALE_AFTER`, :data:`MIN_AGE`, :data:`MAX_PID`, a ``--tag`` of at most
:data:`core.defaults.MAX_TAG_BYTES` bytes of UTF-8 (:func:`tag`): docs/cli.md, "Verbs" (the
table of accepted numbers) and "Exit codes".

Imports only the standard library (the parser is built on every start-up).
"""

from __future__ import annotations

import argparse
import math

from core.defaults import MAX_TAG_BYTES

ONE_YEAR = 365 * 24 * 3600.0
"""Seconds in a (365-day) year: 31 536 000."""

MAX_PID = 2**31 - 1
"""The largest process ID: ``pid_t`` is a signed 32-bit integer (``os.kill`` refuses more)."""


class Seconds:
    """An argparse type: a finite number of seconds between ``low`` and ``high`` (inclusive;
    ``low`` excluded when ``low_open``). Calling it parses one argument.

    Raises (when called):
        argparse.ArgumentTypeError: not a number, not finite, or out of bounds; argparse
            turns it into a usage error naming the option.
    """

    __slots__ = ("high", "low", "low_open")

    def __init__(self, low: float, high: float, *, low_open: bool = False) -> None:
        self.low = low
        self.high = high
        self.low_open = low_open

    def __repr__(self) -> str:
        return f"Seconds({self.low:g}, {self.high:g}, low_open={self.low_open})"

    def __call__(self, text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"not a finite number of seconds: {text!r}")
        if value < 0:
            raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
        if self.low_open and value <= self.low:
            raise argparse.ArgumentTypeError(
                f"must be more than {self.low:g} seconds: {text!r}")
        if value < self.low:
            raise argparse.ArgumentTypeError(
                f"must be at least {self.low:g} second{'s' if self.low != 1 else ''}: {text!r}")
        if value > self.high:
            raise argparse.ArgumentTypeError(
                f"must be at most {self.high:.0f} seconds ({_span(self.high)}): {text!r}")
        return value


def _span(seconds: float) -> str:
    if seconds < ONE_YEAR:
        hours = seconds / 3600
        return f"{hours:g} hour{'s' if hours != 1 else ''}"
    years = seconds / ONE_YEAR
    return f"{years:g} year{'s' if years != 1 else ''}"


TIMEOUT = Seconds(0.0, ONE_YEAR)
"""``--timeout S``: 0 (do not wait) to one year."""
TTL = Seconds(1.0, ONE_YEAR)
"""``--ttl S``: a lease of one second to one year."""
STALE_AFTER = Seconds(0.0, 10 * ONE_YEAR, low_open=True)
"""``--stale-after S``: more than 0, at most ten years."""
MIN_AGE = Seconds(0.0, 10 * ONE_YEAR)
"""``clean --min-age S``: 0 to ten years."""
DEADLINE = Seconds(0.0, 3600.0, low_open=True)
"""``--deadline S`` of a server URL: more than 0, at most one hour (docs/remote.md,
"Deadline")."""


def tag(text: str) -> str:
    """An argparse type for ``--tag``: the text itself when it is at most
    :data:`core.defaults.MAX_TAG_BYTES` bytes of UTF-8 (the engine refuses longer tags:
    :func:`core.formats.writing.check_tag`).

    Raises:
        argparse.ArgumentTypeError: a longer tag (nothing is written).
    """
    size = len(text.encode("utf-8", "surrogateescape"))
    if size > MAX_TAG_BYTES:
        raise argparse.ArgumentTypeError(
            f"is {size} bytes of UTF-8; a tag is at most {MAX_TAG_BYTES} bytes")
    return text


def pid(text: str) -> int:
    """argparse type: a process ID, an integer from 1 to :data:`MAX_PID`.

    Raises:
        argparse.ArgumentTypeError: not a whole number, or out of bounds.
    """
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a process ID: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"a process ID is > 0: {text!r}")
    if value > MAX_PID:
        raise argparse.ArgumentTypeError(f"a process ID is at most {MAX_PID}: {text!r}")
    return value


def count(text: str) -> int:
    """argparse type: a count >= 0 (``--tail N``).

    Raises:
        argparse.ArgumentTypeError: not a whole number, or negative.
    """
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return value


def path(text: str) -> str:
    """argparse type: a non-empty path without NUL bytes (no system call accepts one).

    Raises:
        argparse.ArgumentTypeError: empty, or contains a NUL byte.
    """
    if not text:
        raise argparse.ArgumentTypeError("empty path")
    if "\x00" in text:
        raise argparse.ArgumentTypeError(f"path contains a NUL byte: {text!r}")
    return text
