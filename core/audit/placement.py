"""Where an audit entry may be written: never into a git repository, and as root never into
another user's directory (docs/DESIGN.md, "Nothing lost"; docs/audit.md, "Where entries go").

Part of :mod:`core.audit`. A lock in a git working tree (``index.lock``, a build lock beside the
sources) or in a git directory would otherwise get a ``.lock_audit.log`` there, which ``git
status`` shows as an untracked file and a careless ``git add -A`` commits. Entries about such
locks go to the per-user log (:func:`core.audit.model.fallback_log_path`) with the reason, like
any entry whose directory log cannot be used.
"""

from __future__ import annotations

import functools
import os
import sys

GIT_DIR_NAME = ".git"


def _exists(path: str) -> bool:
    """``access(path, F_OK)``: a bool without the cost of an exception for a missing path
    (most are); a dangling symlink counts as missing."""
    return os.access(path, os.F_OK)


def _is_git_dir(d: str) -> bool:
    """True for a git directory (``.git`` of a working tree, a bare repository): ``HEAD`` is a
    file and ``objects`` and ``refs`` are directories (git's own test, ``setup.c``
    ``is_git_directory``, less its path checks)."""
    return (os.path.isfile(os.path.join(d, "HEAD"))
            and os.path.isdir(os.path.join(d, "objects"))
            and os.path.isdir(os.path.join(d, "refs")))


def repository_of(directory: str) -> str | None:
    """The git repository ``directory`` lies in, or ``None``: the working tree's top (a
    directory holding a ``.git`` entry, a directory or a ``gitdir:`` file as worktrees and
    submodules have), or the git directory itself (one named ``.git``, or a bare repository)
    for a directory inside it. Walks up from ``directory`` to ``/`` with two ``access`` calls
    per level, each time: the answer is never cached (a repository created above a lock
    directory counts at once), only the names to ask about (:func:`_levels`; docs/audit.md,
    "Where entries go"). Never raises."""
    for d, dot_git, head in _levels(os.path.abspath(directory)):
        if dot_git is None:  # d is named .git
            return d
        if _exists(dot_git) or (_exists(head) and _is_git_dir(d)):
            return d
    return None


@functools.lru_cache(maxsize=256)
def _levels(directory: str) -> tuple[tuple[str, str | None, str], ...]:
    """For the absolute ``directory`` and each of its ancestors up to ``/``: the directory,
    its ``.git`` entry's path (None when the directory is itself named ``.git``: the walk
    stops there) and its ``HEAD``'s path. Pure string work on the path, so it is cached."""
    out: list[tuple[str, str | None, str]] = []
    d = directory
    while True:
        if os.path.basename(d) == GIT_DIR_NAME:
            out.append((d, None, ""))
            break
        out.append((d, os.path.join(d, GIT_DIR_NAME), os.path.join(d, "HEAD")))
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    return tuple(out)


def refusal(log_path: str) -> str | None:
    """Why the directory log ``log_path`` must not be written, in words for
    :attr:`core.audit.AuditWrite.reason`; ``None`` when it may be:

    - it lies in a git repository;
    - Lockwarden runs as root and the directory (symlinks followed: where the log would really
      go) belongs to another user: a root-owned ``.lock_audit.log`` there -- reached through a
      symlinked directory someone planted, or plainly -- is a file that user can neither
      append to nor trust, so root's entries go to root's own log."""
    directory = os.path.dirname(log_path)
    repo = repository_of(directory)
    if repo is not None:
        return (f"{directory} is in the git repository {repo}: Lockwarden writes nothing into "
                "a repository, so the entry went to your own log")
    if sys.platform != "win32" and os.geteuid() == 0:
        try:
            owner = os.stat(directory or ".").st_uid
        except OSError:
            return None  # the append says what is wrong with it
        if owner != 0:
            where = os.path.realpath(directory or ".")
            via = "" if where == os.path.abspath(directory or ".") else f" (really {where})"
            return (f"{directory}{via} belongs to another user ({_user(owner)}): Lockwarden "
                    "running as root writes no log into another user's directory, so the "
                    "entry went to root's own log")
    return None


def _user(uid: int) -> str:
    """``"name, uid N"`` (``"uid N"`` without a name; Windows has no user database here)."""
    if sys.platform == "win32":
        return f"uid {uid}"
    else:
        import pwd

        try:
            return f"{pwd.getpwuid(uid).pw_name}, uid {uid}"
        except KeyError:
            return f"uid {uid}"


__all__ = ["GIT_DIR_NAME", "refusal", "repository_of"]
