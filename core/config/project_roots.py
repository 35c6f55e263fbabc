"""Where a developer keeps repositories: the folders the Settings dialog offers as project
roots (``[[projects]]``, docs/watching.md "Projects") when none is configured.

A candidate is a usual folder name under the home directory (``~/src``, ``~/code``,
``~/projects``...) that is a git repository or holds one within two levels. The search reads at
most :data:`MAX_ENTRIES` directory entries in all, never follows a symbolic link, and never
raises.
"""

from __future__ import annotations

import os

__all__ = ["CANDIDATES", "MAX_ENTRIES", "suggest_roots"]

CANDIDATES: tuple[str, ...] = (
    "src", "code", "projects", "Projects", "git", "repos", "dev", "work", "workspace",
    "Developer", "source",
)
"""Folder names under the home directory that often hold a developer's repositories."""

MAX_ENTRIES = 2000
"""Directory entries read at most while looking for repositories (all candidates together)."""


def _has_repo(root: str, budget: list[int]) -> bool:
    """True when ``root`` or a directory up to two levels below it has a ``.git`` entry;
    ``budget[0]`` counts down the entries read."""
    level = [root]
    for _depth in range(3):
        nxt: list[str] = []
        for d in level:
            try:
                with os.scandir(d) as it:
                    for e in it:
                        budget[0] -= 1
                        if budget[0] <= 0:
                            return False
                        if e.name == ".git":
                            return True
                        if not e.name.startswith(".") and e.is_dir(follow_symlinks=False):
                            nxt.append(e.path)
            except OSError:
                continue
        level = nxt
    return False


def suggest_roots(home: str | None = None, *, exclude: list[str] | None = None) -> list[str]:
    """Candidate project roots under ``home`` (default the user's home directory) that hold a
    git repository, in :data:`CANDIDATES` order, leaving out ``exclude`` (absolute paths
    already configured). Never raises."""
    home = home or os.path.expanduser("~")
    taken = {os.path.normpath(p) for p in exclude or []}
    budget = [MAX_ENTRIES]
    out: list[str] = []
    for name in CANDIDATES:
        path = os.path.join(home, name)
        if path in taken or os.path.islink(path) or not os.path.isdir(path):
            continue
        if _has_repo(path, budget):
            out.append(path)
    return out
