"""Well-known kernel-lock anchors: the files developer tools and package managers lock with
flock or fcntl and never write (docs/specs/devtool-locks.md §0, kind B, and the §1 table rows
dpkg/apt, cargo, uv, Gradle; §2.7).

Such a file is only an anchor, usually 0 bytes: whether it is held is known to the kernel
alone, it is never "stale", and deleting it breaks mutual exclusion (the holder keeps its
lock on the unlinked inode while a newcomer locks a fresh one). :func:`anchor_tool` names the
tool from the path alone, so that :func:`core.verdicts.inspect.inspect_bytes` can judge an empty
anchor nobody holds ``free`` (reason ``kernel_anchor_free``) instead of an empty file left by a
crash.

Pure functions on the path string: no I/O, no environment. The rules are deliberately
narrow -- a rule that caught the ordinary lock files of other tools (any ``*.lock`` in
``/tmp``) would hide a stale lock of theirs behind a "free" verdict.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable

ANCHOR_TOOLS: tuple[str, ...] = ("dpkg", "apt", "cargo", "uv", "gradle")
"""The tools :func:`anchor_tool` can name."""

_SEPARATORS = re.compile(r"[\\/]+") if os.sep == "\\" else re.compile(r"/+")


def _parts(path: str) -> list[str]:
    """The components of ``path`` (``/`` everywhere, ``\\`` too on Windows), without empty
    ones and without ``.``."""
    return [p for p in _SEPARATORS.split(str(path)) if p and p != "."]


def _dpkg(parts: list[str]) -> bool:
    """dpkg's locks: ``<admindir>/lock`` and ``<admindir>/lock-frontend``, the admin dir
    being ``/var/lib/dpkg`` (devtool-locks.md §1, row "dpkg / apt": POSIX lock, 0 bytes,
    "None. Never delete")."""
    return len(parts) >= 2 and parts[-2] == "dpkg" and parts[-1] in ("lock", "lock-frontend")


def _apt(parts: list[str]) -> bool:
    """apt's locks: ``/var/cache/apt/archives/lock`` and ``/var/lib/apt/lists/lock``
    (devtool-locks.md §1, row "dpkg / apt")."""
    return (len(parts) >= 3 and parts[-1] == "lock" and parts[-2] in ("archives", "lists")
            and parts[-3] == "apt")


_RUSTC_SESSION = re.compile(r"s-[^/\\]+\.lock")


def _cargo(parts: list[str]) -> bool:
    """cargo's locks: ``target/<profile>/.cargo-lock``, ``$CARGO_HOME/.package-cache`` and
    ``.package-cache-mutate`` (names no other tool uses; ``$CARGO_HOME`` may be anywhere), and
    rustc's incremental session locks ``incremental/**/s-*.lock`` (devtool-locks.md §1, row
    "cargo"; §2.7 "cargo": ``flock``, all 0 bytes)."""
    name = parts[-1]
    if name in (".cargo-lock", ".package-cache", ".package-cache-mutate"):
        return True
    return _RUSTC_SESSION.fullmatch(name) is not None and "incremental" in parts[:-2]


def _uv(parts: list[str]) -> bool:
    """uv's cache lock: ``<cache>/.lock`` where the cache directory is uv's (named ``uv``:
    ``~/.cache/uv``, platformdirs' user cache dir for "uv") (devtool-locks.md §1, row "uv";
    §2.7 "uv": ``flock`` shared while uv runs, 0 bytes)."""
    return len(parts) >= 2 and parts[-1] == ".lock" and parts[-2] == "uv"


def _gradle(parts: list[str]) -> bool:
    """Gradle's locks: ``*.lock`` below a ``.gradle`` directory -- ``~/.gradle/caches/**`` and
    ``<project>/.gradle/**`` (devtool-locks.md §1, row "Gradle": POSIX lock, "an unheld file
    is harmless"; §2.7 "Gradle")."""
    return fnmatch.fnmatchcase(parts[-1], "*.lock") and ".gradle" in parts[:-1]


_RULES: tuple[tuple[str, Callable[[list[str]], bool]], ...] = (
    ("dpkg", _dpkg), ("apt", _apt), ("cargo", _cargo), ("uv", _uv), ("gradle", _gradle),
)


def anchor_tool(path: str) -> str | None:
    """The tool whose kernel-lock anchor ``path`` is, from the path alone.

    Args:
        path: a file path (absolute or relative; ``str`` or path-like).

    Returns:
        ``"dpkg"``, ``"apt"``, ``"cargo"``, ``"uv"`` or ``"gradle"`` (:data:`ANCHOR_TOOLS`), or
        ``None`` for any other path. Rules (docs/specs/devtool-locks.md §1 and §2.7):

        - dpkg: ``.../dpkg/lock``, ``.../dpkg/lock-frontend``;
        - apt: ``.../apt/archives/lock``, ``.../apt/lists/lock``;
        - cargo: ``.cargo-lock``, ``.package-cache``, ``.package-cache-mutate``, and
          ``s-*.lock`` below an ``incremental`` directory (rustc);
        - uv: ``.lock`` whose parent directory is named ``uv``;
        - gradle: ``*.lock`` below a ``.gradle`` directory.

    Never raises for the path's content (an empty path is ``None``).
    """
    parts = _parts(os.fspath(path))
    if not parts:
        return None
    for tool, rule in _RULES:
        if rule(parts):
            return tool
    return None


def is_anchor(path: str) -> bool:
    """True when ``path`` is a known tool's kernel-lock anchor (:func:`anchor_tool`)."""
    return anchor_tool(path) is not None


__all__ = ["ANCHOR_TOOLS", "anchor_tool", "is_anchor"]

