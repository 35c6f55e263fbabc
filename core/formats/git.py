"""git's lock files (format ``git-lock``: ``<gitdir>/index.lock``, ``HEAD.lock``,
``refs/**/<name>.lock``, ...) and ``<gitdir>/gc.pid`` (format ``git-gc``).

Rules: docs/specs/devtool-locks.md, "git"; what each file holds and becomes: docs/formats.md,
"git-lock" and "git-gc". A lock file names no holder: its age is the file's mtime, its liveness
the git processes working in the repository (:mod:`core.verdicts.devtools`); git 2.54's
``<name>~pid.lock`` companion gives a PID (:func:`companion_pid`). Detection is by path only
(the content is anything): the file must sit inside a git directory (:func:`lock_target`).
"""

from __future__ import annotations

import os
import re
import sys

from core.errors import ParseError
from core.formats._common import MAX_PID, raw_text, sanitize, short
from core.record import LockRecord

FORMAT = "git-lock"
GC_FORMAT = "git-gc"

TOP_LOCKS = frozenset({"index", "HEAD", "packed-refs", "config", "shallow", "ORIG_HEAD",
                       "FETCH_HEAD", "MERGE_HEAD", "AUTO_MERGE"})
"""Lock targets directly in a git directory (``<name>.lock``)."""

OBJECT_LOCKS = frozenset({"maintenance", "schedule"})
"""Lock targets under ``<gitdir>/objects/``."""

_SHA_RE = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?\n?\Z")
_PID_RE = re.compile(r"^pid ([0-9]{1,10})\n?\Z")
_GC_RE = re.compile(r"^([0-9]{1,10}) (\S{1,255})\Z")


def _is_gitdir(name: str) -> bool:
    return name == ".git" or (name.endswith(".git") and len(name) > 4)


def gitdir_of(path: str) -> str | None:
    """The innermost git directory ``path`` lies in (``…/.git``, ``…/.git/worktrees/<w>``,
    ``…/.git/modules/<m>``, a bare ``…/x.git``), by the path's text only; ``None`` when no
    component is a git directory."""
    parts = os.path.normpath(path).split(os.sep)
    for i in range(len(parts) - 2, -1, -1):
        if _is_gitdir(parts[i]):
            base = i + 1
            if len(parts) > base + 2 and parts[base] in ("worktrees", "modules"):
                return os.sep.join(parts[: base + 2]) or os.sep
            return os.sep.join(parts[:base]) or os.sep
    return None


def lock_target(path: str) -> str | None:
    """What the git lock at ``path`` protects, relative to its git directory (``"index"``,
    ``"HEAD"``, ``"refs/heads/main"``, ``"objects/maintenance"``, ``"reftable/tables.list"``),
    or ``None`` when ``path`` is not one of git's lock files. ``<name>~pid.lock`` companions
    count (their target is ``<name>``)."""
    name = os.path.basename(path)
    if not name.endswith(".lock"):
        return None
    gitdir = gitdir_of(path)
    if gitdir is None:
        return None
    rel = os.path.relpath(path, gitdir)
    if rel.startswith(".." + os.sep) or rel == "..":
        return None
    target = rel[: -len(".lock")].replace(os.sep, "/")
    if target.endswith("~pid"):
        target = target[: -len("~pid")]
    if target in TOP_LOCKS or target == "reftable/tables.list":
        return target
    if target.startswith("objects/") and target[len("objects/"):] in OBJECT_LOCKS:
        return target
    if target.startswith("refs/") and len(target) > 5:
        return target
    return None


def is_gc_pid(path: str) -> bool:
    """True for ``<gitdir>/gc.pid``."""
    return os.path.basename(path) == "gc.pid" and gitdir_of(path) == os.path.dirname(
        os.path.normpath(path))


def _content_kind(data: bytes) -> str:
    if not data:
        return "empty"
    if data.startswith(b"DIRC"):
        return "index"
    text = data[:200].decode("ascii", errors="replace")
    if _SHA_RE.match(text):
        return "object id"
    if text.startswith("ref: "):
        return "symbolic ref"
    if _PID_RE.match(text):
        return "pid"
    return "data"


