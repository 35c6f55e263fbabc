"""Lock formats: bytes <-> :class:`core.record.LockRecord`. :func:`detect` names the format,
:func:`parse` reads it, :func:`serialize` writes a record back, :func:`build` makes what
Lockwarden writes from a :class:`WriteRequest`, :func:`default_ttl` is a format's lease.

One module per format: :mod:`.sema`, :mod:`.af` (``af-ledger``, ``af-claim``),
:mod:`.taskmcp`, :mod:`.pidfile`, and the developer tools' marker locks (read-only, never
written): :mod:`.git`, :mod:`.vimswap`, :mod:`.emacs`, :mod:`.libreoffice`, :mod:`.terraform`,
:mod:`.softfilelock`. Names as in :data:`core.record.FORMATS`.

Rules: docs/formats.md ("Detection", "Formats", "Developer tools' marker locks"; detection is
by content, the path only breaking ties, except where a tool's file name is its protocol);
docs/DESIGN.md, "Formats"; the specifications in docs/specs/. Only
:class:`core.errors.ParseError`, with a reason in plain words, ever escapes :func:`detect` and
:func:`parse`, whatever the bytes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from core.errors import ParseError
from core.formats import (
    af,
    emacs,
    git,
    libreoffice,
    pidfile,
    sema,
    softfilelock,
    taskmcp,
    terraform,
    vimswap,
)
from core.formats._common import as_bytes, decode_text, load_json_object
from core.formats.writing import Builder, Built, Holder, Reclaimed, WriteRequest
from core.record import FORMATS, WRITABLE_FORMATS, LockRecord

__all__ = [
    "FORMATS", "Built", "Holder", "Reclaimed", "WriteRequest", "af", "build", "default_ttl",
    "detect", "emacs", "git", "libreoffice", "parse", "pidfile", "sema", "serialize",
    "softfilelock", "taskmcp", "terraform", "vimswap",
]

_JSON_KEYS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("af-claim", af.CLAIM_KEYS),
    ("task-mcp", taskmcp.KEYS),
    ("af-ledger", af.LEDGER_KEYS),
    ("terraform-lock-info", terraform.KEYS),
)
"""JSON formats and the keys that make an object one of them, in order of preference."""

_JSON_PARSERS: dict[str, Callable[[dict[str, Any], bytes, str], LockRecord]] = {
    "af-claim": af.claim_from_object,
    "task-mcp": taskmcp.from_object,
    "af-ledger": af.ledger_from_object,
    "terraform-lock-info": terraform.from_object,
}

_PARSERS: dict[str, Callable[[bytes, str], LockRecord]] = {
    "sema": sema.parse,
    "af-ledger": af.parse_ledger_lock,
    "af-claim": af.parse_claim_lock,
    "task-mcp": taskmcp.parse,
    "pidfile": pidfile.parse,
    "git-lock": git.parse,
    "git-gc": git.parse_gc_pid,
    "vim-swap": vimswap.parse,
    "emacs-lock": emacs.parse,
    "libreoffice-lock": libreoffice.parse,
    "terraform-lock-info": terraform.parse,
    "softfilelock": softfilelock.parse,
    "libreoffice-profile": libreoffice.parse_profile,
}

_SERIALIZERS: dict[str, Callable[[LockRecord], bytes]] = {
    "sema": sema.serialize,
    "task-mcp": taskmcp.serialize,
    "af-ledger": af.serialize_ledger_lock,
    "pidfile": pidfile.serialize,
}


_BUILDERS: dict[str, Builder] = {
    "sema": sema.build,
    "task-mcp": taskmcp.build,
    "af-ledger": af.build_ledger,
}
"""The formats Lockwarden acquires locks in (:data:`core.record.WRITABLE_FORMATS`)."""


def _path_hint(path: str) -> str | None:
    """The JSON format a path suggests: ``.../ledger/ledger.lock`` -> af-ledger,
    ``.../locks/*.lock`` -> af-claim (docs/specs/af.txt §5 "File Paths")."""
    if not path:
        return None
    head, name = os.path.split(path)
    parent = os.path.basename(head)
    if name == "ledger.lock" or parent == "ledger":
        return "af-ledger"
    if parent == "locks":
        return "af-claim"
    return None


def _pick_json(obj: dict[str, Any], path: str) -> str:
    if isinstance(obj.get("type"), str) and "timestamp" in obj and "acquired_at" not in obj:
        raise ParseError(f"is an af ledger event ({obj['type'][:40]!r}), not a lock file")
    fits = [name for name, keys in _JSON_KEYS if all(k in obj for k in keys)]
    if len(fits) > 1:
        hint = _path_hint(path)
        return hint if hint in fits else fits[0]
    if fits:
        return fits[0]
    if "operation" in obj and "lockPath" in obj:
        raise ParseError("is a line of a lock audit log, not a lock file")
    # No key set is complete: name the closest format and what it lacks.
    best: tuple[int, str, tuple[str, ...]] | None = None
    for name, keys in _JSON_KEYS:
        hits = sum(1 for k in keys if k in obj)
        if hits >= 2 and (best is None or hits > best[0]):
            best = (hits, name, keys)
    if best is not None:
        missing = [repr(k) for k in best[2] if k not in obj]
        noun = "field" if len(missing) == 1 else "fields"
        article = "an" if best[1].startswith("a") else "a"
        raise ParseError(
            f"looks like {article} {best[1]} lock but has no {' or '.join(missing)} {noun}"
        )
    keys_found = ", ".join(sorted(repr(k) for k in obj)[:8]) or "none"
    raise ParseError(
        "JSON object is not a lock format we know (task-mcp needs owner+since+ttl, af ledger "
        f"agent_id+acquired_at, af claim node_id+owner+expires_at; keys found: {keys_found})"
    )


def _devtool_hint(data: bytes, path: str) -> str | None:
    """The developer-tool format a path (or Vim's block 0 id) names, before any decoding: their
    files are binary (Vim, git's index) or hold anything (git), so content rules cannot.
    Cheap tests first: this runs before every parse (about 1 µs for a path that is none)."""
    if data[:1] == b"b" and vimswap.looks_like(data):
        return vimswap.FORMAT
    if not path:
        return None
    name = os.path.basename(path)
    if name[:1] == ".":
        if data[:1] == b"b" and vimswap.is_swap_name(name):
            return vimswap.FORMAT
        if emacs.is_lock_name(name):
            return emacs.FORMAT
        if libreoffice.is_lock_name(name):
            return libreoffice.FORMAT
    if ".git" in path:
        if name == "gc.pid" and git.is_gc_pid(path):
            return git.GC_FORMAT
        if name.endswith(".lock") and git.lock_target(path) is not None:
            return git.FORMAT
    return None


def _detect(data: bytes, path: str) -> tuple[str, dict[str, Any] | None]:
    hint = _devtool_hint(data, path)
    if hint is not None:
        return hint, None
    text = decode_text(data)
    stripped = text.lstrip()
    if libreoffice.looks_like_profile(stripped):  # an INI section, not a JSON array
        return libreoffice.PROFILE_FORMAT, None
    if stripped.startswith(("{", "[")):
        obj = load_json_object(text, "lock")
        return _pick_json(obj, path), obj
    if pidfile.looks_like(text):
        return "pidfile", None
    if sema.looks_like(text):
        return "sema", None
    if softfilelock.looks_like(text):
        return softfilelock.FORMAT, None
    raise ParseError(
        "not a lock format we know: no key=value lines, not JSON and not a PID "
        f"(starts with {text[:20]!r})"
    )


def detect(data: bytes, path: str = "") -> str:
    """Name of the format whose shape ``data`` has (one of :data:`core.record.FORMATS`).

    By content (docs/DESIGN.md "Formats"): a JSON object is ``af-claim`` (``node_id`` + ``owner``
    + ``expires_at``), ``task-mcp`` (``owner`` + ``since`` + ``ttl``) or ``af-ledger``
    (``agent_id`` + ``acquired_at``); only ASCII whitespace and decimal digits is ``pidfile``;
    ``key=value`` lines are ``sema``. ``path`` only breaks ties between JSON formats
    (``ledger/ledger.lock`` -> af-ledger, ``locks/*.lock`` -> af-claim). Detection does not
    validate field values: :func:`parse` does.

    Raises:
        ParseError: no format fits (empty, whitespace only, binary, invalid JSON, unknown
            shape), with the reason in plain words.
    """
    try:
        return _detect(as_bytes(data), path)[0]
    except ParseError as exc:
        raise ParseError(exc.reason, path=path or None) from None
    except RecursionError:  # pragma: no cover - load_json_object catches it
        raise ParseError("JSON is nested too deeply", path=path or None) from None


def parse(data: bytes, path: str = "", *, format: str | None = None) -> LockRecord:
    """Parse the bytes of a lock file into a :class:`LockRecord` (``record.path`` = ``path``).

    With ``format`` (one of :data:`core.record.FORMATS`) only that format is tried; without
    it the format is :func:`detect`-ed. Each format's rules are in its module (the
    specifications named in the table above): :mod:`.sema`, :mod:`.af`, :mod:`.taskmcp`,
    :mod:`.pidfile`.

    Raises:
        ParseError: the only exception that escapes, whatever the bytes; ``reason`` says why
            in plain words (``"no pid= line ..."``, ``"timestamp is not an integer: 'abc'"``,
            ``"the file is empty"``, ``"holds binary data ..."``), ``path`` is ``path``.
    """
    try:
        raw = as_bytes(data)
        if format is not None:
            parser = _PARSERS.get(format)
            if parser is None:
                raise ParseError(f"unknown format {format!r} (known: {', '.join(FORMATS)})")
            return parser(raw, path)
        name, obj = _detect(raw, path)
        if obj is not None:
            return _JSON_PARSERS[name](obj, raw, path)
        return _PARSERS[name](raw, path)
    except ParseError as exc:
        raise ParseError(exc.reason, path=path or None) from None
    except RecursionError:
        raise ParseError("the file is nested too deeply to read", path=path or None) from None
    except Exception as exc:  # pragma: no cover - a bug in a parser; still only ParseError
        raise ParseError(
            f"could not be parsed ({type(exc).__name__}: {exc})", path=path or None
        ) from exc


def serialize(record: LockRecord) -> bytes:
    """The bytes of a lock file for ``record`` in ``record.format``: ``sema``
    (:func:`.sema.serialize`), ``task-mcp`` (:func:`.taskmcp.serialize`), ``af-ledger``
    (:func:`.af.serialize_ledger_lock`), ``pidfile`` (``"<pid>\\n"``).

    Raises:
        ValueError: ``af-claim`` (claims are read-only in Lockwarden, docs/DESIGN.md "Facts about
            the real af tool"), an unknown format, or a record missing what its format needs.
    """
    if record.format == "af-claim":
        raise ValueError("af-claim locks are read-only: Lockwarden never writes them")
    writer = _SERIALIZERS.get(record.format)
    if writer is None:
        raise ValueError(f"cannot write locks in format {record.format!r}")
    return writer(record)


def build(format: str, request: WriteRequest) -> Built:
    """The record and exact bytes of the lock Lockwarden writes in ``format`` for ``request``,
    by that format's builder: :func:`.sema.build`, :func:`.taskmcp.build`,
    :func:`.af.build_ledger` (docs/DESIGN.md, "Formats": what Lockwarden writes).

    Raises:
        ValueError: a format Lockwarden does not write (not in
            :data:`core.record.WRITABLE_FORMATS`), or what the format's builder refuses (a
            task-mcp request without ``ttl``, a bad token, pid or start).
    """
    builder = _BUILDERS.get(format)
    if builder is None:
        raise ValueError(
            f"Lockwarden cannot write {format!r} locks; use one of {WRITABLE_FORMATS}"
        )
    return builder(request)


def default_ttl(format: str) -> float | None:
    """The lease in seconds a lock Lockwarden writes in ``format`` gets when none is asked for: for
    ``task-mcp`` the spec's default for Lockwarden's environment and purpose
    (:func:`.taskmcp.default_ttl`, local/interactive: 3600 s; docs/specs/task-mcp.txt
    "Default TTL Values by Environment"); None for the formats without a mandatory lease."""
    if format == taskmcp.FORMAT:
        return taskmcp.default_ttl(taskmcp.LOCKWARDEN_ENVIRONMENT, taskmcp.LOCKWARDEN_PURPOSE)
    return None
