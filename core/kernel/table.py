"""Reading ``/proc/locks`` within a byte bound and a deadline (docs/verdicts.md, "When the
kernel's lock table is too large", which says why a large table is slow to read and blocks the
host's locks).

:func:`read_table` reads in chunks and stops at whichever comes first: the end,
:data:`TABLE_MAX_BYTES` bytes or :data:`TABLE_SECONDS` seconds; :attr:`Table.complete` says
whether it reached the end. A cut-off table proves nothing about the locks it did not reach (the
newest are listed first): callers decide "no kernel lock" only from a complete table or from the
kernel's answer about the file itself (:mod:`core.kernel.lookup`).

Units: bytes are ints, seconds are monotonic floats. Linux only; stdlib only.
"""

from __future__ import annotations

import os
import time
from typing import NamedTuple

PROC_LOCKS = "/proc/locks"
"""The system-wide lock list of Linux (``fs/locks.c``, ``locks_show``)."""

TABLE_MAX_BYTES = 16 * 1024 * 1024
"""Most bytes of ``/proc/locks`` :func:`read_table` reads by default (16 MiB: about 290,000
lines at 58 bytes a line). Module-level so that a test can lower it."""

TABLE_SECONDS = 0.3
"""Most seconds (monotonic) :func:`read_table` spends reading by default. A table of 10,000
locks reads in about 12 ms (docs/specs/devtool-locks.md §2.6, "Cost of polling"); within 0.5 s,
4-5 MiB (about 80,000 lines) of a 200,000-line table were read on the development VM. 0.3 s
leaves a ``status`` of a kernel-decided file under 1 s with the interpreter's start-up and a
walk of the open descriptors (docs/performance.md, "/proc/locks at scale"). Module-level so that
a test can lower it."""

CHUNK = 64 * 1024
"""Bytes asked for per ``read`` (the kernel returns at most one page of ``seq_file`` text)."""


class Table(NamedTuple):
    """What one bounded read of ``/proc/locks`` got.

    Attributes:
        text: the lines read (ASCII; bytes that are not ASCII replaced). When the read was cut
            off, the last, partial line is left out.
        complete: True when the table was read to its end: then ``text`` lists the locks the
            kernel held while it was read.
        bytes_read: bytes read (including a partial last line that ``text`` leaves out).
        seconds: how long the read took (monotonic s).
        cut: ``None`` (complete), ``"bytes"`` (the byte bound was reached) or ``"time"`` (the
            deadline passed first).
    """

    text: str
    complete: bool
    bytes_read: int
    seconds: float
    cut: str | None = None


def read_table(path: str = PROC_LOCKS, *, max_bytes: int | None = None,
               seconds: float | None = None) -> Table:
    """Read ``/proc/locks`` (or ``path``) until its end, ``max_bytes`` bytes or ``seconds``
    seconds, whichever comes first (see the module docstring).

    Args:
        path: the file to read (``/proc/locks``; tests pass another proc mount's).
        max_bytes: the byte bound; default :data:`TABLE_MAX_BYTES` (read at call time).
        seconds: the deadline (monotonic s from the start of the call); default
            :data:`TABLE_SECONDS` (read at call time). The deadline is checked after each
            ``read``; when it has passed, one more ``read`` tells whether the end was reached
            (so a stall of the reader does not cut a table that was read whole).

    Raises:
        OSError: the file cannot be opened or read (no ``/proc``: not Linux, a restricted
            container view).
    """
    limit = TABLE_MAX_BYTES if max_bytes is None else max(0, max_bytes)
    budget = TABLE_SECONDS if seconds is None else seconds
    t0 = time.monotonic()
    parts: list[bytes] = []
    got = 0
    cut: str | None = None
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        while True:
            data = os.read(fd, max(1, min(CHUNK, limit + 1 - got)))
            if not data:
                break
            parts.append(data)
            got += len(data)
            if got > limit:
                cut = "bytes"
                break
            if time.monotonic() - t0 > budget:
                if os.read(fd, 1):  # more to come: cut here (the byte is dropped with its line)
                    got += 1
                    cut = "time"
                break
    finally:
        os.close(fd)
    raw = b"".join(parts)
    if cut is not None:
        raw = raw[: raw.rfind(b"\n") + 1]
    return Table(raw.decode("ascii", errors="replace"), cut is None, got,
                 time.monotonic() - t0, cut)


def lines_by_file(text: str) -> dict[str, list[str]]:
    """The lines of a ``/proc/locks`` text by their ``MAJ:MIN:INODE`` token (waiters' ``->``
    lines too), in order: built once for a batch of verdicts, so that each file's lookup costs
    its own lines, not a scan of the whole table (``core.kernel.lookup.look_up``'s ``index``).
    Lines too short to carry a token are left out. Pure; never raises."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        parts = line.split(None, 7)
        if len(parts) < 6:
            continue
        token = parts[6] if parts[1] == "->" and len(parts) > 6 else parts[5]
        out.setdefault(token, []).append(line)
    return out
