"""LibreOffice document locks (format ``libreoffice-lock``): ``.~lock.<name>#`` in the
document's directory, and the profile's ``.lock`` (``libreoffice-profile``).

Rules: docs/specs/devtool-locks.md, "LibreOffice" (``svl/source/misc/lockfilecommon.cxx``): one
entry of 5 comma-separated fields ended by ``;`` -- office user name, system user, host,
``DD.MM.YYYY HH:MM`` in **local time**, profile URL; what each becomes: docs/formats.md,
"libreoffice-lock". There is **no PID**: liveness comes from ``soffice.bin`` processes of that
user (:mod:`core.verdicts.devtools`).
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime

from core.errors import ParseError
from core.formats._common import decode_text, raw_text, sanitize, short
from core.record import LockRecord

FORMAT = "libreoffice-lock"
FIELDS = 5
_NAME_RE = re.compile(r"^\.~lock\..+#\Z")
_TIME_RE = re.compile(r"^([0-9]{2})\.([0-9]{2})\.([0-9]{4}) ([0-9]{2}):([0-9]{2})\Z")


def is_lock_name(name: str) -> bool:
    """True for ``.~lock.<document>#``."""
    return _NAME_RE.match(name) is not None


def split_entry(text: str) -> list[str]:
    """The fields of the first entry (up to an unescaped ``;``), ``\\`` escapes undone.

    Raises:
        ParseError: no terminating ``;``.
    """
    fields: list[str] = []
    cur: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            cur.append(text[i + 1])
            i += 2
            continue
        if c == ",":
            fields.append("".join(cur))
            cur = []
        elif c == ";":
            fields.append("".join(cur))
            return fields
        else:
            cur.append(c)
        i += 1
    raise ParseError("a LibreOffice lock entry ends with ';', this one does not")


def local_time(text: str) -> datetime | None:
    """``DD.MM.YYYY HH:MM`` (this host's local time) as aware UTC, or ``None`` when it is not
    such a time."""
    m = _TIME_RE.match(text)
    if m is None:
        return None
    day, month, year, hour, minute = (int(g) for g in m.groups())
    try:
        return datetime(year, month, day, hour, minute).astimezone().astimezone(UTC)
    except (ValueError, OverflowError, OSError):
        return None


def parse(data: bytes, path: str = "") -> LockRecord:
    """One lock entry into a :class:`LockRecord`: ``holder`` = the office user name, or the
    system user when it is empty; ``host``; ``acquired_at`` from field 4 (local time, minute
    precision; ``None`` when unreadable); ``tag`` = the document name from ``path``;
    ``metadata``: ``name``, ``user``, ``time`` (the text), ``profile``, ``document``.

    Raises:
        ParseError: not UTF-8 text, no ``;``, or not 5 fields, or no system user or host.
    """
    text = decode_text(data)
    fields = split_entry(text.lstrip("\ufeff"))
    if len(fields) != FIELDS:
        raise ParseError(f"a LibreOffice lock has {FIELDS} fields, this one has {len(fields)}"
                         f" ({short(text)})")
    name, user, host, when, profile = (sanitize(f).strip() for f in fields)
    if not user or not host:
        raise ParseError("a LibreOffice lock names a system user and a host")
    base = os.path.basename(path)
    document = base[len(".~lock."):-1] if is_lock_name(base) else None
    meta: dict[str, object] = {"name": name, "user": user, "time": when, "profile": profile,
                               "document": document}
    return LockRecord(path=path, format=FORMAT, holder=name or user, host=host,
                      acquired_at=local_time(when), tag=document, metadata=meta,
                      raw=raw_text(data))


PROFILE_FORMAT = "libreoffice-profile"
PROFILE_HEADER = "[Lockdata]"
_PROFILE_KEYS = {"User": "user", "Host": "host", "Stamp": "stamp", "Time": "time",
                 "IPCServer": "ipc_server"}


def looks_like_profile(text: str) -> bool:
    """True when ``text``'s first non-empty line is ``[Lockdata]`` (the profile lock)."""
    return text.lstrip("\ufeff \t\r\n").startswith(PROFILE_HEADER)


def profile_time(text: str) -> datetime | None:
    """``Mon Nov 23 19:26:05 2026`` (this host's local time, C locale) as aware UTC, or
    ``None``."""
    try:
        return datetime.strptime(text, "%a %b %d %H:%M:%S %Y").astimezone().astimezone(UTC)
    except (ValueError, OverflowError, OSError):
        return None


def parse_profile(data: bytes, path: str = "") -> LockRecord:
    """The user-profile lock ``~/.config/libreoffice/4/.lock`` (docs/specs/devtool-locks.md §2.4;
    CRLF INI ``[Lockdata] User= Host= Stamp= Time= IPCServer=``): ``holder`` = ``User``, ``host``,
    ``acquired_at`` from ``Time`` (local time; ``None`` if unreadable); ``metadata``: ``user``,
    ``stamp``, ``time``, ``ipc_server``, ``profile`` (``file://`` URL of the lock's directory).

    Raises:
        ParseError: not UTF-8 text, no ``[Lockdata]`` header, or no ``User`` or ``Host``.
    """
    text = decode_text(data)
    if not looks_like_profile(text):
        raise ParseError(f"a LibreOffice profile lock starts with {PROFILE_HEADER}, "
                         f"not {short(text)}")
    meta: dict[str, object] = {}
    for line in text.splitlines()[1:]:
        key, sep, value = line.partition("=")
        name = _PROFILE_KEYS.get(key.strip())
        if sep and name is not None:
            meta[name] = sanitize(value.strip())
    user, host = meta.get("user"), meta.get("host")
    if not isinstance(user, str) or not user or not isinstance(host, str) or not host:
        raise ParseError("a LibreOffice profile lock names a User and a Host")
    if path:
        meta["profile"] = "file://" + os.path.dirname(os.path.abspath(path))
    when = meta.get("time")
    return LockRecord(path=path, format=PROFILE_FORMAT, holder=user, host=host,
                      acquired_at=profile_time(when) if isinstance(when, str) else None,
                      tag="LibreOffice profile", metadata=meta, raw=raw_text(data))
