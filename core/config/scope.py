"""What a recursive walk of a watched tree looks at: the directories it skips and, for a project
root, which files are developer tools' locks (docs/watching.md, "Projects";
docs/specs/devtool-locks.md, "Summary table", for the file names).

Pure functions on path strings: nothing here touches the file system, so the scanner
(:func:`core.watch.scan.list_dir`), the coverage test of a file event
(:func:`core.watch.scan.covers`) and the per-directory watches of a project tree
(:mod:`core.watch.tree`) all apply the same rule: a directory is skipped when its base name
matches a ``skip`` pattern (:data:`core.config.model.PROJECT_SKIP_DIRS` for projects) or when it
is a part of a git directory that never holds a lock (the object store's sub-directories,
``logs``, ``hooks``, ``lfs``, ``rr-cache``; never a name the user chose); git's lock names count
only inside a git directory, the other tools' patterns anywhere.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.config.model import WatchSpec

__all__ = [
    "GIT_DIR", "GIT_LOCK_PATTERNS", "GIT_SKIP_DIRS", "dir_matcher", "in_git_dir", "skips_dir",
    "walkable", "wanted_file",
]

GIT_DIR = ".git"

GIT_SKIP_DIRS = frozenset({"logs", "hooks", "lfs", "rr-cache"})
"""Directories inside a git directory that hold no lock file (``docs/specs/devtool-locks.md``
§1, git: the lock paths are the gitdir itself, ``refs/**``, ``objects/`` directly,
``worktrees/*``, ``modules/*`` and ``reftable/``)."""

GIT_LOCK_PATTERNS: tuple[str, ...] = ("*.lock", "gc.pid")
"""git's lock file names, counted in a project tree only inside a git directory."""

_SEP = os.sep


@functools.lru_cache(maxsize=64)
def _compile(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    if not patterns:
        return lambda name: False
    rx = re.compile("|".join(f"(?:{fnmatch.translate(os.path.normcase(p))})" for p in patterns))
    return lambda name: rx.match(os.path.normcase(name)) is not None


def dir_matcher(patterns: Iterable[str]) -> Callable[[str], bool]:
    """A predicate on a directory's base name for the fnmatch ``patterns`` of a spec's
    ``skip`` list (case-insensitive where the file system's names are)."""
    return _compile(tuple(patterns))


_GIT_LOCKS = _compile(GIT_LOCK_PATTERNS)


def in_git_dir(directory: str) -> bool:
    """True when ``directory`` (absolute) is a git directory or lies inside one: one of its
    components is ``.git``."""
    return f"{_SEP}{GIT_DIR}{_SEP}" in f"{directory}{_SEP}"


_USER_NAMED = frozenset({"refs", "worktrees", "modules"})
"""Directories of a git directory whose sub-directories are named by the user: branch and tag
names (``refs/heads/build/x``), worktree and submodule names (``worktrees/logs``)."""


def skips_dir(skip: Callable[[str], bool], parent: str, name: str) -> bool:
    """True when a walk never descends into ``parent/name``: ``skip(name)`` (the spec's
    patterns, :func:`dir_matcher`), or it is a part of a git directory that holds no lock
    (:data:`GIT_SKIP_DIRS`, the object store's sub-directories). Inside a git directory, a
    name the user chose -- below ``refs/``, or a worktree's or submodule's name directly in
    ``worktrees/`` or ``modules/`` -- is never skipped: a branch ``build/x`` or ``logs/y``
    and a worktree named ``target`` hold git's locks like any other."""
    if not in_git_dir(parent):
        return skip(name)
    inner = parent.split(_SEP)
    inner = inner[len(inner) - 1 - inner[::-1].index(GIT_DIR) + 1:]  # after the last .git
    if "refs" in inner or (inner and inner[-1] in _USER_NAMED):
        return False
    if skip(name):
        return True
    return name in GIT_SKIP_DIRS or (bool(inner) and inner[-1] == "objects")


def walkable(skip: Callable[[str], bool], root: str, directory: str) -> bool:
    """True when a walk from ``root`` reaches ``directory`` (``root`` itself or below it, both
    absolute and normalised): no component between them is skipped (:func:`skips_dir`)."""
    if directory == root:
        return True
    prefix = root if root.endswith(_SEP) else root + _SEP
    if not directory.startswith(prefix):
        return False
    parent = root
    for name in directory[len(prefix):].split(_SEP):
        if skips_dir(skip, parent, name):
            return False
        parent = os.path.join(parent, name)
    return True


def wanted_file(project: bool, match: Callable[[str], bool], parent: str, name: str) -> bool:
    """True when file ``name`` in directory ``parent`` is listed: ``match(name)`` (the spec's
    patterns, :func:`core.watch.scan.name_matcher`), and for a ``project`` tree git's lock names
    (:data:`GIT_LOCK_PATTERNS`) only inside a git directory (:func:`in_git_dir`)."""
    if not match(name):
        return False
    if project and _GIT_LOCKS(name):
        return in_git_dir(parent)
    return True


# -- af's proof directories (docs/specs/af.txt §1, §2; docs/formats.md, "af") ----------------

LEDGER_DIR = "ledger"
"""An af proof directory's ledger: ``<proof>/ledger/ledger.lock`` and its event files."""
LEDGER_LOCK = "ledger.lock"
CLAIMS_DIR = "locks"
"""An af proof directory's claim locks: ``<proof>/locks/*.lock``."""
CLAIM_SEPARATOR = "#"
"""Separator between the ledger directory and the node id in a replayed claim's path."""


def split_claim_path(path: str) -> tuple[str, str] | None:
    """``(proof_dir, node_id)`` for a virtual claim path (``<proof>/ledger#<node>``), else
    ``None``."""
    head, sep, node = path.rpartition(CLAIM_SEPARATOR)
    if not sep or os.path.basename(head) != LEDGER_DIR or os.sep in node:
        return None
    return os.path.dirname(head), node


def dir_in_scope(spec: WatchSpec, root: str, d: str) -> bool:
    """True when files directly in directory ``d`` are in the scope of ``spec`` (whose
    expanded directory is ``root``): ``d`` is the root, or below it for a recursive spec and
    not inside a directory the walk skips (:func:`walkable`)."""
    if d == root:
        return True
    if not spec.recursive:
        return False
    return walkable(dir_matcher(spec.skip), root, d)