def parse(data: bytes, path: str = "") -> LockRecord:
    """A git lock file: any bytes (the content is what git is about to write).

    ``tag`` is the lock's target (``"index"``, ``"refs/heads/main"``) when ``path`` says it;
    ``pid`` comes from a ``<name>~pid.lock`` companion's own text (``pid N``); ``metadata``:
    ``gitdir``, ``target``, ``content`` (``"empty"``, ``"index"``, ``"object id"``,
    ``"symbolic ref"``, ``"pid"``, ``"data"``), ``size`` (bytes), and ``new_value`` for a ref
    lock (the object id or symbolic ref about to be written). ``acquired_at`` is ``None``: the
    file's mtime is its age. Never raises for the bytes (a ``ParseError`` only for a PID out of
    range in a companion file).
    """
    target = lock_target(path) if path else None
    gitdir = gitdir_of(path) if path else None
    kind = _content_kind(data)
    meta: dict[str, object] = {"content": kind, "size": len(data)}
    if gitdir is not None:
        meta["gitdir"] = gitdir
    if target is not None:
        meta["target"] = target
    pid: int | None = None
    m = _PID_RE.match(data[:64].decode("ascii", errors="replace"))
    if m is not None and os.path.basename(path).endswith("~pid.lock"):
        pid = int(m.group(1))
        if not 0 < pid <= MAX_PID:
            raise ParseError(f"git lock PID is out of range: {short(m.group(1))}")
        meta["companion"] = True
    if kind in ("object id", "symbolic ref"):
        meta["new_value"] = sanitize(data[:200].decode("ascii", errors="replace").strip())
    raw = raw_text(data) if kind != "index" else f"<git index, {len(data)} bytes>"
    return LockRecord(path=path, format=FORMAT, pid=pid, tag=target, metadata=meta, raw=raw)


def parse_gc_pid(data: bytes, path: str = "") -> LockRecord:
    """``gc.pid``: ``"<pid> <hostname>"`` (``builtin/gc.c: lock_repo_for_gc`` writes it with
    ``"%"PRIuMAX" %s"``, no newline; a trailing newline is accepted).

    Raises:
        ParseError: not that shape, or a PID of 0 or out of range.
    """
    text = data.decode("utf-8", errors="replace")[:300].rstrip("\r\n")
    m = _GC_RE.match(text)
    if m is None:
        raise ParseError(f"gc.pid holds '<pid> <host>', not {short(text)}")
    pid = int(m.group(1))
    if not 0 < pid <= MAX_PID:
        raise ParseError(f"gc.pid PID is out of range: {short(m.group(1))}")
    host = sanitize(m.group(2))
    return LockRecord(path=path, format=GC_FORMAT, pid=pid, host=host, tag="git gc",
                      metadata={"gitdir": gitdir_of(path)} if path else {},
                      raw=raw_text(data))


def companion_path(path: str) -> str:
    """``<name>~pid.lock`` beside ``<name>.lock`` (git 2.54 ``core.lockfilePid``)."""
    stem = path[: -len(".lock")] if path.endswith(".lock") else path
    return stem + "~pid.lock"


def companion_pid(path: str) -> int | None:
    """The PID in the ``~pid.lock`` companion of the git lock ``path``, if one exists and
    reads ``pid N`` (never follows a symlink; reads at most 64 bytes). Never raises."""
    flags = os.O_RDONLY
    if sys.platform != "win32":  # Windows has neither flag
        flags |= os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(companion_path(path), flags)
    except (OSError, ValueError):
        return None
    try:
        data = os.read(fd, 64)
    except OSError:
        return None
    finally:
        os.close(fd)
    m = _PID_RE.match(data.decode("ascii", errors="replace"))
    pid = int(m.group(1)) if m else 0
    return pid if 0 < pid <= MAX_PID else None
