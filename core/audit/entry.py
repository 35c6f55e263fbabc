"""Building the JSON lines Lockwarden appends: fields, JSON-safe ``details``, encoding.

Part of :mod:`core.audit`. Lines are compact JSON (``separators=(",", ":")``) with
``ensure_ascii=False``, like ``JSON.stringify``, in UTF-8. JSON escapes every control
character, so a line never holds a raw newline whatever ``details`` contains. (A string with a
lone surrogate cannot be UTF-8: that line is written with ``ensure_ascii=True``, still JSON.)
"""

from __future__ import annotations

import datetime as _dt
import getpass
import json
import math
import os
import socket
import sys
import time
from typing import Any

from core.audit.model import MAX_OWN_LINE_BYTES, get_via

_user_cache: str | None = None
_host_cache: tuple[int, str] | None = None  # (pid, host name): read once per process
_second: tuple[int, str] = (-1, "")  # (a UTC second, its "YYYY-MM-DDTHH:MM:SS." text)
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_PLAIN = (str, int, bool, type(None))
_REPAIR_REASON = "interrupted write: the last line of the log was cut short"


def make_entry(
    lock_path: str, operation: str, result: str, details: dict[str, Any] | None, fmt: str | None
) -> dict[str, Any]:
    """The fields of one entry, without ``prev``, in the order they are written.

    ``lockPath`` is made absolute; ``details`` made JSON-safe (:func:`jsonable`; a non-dict
    becomes ``{"value": ...}``); ``user`` is the real OS user (:func:`os_user`), ``via`` the
    process-wide value (:func:`core.audit.model.get_via`). Never raises for any argument.
    """
    safe = _plain(details) if type(details) is dict else None
    if safe is None:
        safe = jsonable(details if details is not None else {})
    return {
        "timestamp": now_iso(),
        "operation": str(operation),
        "lockPath": os.path.abspath(lock_path),
        "details": safe if isinstance(safe, dict) else {"value": safe},
        "user": os_user(),
        "pid": os.getpid(),
        "host": hostname(),
        "via": get_via(),
        "format": None if fmt is None else str(fmt),
        "result": str(result),
    }


def repair_entry(
    entry: dict[str, Any], log_path: str, *, offset: int, length: int, digest: str, before: str
) -> dict[str, Any]:
    """The ``repair`` entry written before ``entry`` when the log ended in an interrupted write.

    Same ``timestamp``, ``user``, ``pid``, ``host`` and ``via`` as ``entry``; ``lockPath`` is
    the log it repairs (``log_path``). ``details``: a ``reason``, ``torn`` = the torn line's
    byte ``offset``, length in ``bytes`` and SHA-256 ``digest``, and ``before`` = the SHA-256
    of the non-blank line before it (64 zeros when there is none). ``prev`` is added by the
    writer (it is ``digest``: the chain runs through the torn line).
    """
    torn = {"offset": offset, "bytes": length, "digest": digest}
    return {
        **entry,
        "operation": "repair",
        "lockPath": log_path,
        "details": {"reason": _REPAIR_REASON, "torn": torn, "before": before},
        "format": None,
        "result": "ok",
    }


def encode_line(entry: dict[str, Any]) -> bytes:
    """One line of compact JSON in UTF-8, without LF, at most :data:`MAX_OWN_LINE_BYTES`.

    An entry whose ``details`` make it longer keeps its other fields and gets ``details`` =
    ``{"truncated": "<n> bytes of details left out"}``, so the next append can always chain
    onto it. Never raises for an entry from :func:`make_entry`.
    """
    line = _dumps(entry)
    if len(line) > MAX_OWN_LINE_BYTES:
        note = {"truncated": f"{len(line)} bytes of details left out (limit {MAX_OWN_LINE_BYTES})"}
        line = _dumps({**entry, "details": note})
    return line


def _dumps(entry: dict[str, Any]) -> bytes:
    text = _ENCODER.encode(entry)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(entry, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def _plain(details: dict[str, Any]) -> dict[str, Any] | None:
    """``details`` itself when it is flat (string keys; strings, ints, bools, None and finite
    floats as values: already JSON-safe, the common case), else None."""
    for k, v in details.items():
        if type(k) is not str:
            return None
        if not isinstance(v, _PLAIN) and (type(v) is not float or not math.isfinite(v)):
            return None
    return details


def jsonable(value: Any, depth: int = 0) -> Any:
    """``value`` made JSON-safe: dict keys as strings, tuples/sets as lists, non-finite floats
    and datetimes as strings, objects with ``to_dict()`` through it, anything else ``str()``.
    Nesting deeper than 32 levels is cut (which also breaks reference cycles). Never raises
    unless ``str()`` of an object does."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth >= 32:
        return "..."
    if isinstance(value, dict):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v, depth + 1) for v in value]
    if isinstance(value, _dt.datetime):
        return value.isoformat()
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        try:
            return jsonable(to_dict(), depth + 1)
        except Exception:
            pass
    return str(value)


def now_iso() -> str:
    """Now in JavaScript ``toISOString()`` form: ``2026-11-21T09:31:00.000Z`` (UTC, ms; the
    milliseconds truncated, as ``Date`` keeps them). The text up to the second is kept for
    the second it names."""
    global _second
    ns = time.time_ns()
    sec, ms = ns // 1_000_000_000, (ns // 1_000_000) % 1000
    if _second[0] != sec:
        g = time.gmtime(sec)
        _second = (sec, f"{g[0]:04d}-{g[1]:02d}-{g[2]:02d}T{g[3]:02d}:{g[4]:02d}:{g[5]:02d}.")
    return f"{_second[1]}{ms:03d}Z"


def os_user() -> str:
    """Name of the real OS user: the real uid's name from the password database on POSIX
    (never ``$USER``, which a caller can set), :func:`getpass.getuser` on Windows; the uid as
    text when it has no name. Cached per process."""
    global _user_cache
    if _user_cache is None:
        name: str
        if sys.platform == "win32":  # pragma: no cover - Windows
            try:
                name = getpass.getuser()
            except (KeyError, OSError, ImportError):
                name = "unknown"
        else:
            import pwd

            try:
                name = pwd.getpwuid(os.getuid()).pw_name
            except (KeyError, OSError):
                name = str(os.getuid())
        _user_cache = name
    return _user_cache


def hostname() -> str:
    """This machine's host name (``socket.gethostname``), ``"unknown"`` if it cannot be had;
    read once per process (a forked child reads it again)."""
    global _host_cache
    pid = os.getpid()
    if _host_cache is None or _host_cache[0] != pid:
        try:
            name = socket.gethostname()
        except OSError:  # pragma: no cover
            name = "unknown"
        _host_cache = (pid, name)
    return _host_cache[1]
