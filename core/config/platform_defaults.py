"""The platform's defaults of the configuration: where the configuration file is
(``$LOCKWARDEN_CONFIG``, else platformdirs' user configuration directory), the usual lock
directories watched when no ``[[watch]]`` is configured, the kernel-lock anchors of dpkg/apt,
cargo and uv, and the default configuration built from them (docs/watching.md,
"Configuration").
"""

from __future__ import annotations

import os
import sys

from core.config.model import Config, WatchSpec, expand_path

__all__ = [
    "CONFIG_ENV",
    "CONFIG_NAME",
    "default_anchor_watches",
    "default_config",
    "default_config_path",
    "default_watch_dirs",
    "default_watches",
]

CONFIG_ENV = "LOCKWARDEN_CONFIG"
"""Environment variable naming the configuration file (overrides the platformdirs location)."""

CONFIG_NAME = "config.toml"


def default_config_path() -> str:
    """The configuration file: ``$LOCKWARDEN_CONFIG`` if set and non-empty, else
    ``platformdirs.user_config_dir("lockwarden")/config.toml``."""
    env = os.environ.get(CONFIG_ENV, "").strip()
    if env:
        return expand_path(env)
    import platformdirs  # here: it imports tempfile and shutil, which status does not need

    return os.path.join(platformdirs.user_config_dir("lockwarden", appauthor=False), CONFIG_NAME)


def default_watch_dirs(
    *, system: str | None = None, environ: dict[str, str] | None = None
) -> list[str]:
    """The platform's usual lock directories, watched when no ``[[watch]]`` is configured.

    - Linux (and other Unix): ``/tmp``, ``/run/lock``, ``/var/lock``, ``$XDG_RUNTIME_DIR``
      (when set). ``/var/lock`` is usually a symlink to ``/run/lock``: directories are
      deduplicated by their real path, keeping the first name.
    - macOS: ``/tmp``, ``/private/var/run``.
    - Windows: ``%TEMP%`` (else ``%TMP%``, else :func:`tempfile.gettempdir`).

    Args:
        system: ``sys.platform``-style name (``"linux"``, ``"darwin"``, ``"win32"``); default
            this machine's. For another platform nothing is checked on disk.
        environ: environment to read (default ``os.environ``).

    Returns:
        Absolute paths. On this machine's own platform, directories that do not exist are left
        out (except the first one, so the list is never empty).
    """
    env = os.environ if environ is None else environ
    native = system is None
    plat = sys.platform if system is None else system
    if plat.startswith("win"):
        import tempfile  # here: it imports shutil, which the command line's status does not need

        temp = env.get("TEMP") or env.get("TMP") or (tempfile.gettempdir() if native else "")
        candidates = [temp] if temp else []
    elif plat == "darwin":
        candidates = ["/tmp", "/private/var/run"]
    else:
        candidates = ["/tmp", "/run/lock", "/var/lock"]
        xdg = env.get("XDG_RUNTIME_DIR", "").strip()
        if xdg:
            candidates.append(xdg)
    out: list[str] = []
    seen: set[str] = set()
    for i, d in enumerate(candidates):
        key = os.path.realpath(d) if native else d
        if key in seen:
            continue
        if native and i > 0 and not os.path.isdir(d):
            continue
        seen.add(key)
        out.append(d)
    return out


def default_anchor_watches(
    *, system: str | None = None, environ: dict[str, str] | None = None
) -> list[WatchSpec]:
    """The kernel-lock anchors of dpkg/apt, cargo and uv as watches with narrow patterns,
    watched besides :func:`default_watch_dirs` when no ``[[watch]]`` is configured
    (docs/watching.md, "Configuration"). Their files are judged ``held`` or ``free``, never
    stale (:func:`core.kernel.anchors.anchor_tool`; docs/specs/devtool-locks.md §0 and §1, rows
    dpkg/apt, cargo, uv). Linux and other Unix only; nothing on Windows.

    - ``/var/lib/dpkg``: ``lock``, ``lock-frontend``; ``/var/cache/apt/archives`` and
      ``/var/lib/apt/lists``: ``lock`` (Linux-like systems only, not macOS);
    - the cargo home (``$CARGO_HOME``, else ``$HOME/.cargo``): ``.package-cache``,
      ``.package-cache-mutate``;
    - uv's cache (``$UV_CACHE_DIR``, else ``$XDG_CACHE_HOME/uv``, else ``$HOME/.cache/uv``:
      uv's own rule, platformdirs' user cache dir for "uv" on Linux): ``.lock`` -- only when
      the directory is named ``uv``, the only place :func:`core.kernel.anchors.anchor_tool` knows a
      ``.lock`` as uv's (elsewhere an unheld one would be judged an empty file left by a crash).

    Each directory is its own :class:`WatchSpec`, not recursive, so dpkg's ``status`` and the
    rest of these directories are never listed.

    Args:
        system: ``sys.platform``-style name; default this machine's. For another platform
            nothing is checked on disk.
        environ: environment to read (``HOME``, ``CARGO_HOME``, ``UV_CACHE_DIR``,
            ``XDG_CACHE_HOME``; default ``os.environ``).

    Returns:
        The watches, in the order above; on this machine's own platform only those whose
        directory exists.
    """
    env = os.environ if environ is None else environ
    native = system is None
    plat = sys.platform if system is None else system
    if plat.startswith("win"):
        return []
    home = env.get("HOME", "").strip() or (os.path.expanduser("~") if environ is None else "")
    candidates: list[tuple[str, list[str]]] = []
    if plat != "darwin":
        candidates += [("/var/lib/dpkg", ["lock", "lock-frontend"]),
                       ("/var/cache/apt/archives", ["lock"]),
                       ("/var/lib/apt/lists", ["lock"])]
    cargo = env.get("CARGO_HOME", "").strip() or (os.path.join(home, ".cargo") if home else "")
    if os.path.isabs(cargo):
        candidates.append((cargo, [".package-cache", ".package-cache-mutate"]))
    xdg = env.get("XDG_CACHE_HOME", "").strip()
    cache = xdg if os.path.isabs(xdg) else (os.path.join(home, ".cache") if home else "")
    uv = env.get("UV_CACHE_DIR", "").strip() or (os.path.join(cache, "uv") if cache else "")
    if os.path.isabs(uv) and os.path.basename(os.path.normpath(uv)) == "uv":
        candidates.append((os.path.normpath(uv), [".lock"]))
    return [WatchSpec(d, patterns=patterns) for d, patterns in candidates
            if not native or os.path.isdir(d)]


def default_watches(
    *, system: str | None = None, environ: dict[str, str] | None = None
) -> list[WatchSpec]:
    """Every watch of the default configuration: :func:`default_watch_dirs` with the default
    patterns, then :func:`default_anchor_watches` (arguments as theirs)."""
    return ([WatchSpec(d) for d in default_watch_dirs(system=system, environ=environ)]
            + default_anchor_watches(system=system, environ=environ))


def default_config() -> Config:
    """The configuration used when there is no file: :func:`default_watches` --
    :func:`default_watch_dirs` not recursive with default patterns, and the kernel-lock anchors
    of dpkg/apt, cargo and uv (:func:`default_anchor_watches`); default notifications and
    UI."""
    return Config(
        watches=default_watches(),
        watches_are_default=True,
    )

