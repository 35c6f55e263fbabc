"""The walk of a watched directory: which names are lock candidates, which directories are
``af`` proof directories, and which paths a spec covers (docs/watching.md; the listing half of
:mod:`core.watch.scan`, which reads and judges what this finds).

:func:`list_dir` lists a :class:`core.config.WatchSpec`'s directory (optionally recursively)
with :func:`os.scandir`, never through a symbolic link, keeps the names that match the spec's
patterns (fnmatch on the **base name**; never the engine's own files:
:func:`core.fsutil.is_engine_file`), and notes which candidates the directory listing already
calls regular files (``os.DirEntry.is_file(follow_symlinks=False)``), so that reading them
needs no ``lstat`` first (:func:`core.fsutil.read_lock_file`, ``regular``). ``af`` proof
directories (:func:`is_proof_dir`) add their ledger lock and claim locks.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.config import WatchSpec, expand_path
from core.config.scope import (
    CLAIM_SEPARATOR,
    CLAIMS_DIR,
    LEDGER_DIR,
    LEDGER_LOCK,
    dir_in_scope,
    dir_matcher,
    skips_dir,
    split_claim_path,
    wanted_file,
)
from core.fsutil import is_engine_file

if TYPE_CHECKING:
    from core.stale_policy import StalePolicy

__all__ = ["CLAIMS_DIR", "CLAIM_SEPARATOR", "LEDGER_DIR", "LEDGER_LOCK", "dir_in_scope",
           "split_claim_path"]  # re-exported: core.watch.scan's names

_EVENT_RE = re.compile(r"^(?:event-)?[0-9]{1,18}\.json$")


# --------------------------------------------------------------------------------------------
# names and patterns
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _compile(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    if not patterns:
        return lambda name: False
    rx = re.compile("|".join(f"(?:{fnmatch.translate(os.path.normcase(p))})" for p in patterns))
    if os.path.normcase("A") == "a":  # case-insensitive file system names (Windows)
        return lambda name: rx.match(os.path.normcase(name)) is not None
    return lambda name: rx.match(name) is not None


def name_matcher(patterns: Iterable[str]) -> Callable[[str], bool]:
    """A predicate on a file's **base name** for fnmatch ``patterns`` (``*.lock``).

    Never matches against the whole path (watchdog 7 matches its patterns against absolute
    paths, so ``*.lock`` there would not match ``/tmp/x.lock``: docs/DESIGN.md, "Watching"). The
    engine's own files never match (:func:`core.fsutil.is_engine_file`)."""
    rx = _compile(tuple(patterns))
    return lambda name: rx(name) and not is_engine_file(name)


def is_event_file(name: str) -> bool:
    """True for an af ledger event file name: ``NNNNNN.json`` or ``event-NNNNNN.json``."""
    return _EVENT_RE.match(name) is not None


def is_proof_dir(path: str) -> bool:
    """True when ``path`` is an ``af`` proof directory: it has a ``ledger/`` directory holding
    ``ledger.lock`` or event files (``NNNNNN.json``, ``event-NNNNNN.json``), or it has a
    ``locks/`` directory next to a ``meta.json`` (docs/specs/af.txt §5 "File
    Paths"). Never raises."""
    ledger = os.path.join(path, LEDGER_DIR)
    try:
        with os.scandir(ledger) as it:
            for e in it:
                if e.name == LEDGER_LOCK or is_event_file(e.name):
                    return True
    except OSError:
        pass
    return os.path.isdir(os.path.join(path, CLAIMS_DIR)) and os.path.lexists(
        os.path.join(path, "meta.json")
    )


def claim_path(proof_dir: str, node_id: str) -> str:
    """Virtual path of a claim replayed from ``proof_dir``'s ledger:
    ``"<proof>/ledger#<node_id>"``."""
    return os.path.join(proof_dir, LEDGER_DIR) + CLAIM_SEPARATOR + node_id


def policy_for(spec: WatchSpec) -> StalePolicy:
    """The :class:`core.stale_policy.StalePolicy` of a watched directory: ``spec.policy``
    (its ``stale_after``, Task MCP flags and per-format limits)."""
    return spec.policy


# --------------------------------------------------------------------------------------------
# listing
# --------------------------------------------------------------------------------------------


