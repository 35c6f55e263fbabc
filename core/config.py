"""Lockwarden's settings: which directories to watch and how, notifications, UI choices.

Stored as TOML (DESIGN.md, "GUI" / "Settings"; issue 4, "Configuration") at
``platformdirs.user_config_dir("lockwarden")/config.toml``, overridable by an explicit path
(``--config PATH``) and the ``LOCKWARDEN_CONFIG`` environment variable::

    [[watch]]
    path = "~/projects/build"        # "~" and $VARS are expanded
    recursive = true
    patterns = ["*.lock", "*.pid", "*-lock"]
    stale_after = 3600               # seconds
    polling = "auto"                 # auto | on | off
    allow_higher_privilege = false   # Task MCP reclaim policy flags (spec 004)
    allow_emergency = false

    [notifications]
    on_stale = true
    on_expired = true
    on_acquire = false
    on_release = false
    paused = false

    [ui]
    theme = "auto"                   # auto | light | dark
    start_minimized = false
    rescan_interval = 30             # seconds between full rescans of watched directories

With no file (or no ``[[watch]]`` table in it) the platform's usual lock directories are
watched (:func:`default_watch_dirs`). :func:`load` never raises: a bad file gives warnings that
name the key and the line, and defaults for what was bad. :func:`load_strict` raises
:class:`core.errors.ConfigError` instead. :func:`save` writes atomically.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from typing import Any

import platformdirs
import tomli_w

from core.errors import ConfigError
from core.fsutil import fsync_dir

CONFIG_ENV = "LOCKWARDEN_CONFIG"
"""Environment variable naming the configuration file (overrides the platformdirs location)."""

CONFIG_NAME = "config.toml"

DEFAULT_PATTERNS: tuple[str, ...] = ("*.lock", "*.pid", "*-lock")
"""File-name patterns (fnmatch, matched against the base name) watched by default."""

POLLING_CHOICES: tuple[str, ...] = ("auto", "on", "off")
THEME_CHOICES: tuple[str, ...] = ("auto", "light", "dark")

DEFAULT_STALE_AFTER = 3600.0
"""Seconds: a lock of another tool whose holder is not alive is stale after this age (specs)."""

DEFAULT_RESCAN_INTERVAL = 30.0
"""Seconds between full rescans that heal missed file-system events (DESIGN.md, "Watching")."""


def _default_patterns() -> list[str]:
    return list(DEFAULT_PATTERNS)


@dataclass
class WatchSpec:
    """One watched directory (a ``[[watch]]`` table).

    Attributes:
        path: the directory. :func:`load` expands ``~`` and environment variables; the scanner
            and watcher expand again (:func:`expand_path`), so a spec made by hand may hold
            ``"~/locks"``.
        recursive: also watch sub-directories.
        patterns: fnmatch patterns matched against each file's base name (never against the
            absolute path: watchdog 7 would, DESIGN.md "Watching").
        stale_after: seconds; a lock of another tool whose holder is not alive is stale when
            older than this (DESIGN.md, "Default stale policy").
        polling: ``"auto"`` (poll only on network file systems or when inotify runs out of
            watches), ``"on"`` (always poll), ``"off"`` (never poll).
        allow_higher_privilege, allow_emergency: Task MCP reclaim policy flags
            (``specs/004_6119ce42cf21683e.txt``, reclaim decisions); default false.
    """

    path: str
    recursive: bool = False
    patterns: list[str] = field(default_factory=_default_patterns)
    stale_after: float = DEFAULT_STALE_AFTER
    polling: str = "auto"
    allow_higher_privilege: bool = False
    allow_emergency: bool = False

    @property
    def expanded_path(self) -> str:
        """:attr:`path` with ``~`` and environment variables expanded, made absolute and
        normalised (no trailing separator)."""
        return expand_path(self.path)


@dataclass
class NotificationSettings:
    """``[notifications]``: which lock events raise a desktop notification.

    ``on_stale``/``on_expired``: a lock becomes stale/expired; ``on_acquire``/``on_release``:
    a lock appears/disappears in a watched directory; ``paused``: "Pause notifications"."""

    on_stale: bool = True
    on_expired: bool = True
    on_acquire: bool = False
    on_release: bool = False
    paused: bool = False


@dataclass
class UISettings:
    """``[ui]``: ``theme`` (``auto``/``light``/``dark``), ``start_minimized`` (start in the
    tray), ``rescan_interval`` (seconds between full rescans, > 0)."""

    theme: str = "auto"
    start_minimized: bool = False
    rescan_interval: float = DEFAULT_RESCAN_INTERVAL


@dataclass
class Config:
    """The whole configuration.

    Attributes:
        watches: watched directories.
        notifications, ui: see :class:`NotificationSettings`, :class:`UISettings`.
        path: the file it was loaded from / will be saved to (``None``: the default path).
        warnings: problems found while loading, each naming the key and the line
            (``"config.toml line 7: watch[1].stale_after must be a number of seconds, not
            'soon'; using 3600"``). Empty when the file was fine or absent.
        watches_are_default: True when ``watches`` are the platform defaults (no ``[[watch]]``
            table in the file, or no file).
    """

    watches: list[WatchSpec] = field(default_factory=list)
    notifications: NotificationSettings = field(default_factory=NotificationSettings)
    ui: UISettings = field(default_factory=UISettings)
    path: str | None = None
    warnings: list[str] = field(default_factory=list)
    watches_are_default: bool = False


# --------------------------------------------------------------------------------------------
# paths
# --------------------------------------------------------------------------------------------


def expand_path(path: str) -> str:
    """Expand ``~`` and environment variables (``$HOME``, ``${XDG_RUNTIME_DIR}``, ``%TEMP%`` on
    Windows) in ``path``, then make it absolute and normalised."""
    return os.path.normpath(os.path.abspath(os.path.expandvars(os.path.expanduser(path))))


def default_config_path() -> str:
    """The configuration file: ``$LOCKWARDEN_CONFIG`` if set and non-empty, else
    ``platformdirs.user_config_dir("lockwarden")/config.toml``."""
    env = os.environ.get(CONFIG_ENV, "").strip()
    if env:
        return expand_path(env)
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


def default_config() -> Config:
    """The configuration used when there is no file: :func:`default_watch_dirs`, not recursive,
    default patterns; default notifications and UI."""
    return Config(
        watches=[WatchSpec(d) for d in default_watch_dirs()],
        watches_are_default=True,
    )


# --------------------------------------------------------------------------------------------
# loading
# --------------------------------------------------------------------------------------------


class _Problems:
    """Collects problems; in strict mode the first one raises ConfigError."""

    def __init__(self, text: str, label: str, strict: bool) -> None:
        self.lines = text.splitlines()
        self.label = label
        self.strict = strict
        self.warnings: list[str] = []
        self._sections = _section_spans(self.lines)

    def add(self, key: str, message: str, *, section: tuple[str, int] | None, name: str,
            fallback: str | None) -> None:
        line = self.find_line(section, name)
        where = f"{self.label} line {line}" if line else self.label
        text = f"{where}: {key}: {message}"
        if self.strict:
            raise ConfigError(text, key=key, line=line)
        self.warnings.append(f"{text}; {fallback}" if fallback else text)

    def find_line(self, section: tuple[str, int] | None, name: str) -> int | None:
        """1-based line of ``name = ...`` inside ``section`` (``("watch", 0)`` = first
        ``[[watch]]``, ``("ui", 0)`` = ``[ui]``, ``None`` = top level), else the section
        header, else ``None``."""
        span = self._sections.get(section if section else ("", 0))
        if span is None and section is not None:
            return None
        start, end, header = span if span else (0, len(self.lines), None)
        pat = re.compile(rf"^\s*(?:\"{re.escape(name)}\"|'{re.escape(name)}'|{re.escape(name)})"
                         rf"\s*=")
        for i in range(start, end):
            if pat.match(self.lines[i]):
                return i + 1
        return header


def _section_spans(lines: list[str]) -> dict[tuple[str, int], tuple[int, int, int | None]]:
    """Map ``(table name, index)`` to ``(first body line, end line, header line 1-based)``
    (0-based half-open body span). The top level is ``("", 0)``."""
    header_re = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\"' -]+?)\s*\]\]?\s*(#.*)?$")
    spans: dict[tuple[str, int], tuple[int, int, int | None]] = {}
    counts: dict[str, int] = {}
    current: tuple[str, int] = ("", 0)
    start = 0
    header: int | None = None
    for i, line in enumerate(lines):
        m = header_re.match(line)
        if not m:
            continue
        spans.setdefault(current, (start, i, header))
        name = m.group(2).strip().strip("\"'")
        idx = counts.get(name, 0)
        counts[name] = idx + 1
        current = (name, idx)
        start, header = i + 1, i + 1
    spans.setdefault(current, (start, len(lines), header))
    return spans


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _describe(v: object) -> str:
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "a table"
    if isinstance(v, list):
        return "a list"
    return repr(v)


def _parse_watch(
    raw: object, idx: int, problems: _Problems
) -> WatchSpec | None:
    sect = ("watch", idx)
    key0 = f"watch[{idx + 1}]"
    if not isinstance(raw, dict):
        problems.add(key0, f"must be a table, not {_describe(raw)}", section=None, name="watch",
                     fallback="ignored")
        return None
    path = raw.get("path")
    if not isinstance(path, str) or not path.strip() or "\0" in path:
        what = ("is missing" if path is None
                else f"must be a non-empty string (no NUL), not {_describe(path)}")
        problems.add(f"{key0}.path", what, section=sect, name="path",
                     fallback="this [[watch]] entry is ignored")
        return None
    spec = WatchSpec(path=expand_path(path.strip()))

    def bad(name: str, message: str, default: object) -> None:
        problems.add(f"{key0}.{name}", message, section=sect, name=name,
                     fallback=f"using {_describe(default)}")

    for name, value in raw.items():
        if name == "path":
            continue
        if name in ("recursive", "allow_higher_privilege", "allow_emergency"):
            if isinstance(value, bool):
                setattr(spec, name, value)
            else:
                bad(name, f"must be true or false, not {_describe(value)}", getattr(spec, name))
        elif name == "patterns":
            if isinstance(value, str) and value:
                spec.patterns = [value]
            elif isinstance(value, list) and all(isinstance(p, str) and p for p in value):
                spec.patterns = list(value)
            else:
                bad(name, f"must be a list of file-name patterns, not {_describe(value)}",
                    spec.patterns)
        elif name == "stale_after":
            if _is_number(value) and value > 0:
                spec.stale_after = float(value)
            else:
                bad(name, f"must be a positive number of seconds, not {_describe(value)}",
                    spec.stale_after)
        elif name == "polling":
            if isinstance(value, bool):
                spec.polling = "on" if value else "off"
            elif isinstance(value, str) and value.strip().lower() in POLLING_CHOICES:
                spec.polling = value.strip().lower()
            else:
                bad(name, f"must be one of auto, on, off, not {_describe(value)}", spec.polling)
        else:
            problems.add(f"{key0}.{name}", "unknown key", section=sect, name=name,
                         fallback="ignored")
    return spec


def _parse_section(
    raw: object, section: str, target: NotificationSettings | UISettings, problems: _Problems
) -> None:
    sect = (section, 0)
    if not isinstance(raw, dict):
        problems.add(section, f"must be a table, not {_describe(raw)}", section=None,
                     name=section, fallback="using defaults")
        return
    for name, value in raw.items():
        key = f"{section}.{name}"
        current = getattr(target, name, None)
        if not hasattr(target, name):
            problems.add(key, "unknown key", section=sect, name=name, fallback="ignored")
        elif isinstance(current, bool):
            if isinstance(value, bool):
                setattr(target, name, value)
            else:
                problems.add(key, f"must be true or false, not {_describe(value)}", section=sect,
                             name=name, fallback=f"using {_describe(current)}")
        elif name == "theme":
            if isinstance(value, str) and value.strip().lower() in THEME_CHOICES:
                setattr(target, name, value.strip().lower())
            else:
                problems.add(key, f"must be one of auto, light, dark, not {_describe(value)}",
                             section=sect, name=name, fallback=f"using {_describe(current)}")
        elif name == "rescan_interval":
            if _is_number(value) and value > 0:
                setattr(target, name, float(value))
            else:
                problems.add(key, f"must be a positive number of seconds, not {_describe(value)}",
                             section=sect, name=name, fallback=f"using {_describe(current)}")


def _syntax_key(lines: list[str], line: int | None) -> str | None:
    """The key assigned on ``line`` (1-based), if the line looks like ``key = value``."""
    if line is None or not 1 <= line <= len(lines):
        return None
    m = re.match(r"^\s*([A-Za-z0-9_.\"'-]+)\s*=", lines[line - 1])
    return m.group(1).strip("\"'") if m else None


def _from_text(text: str, path: str | None, *, strict: bool) -> Config:
    label = os.path.basename(path) if path else "config"
    problems = _Problems(text, label, strict)
    try:
        data = tomllib.loads(text)
    except RecursionError as exc:  # absurdly deep nesting: tomllib recurses
        what = f"{label}: invalid TOML: nested too deeply"
        if strict:
            raise ConfigError(what) from exc
        cfg = default_config()
        cfg.path = path
        cfg.warnings = [f"{what}; using the default configuration"]
        return cfg
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"at line (\d+), column (\d+)", msg)
        line = int(m.group(1)) if m else None
        key = _syntax_key(problems.lines, line)
        where = f"{label} line {line}" if line else label
        what = f"{where}: " + (f"{key}: " if key else "") + f"invalid TOML: {msg}"
        if strict:
            raise ConfigError(what, key=key, line=line) from exc
        cfg = default_config()
        cfg.path = path
        cfg.warnings = [f"{what}; using the default configuration"]
        return cfg

    cfg = Config(path=path)
    for name, value in data.items():
        if name == "watch":
            if not isinstance(value, list):
                problems.add("watch", "must be an array of [[watch]] tables, not "
                             f"{_describe(value)}", section=None, name="watch",
                             fallback="watching the default directories")
                continue
            specs = [_parse_watch(raw, i, problems) for i, raw in enumerate(value)]
            cfg.watches = [s for s in specs if s is not None]
            if value and not cfg.watches:
                problems.warnings.append(
                    f"{label}: no usable [[watch]] entry; watching the default directories")
                cfg.watches = [WatchSpec(d) for d in default_watch_dirs()]
                cfg.watches_are_default = True
        elif name == "notifications":
            _parse_section(value, "notifications", cfg.notifications, problems)
        elif name == "ui":
            _parse_section(value, "ui", cfg.ui, problems)
        else:
            problems.add(name, "unknown key", section=None, name=name, fallback="ignored")
    if "watch" not in data or not isinstance(data.get("watch"), list):
        cfg.watches = [WatchSpec(d) for d in default_watch_dirs()]
        cfg.watches_are_default = True
    cfg.warnings = problems.warnings
    return cfg


def loads(text: str, *, path: str | None = None, strict: bool = False) -> Config:
    """Parse configuration TOML ``text`` (``path`` only labels messages and is stored in
    :attr:`Config.path`). ``strict``: raise :class:`ConfigError` on the first problem instead of
    collecting warnings."""
    return _from_text(text, path, strict=strict)


def load(path: str | None = None) -> Config:
    """Load the configuration; never raises.

    Args:
        path: the file; default :func:`default_config_path` (``$LOCKWARDEN_CONFIG`` or the
            platformdirs location).

    Returns:
        The configuration. No file: defaults, no warning (the first run; :func:`save` creates
        it, and ``path`` is kept in :attr:`Config.path`). An unreadable file or a TOML syntax
        error: defaults and a warning naming the line (and the key on it). A value of the wrong
        type or out of range:
        the default for that key and a warning naming the key and its line. Unknown keys are
        ignored with a warning.
    """
    target = expand_path(path) if path is not None else default_config_path()
    try:
        with open(target, "rb") as f:
            raw = f.read()
    except FileNotFoundError:  # first run: not a problem, save() will create it
        cfg = default_config()
        cfg.path = target
        return cfg
    except (OSError, ValueError) as exc:
        cfg = default_config()
        cfg.path = target
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        cfg.warnings.append(f"{target}: cannot be read ({reason}); "
                            "using the default configuration")
        return cfg
    text = raw.decode("utf-8", errors="replace")
    return _from_text(text, target, strict=False)


def load_strict(path: str) -> Config:
    """Load ``path`` and refuse any problem.

    Raises:
        ConfigError: with ``key`` (``"watch[2].stale_after"``, ``"ui.theme"``; the key on the
            offending line for a syntax error, when there is one) and ``line`` (1-based) of the
            first problem: TOML syntax, wrong type, out-of-range value, unknown key.
        OSError: the file cannot be read (``FileNotFoundError`` when it does not exist).
    """
    target = expand_path(path)
    with open(target, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{os.path.basename(target)} line {line}: not UTF-8 text",
                          line=line) from exc
    return _from_text(text, target, strict=True)


# --------------------------------------------------------------------------------------------
# saving
# --------------------------------------------------------------------------------------------


def to_dict(config: Config) -> dict[str, Any]:
    """The TOML document for ``config`` as a dict (what :func:`save` writes)."""
    return {
        "watch": [
            {
                "path": w.path,
                "recursive": bool(w.recursive),
                "patterns": list(w.patterns),
                "stale_after": float(w.stale_after),
                "polling": w.polling,
                "allow_higher_privilege": bool(w.allow_higher_privilege),
                "allow_emergency": bool(w.allow_emergency),
            }
            for w in config.watches
        ],
        "notifications": {
            "on_stale": config.notifications.on_stale,
            "on_expired": config.notifications.on_expired,
            "on_acquire": config.notifications.on_acquire,
            "on_release": config.notifications.on_release,
            "paused": config.notifications.paused,
        },
        "ui": {
            "theme": config.ui.theme,
            "start_minimized": config.ui.start_minimized,
            "rescan_interval": float(config.ui.rescan_interval),
        },
    }


_HEADER = (
    "# Lockwarden configuration (written by Lockwarden; comments are not preserved).\n"
    "# [[watch]]: path, recursive, patterns, stale_after (s), polling (auto|on|off),\n"
    "#            allow_higher_privilege, allow_emergency\n\n"
)


def save(config: Config, path: str | None = None) -> str:
    """Write ``config`` as TOML, atomically, and return the path written.

    The file goes to ``path``, else ``config.path``, else :func:`default_config_path`; missing
    parent directories are created. Written to a temp file in the same directory, fsynced, then
    ``os.replace``-d over the old file and the directory fsynced, so a crash leaves either the
    old or the new file (this is a settings file, not a lock: replacing is what we want here).
    Comments of a hand-edited file are not preserved. An empty ``watches`` list is written as
    ``watch = []`` (watch nothing), distinct from a missing key (watch the defaults).

    Raises:
        OSError: the directory cannot be created or written.
    """
    target = expand_path(path or config.path or default_config_path())
    directory = os.path.dirname(target)
    os.makedirs(directory, exist_ok=True)
    body = _HEADER + tomli_w.dumps(to_dict(config))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp",
                               dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(body.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        if os.path.exists(target):
            try:
                os.chmod(tmp, os.stat(target).st_mode & 0o7777)
            except OSError:
                pass
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:
        fsync_dir(directory)
    except OSError:
        pass
    config.path = target
    return target
