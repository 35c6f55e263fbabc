"""The engine's temp files: their names and when a leftover may go (docs/engine.md, "Crashes and
leftovers").

A temp file is ``.<lock>.<pid>.<token>.lw<kind>`` beside its lock: the writer's PID, 32 random
lowercase hex digits, and a ``.lw`` suffix no lock-file pattern in use matches. The engine
refuses a lock path of that shape (:func:`core.fsutil.refuse_engine_name`), so a temp name and
a lock name never collide; ``lockwarden clean`` removes one only when
:func:`leftover_removable` says so.
"""

from __future__ import annotations

import os
import re
import stat
import sys
import time
from typing import NamedTuple

from core.defaults import DEFAULT_STALE_AFTER, DEFAULT_WRITING_GRACE

TEMP_KINDS: tuple[str, ...] = ("tmp", "swap", "rel")
"""What an engine temp file holds: ``tmp`` a lock being published (or, after a crash in a
reclaim or refresh, the lock being replaced), ``swap`` a judged lock moved out during a reclaim
without an exchange primitive, ``rel`` a lock being released."""

TEMP_SUFFIX = ".lw"
"""Temp names end in ``.lw<kind>`` (``.lwtmp``, ``.lwswap``, ``.lwrel``): no lock-file
pattern in use (``*.lock``, ``*.pid``, ``*-lock``, ``LCK..*``, ``.~lock.*#``...) matches it."""

_TEMP_RE = re.compile(
    r"^\.(?P<name>.+)\.(?P<pid>[1-9][0-9]{0,9})\.(?P<token>[0-9a-f]{32})"
    r"\.lw(?P<kind>tmp|swap|rel)\Z",
    re.DOTALL,
)
_MAX_PID = 2**31 - 1  # pid_t: os.kill refuses more


class TempName(NamedTuple):
    """The parts of an engine temp file name ``.<lock>.<pid>.<32 hex>.lw<kind>``.

    Attributes:
        lock_name: base name of the lock it belongs to. ``pid``: the process that wrote it.
        token: its 32 random lowercase hex digits. ``kind``: one of :data:`TEMP_KINDS`.
    """

    lock_name: str
    pid: int
    token: str
    kind: str


def temp_path(
    lock_path: str, token: str | None = None, kind: str = "tmp", *, pid: int | None = None
) -> str:
    """Path of an engine temp file for ``lock_path``: ``<dir>/.<name>.<pid>.<token>.lw<kind>``.

    Args:
        lock_path: the lock it is for.
        token: 32 lowercase hex digits; default: 128 fresh random bits (``os.urandom``), so
            nobody can occupy the name in advance.
        kind: one of :data:`TEMP_KINDS`.
        pid: the writing process (default: this one); ``lockwarden clean`` removes a leftover
            only once its writer is gone (:func:`leftover_removable`).

    The shape (leading dot, PID, fixed-length hex, ``.lw<kind>`` suffix) is checked in full by
    :func:`parse_temp`, and :func:`validate_lock_path` refuses lock names of that shape, so a
    temp name and a lock name never collide (docs/engine.md, "Crashes and leftovers").

    Raises:
        ValueError: a ``token`` that is not 32 lowercase hex digits, or an unknown ``kind``.
    """
    if token is None:
        token = os.urandom(16).hex()
    elif len(token) != 32 or token.strip("0123456789abcdef"):
        raise ValueError(f"a temp token is 32 lowercase hex digits, not {token!r}")
    if kind not in TEMP_KINDS:
        raise ValueError(f"unknown temp kind {kind!r} (one of {TEMP_KINDS})")
    head, name = os.path.split(lock_path)
    pid = os.getpid() if pid is None else pid
    return os.path.join(head, f".{name}.{pid}.{token}{TEMP_SUFFIX}{kind}")


def parse_temp(name: str) -> TempName | None:
    """The parts of ``name`` (a base name) when it has the full shape of an engine temp file
    (:func:`temp_path`: leading dot, lock name, PID 1..2**31-1 without leading zero, exactly 32
    lowercase hex digits, ``.lwtmp``/``.lwswap``/``.lwrel``), else ``None``."""
    m = _TEMP_RE.match(name)
    if not m:
        return None
    pid = int(m.group("pid"))
    if pid > _MAX_PID:
        return None
    return TempName(m.group("name"), pid, m.group("token"), m.group("kind"))


def parse_temp_name(name: str) -> tuple[str, str, str] | None:
    """``(lock_name, token, kind)`` when ``name`` (a base name) is one of our temp files
    (:func:`parse_temp`), else ``None``. Used by the scanner (temp files are not locks) and
    ``lockwarden clean``."""
    parsed = parse_temp(name)
    if parsed is None:
        return None
    return parsed.lock_name, parsed.token, parsed.kind


def _process_gone(pid: int) -> bool:
    """True when no process ``pid`` exists on this host (``kill(pid, 0)`` says ``ESRCH``)."""
    if sys.platform == "win32":  # pragma: no cover - os.kill terminates there
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def leftover_removable(
    path: str,
    *,
    min_age: float = DEFAULT_WRITING_GRACE,
    now: float | None = None,
) -> bool:
    """True when ``path`` is a temp file the engine left behind and ``lockwarden clean`` may
    delete it (docs/engine.md, "Crashes and leftovers").

    All of: the base name has the full temp shape (:func:`parse_temp`); it is a regular file
    (``lstat``: never a symlink); it has a single link (a temp still linked as the lock itself
    is a held lock's file) and is not the inode of the lock it names; it is older (mtime) than
    ``min_age`` seconds and never younger than the writing grace
    (:data:`core.defaults.DEFAULT_WRITING_GRACE`, 2 s: a live acquisition publishes and
    unlinks its temp within milliseconds); and its writer -- the PID in its name -- is gone
    on this host, or the file is older than :data:`core.defaults.DEFAULT_STALE_AFTER` (the PID
    may have been reused). ``now``: Unix seconds (default: the current time). Never raises.
    """
    head, name = os.path.split(path)
    parsed = parse_temp(name)
    if parsed is None:
        return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
        return False
    age = (time.time() if now is None else now) - st.st_mtime
    if age < max(min_age, DEFAULT_WRITING_GRACE):
        return False
    try:
        lst = os.lstat(os.path.join(head, parsed.lock_name))
        if (lst.st_ino, lst.st_dev) == (st.st_ino, st.st_dev):
            return False
    except OSError:
        pass
    return _process_gone(parsed.pid) or age > DEFAULT_STALE_AFTER