@dataclass
class Listing:
    """What a walk of one watched directory found.

    Attributes:
        files: candidate lock paths (names matching the patterns, plus af ledger and claim
            locks) -> their ``lstat`` result, or ``None`` when ``lstat`` failed.
        proofs: af proof directories found (the root itself, or any directory walked).
        problems: sub-directories that could not be listed, with the reason.
        dirs: every directory walked (the root first), skipped ones left out
            (:mod:`core.config.scope`): a project tree watches each on its own.
        regular: the candidates the directory listing calls regular files (read without an
            ``lstat`` first: :func:`core.fsutil.read_lock_file`, ``regular``).
    """

    files: dict[str, os.stat_result | None] = field(default_factory=dict)
    regular: set[str] = field(default_factory=set)
    proofs: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def ledger_signature(proof_dir: str) -> tuple[int, int, int] | None:
    """``(inode, mtime_ns, ctime_ns)`` of ``<proof>/ledger`` (changes when an event file is
    added, removed or renamed), or ``None`` when there is no such directory."""
    st = _lstat(os.path.join(proof_dir, LEDGER_DIR))
    if st is None or not stat.S_ISDIR(st.st_mode):
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def list_dir(spec: WatchSpec, *,
             with_stat: bool | Callable[[str], bool] = True) -> Listing:
    """Walk ``spec``'s directory (recursively if ``spec.recursive``) without following symlinks.

    Directories the spec skips (its ``skip`` patterns; a git directory's object store, logs
    and hooks) are never entered, and a project tree lists only developer tools' locks
    (:func:`core.config.scope.wanted_file`).

    Args:
        spec: the watched directory.
        with_stat: ``lstat`` each candidate (the watcher compares them between rescans), or a
            predicate on the path saying which to ``lstat`` (the watcher's: those it has an
            entry for; a file read anyway gets its identity from the read's ``fstat``).

    Raises:
        OSError: the root directory itself cannot be listed (``FileNotFoundError`` when it
            does not exist, ``NotADirectoryError``, ``PermissionError``). Sub-directories that
            cannot be listed are reported in :attr:`Listing.problems` instead.
    """
    root = expand_path(spec.path)
    match = name_matcher(spec.patterns)
    skip = dir_matcher(spec.skip)
    project = spec.project
    stat_all = with_stat is True
    stat_some = with_stat if callable(with_stat) else None
    out = Listing()
    stack = [root]
    first = True
    while stack:
        d = stack.pop()
        try:
            it = os.scandir(d)
        except OSError as exc:
            if first:
                raise
            if not isinstance(exc, FileNotFoundError):
                out.problems.append(f"{d}: cannot be listed ({exc.strerror or exc})")
            continue
        first = False
        out.dirs.append(d)
        has_ledger = has_locks = False
        with it:
            for e in it:
                name = e.name
                try:
                    is_dir = e.is_dir(follow_symlinks=False)
                except OSError:
                    is_dir = False
                if wanted_file(project, match, d, name):
                    path = e.path
                    out.files[path] = _lstat(path) if stat_all or (
                        stat_some is not None and stat_some(path)) else None
                    if not is_dir and _is_regular(e):
                        out.regular.add(path)
                if is_dir:
                    if name == LEDGER_DIR:
                        has_ledger = True
                    elif name == CLAIMS_DIR:
                        has_locks = True
                    if spec.recursive and not skips_dir(skip, d, name):
                        stack.append(e.path)
        if (has_ledger or has_locks) and is_proof_dir(d):
            _add_proof(d, out, with_stat is not False)
    return out


def _is_regular(e: os.DirEntry[str]) -> bool:
    """True when the directory listing calls ``e`` a regular file (no system call where the
    file system returns types with names; an ``lstat`` otherwise). Never raises."""
    try:
        return e.is_file(follow_symlinks=False)
    except OSError:
        return False


def _add_proof(proof: str, out: Listing, with_stat: bool) -> None:
    out.proofs.append(proof)
    ledger_lock = os.path.join(proof, LEDGER_DIR, LEDGER_LOCK)
    if ledger_lock not in out.files and os.path.lexists(ledger_lock):
        out.files[ledger_lock] = _lstat(ledger_lock) if with_stat else None
    locks = os.path.join(proof, CLAIMS_DIR)
    try:
        with os.scandir(locks) as it:
            for e in it:
                if e.name.endswith(".lock") and not is_engine_file(e.name) \
                        and e.path not in out.files:
                    out.files[e.path] = _lstat(e.path) if with_stat else None
    except OSError:
        pass


def covers(spec: WatchSpec, path: str, root: str | None = None) -> bool:
    """True when ``path`` (a file path or virtual claim path) is in ``spec``'s scope: its
    directory is the spec's directory (or below it, for a recursive spec) and its name matches
    the patterns; or it is an af ledger lock / claim lock / replayed claim of a proof directory
    in scope."""
    root = root if root is not None else expand_path(spec.path)
    claim = split_claim_path(path)
    if claim is not None:
        return dir_in_scope(spec, root, claim[0])
    parent, name = os.path.split(path)
    if dir_in_scope(spec, root, parent) and wanted_file(
            spec.project, name_matcher(spec.patterns), parent, name):
        return True
    pp = os.path.dirname(parent)
    base = os.path.basename(parent)
    if (base == LEDGER_DIR and name == LEDGER_LOCK) or (
        base == CLAIMS_DIR and name.endswith(".lock") and not is_engine_file(name)
    ):
        return dir_in_scope(spec, root, pp)
    return False
