"""Loading the configuration file: TOML to :class:`~core.config.model.Config`, with every
problem named by key and line (a warning and the default for that key, or
:class:`~core.errors.ConfigError` in strict mode).

The file's bytes are read by :func:`core.config.read.read_config_bytes` (a regular file only,
this user's own, at most 1 MiB).
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from typing import TypeGuard

from core.config.fleet import parse_fleet
from core.config.model import (
    POLLING_CHOICES,
    SERVER_KINDS,
    THEME_CHOICES,
    Config,
    LoadError,
    NotificationSettings,
    ProjectSpec,
    UISettings,
    WatchSpec,
    expand_path,
)
from core.config.model import describe_value as _describe
from core.config.platform_defaults import default_config, default_config_path, default_watches
from core.config.problems import (
    PROJECT_KEYS,
    TOP_LEVEL_TABLES,
    WATCH_KEYS,
    unknown_hint,
    unknown_key_fallback,
)
from core.config.read import read_config_bytes
from core.config.servers import parse_server
from core.errors import ConfigError
from core.text import printable


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
        # key and table names come from the file: escaped, never raw ESC (docs/cli.md,
        # "Control characters")
        text = printable(f"{where}: {key}: {message}")
        if self.strict:
            raise ConfigError(text, key=key, line=line)
        self.warnings.append(f"{text}; {printable(fallback)}" if fallback else text)

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

    def table_line(self, name: str) -> int | None:
        """1-based line of the first header of table ``name`` (``[name]``, ``[[name]]``,
        ``[name.sub]``), else of ``name = ...`` at the top level, else ``None``."""
        headers = [span[2] for (table, _), span in self._sections.items()
                   if (table == name or table.startswith(f"{name}.")) and span[2] is not None]
        return min(headers) if headers else self.find_line(None, name)

    def unknown_table(self, name: str) -> None:
        """A top-level table nobody reads (``[[wacth]]``): ``unknown table `wacth` (ignored;
        did you mean `watch`?)``, with its header's line. It stays in the file."""
        line = self.table_line(name)
        where = f"{self.label} line {line}" if line else self.label
        hint = unknown_hint(name, TOP_LEVEL_TABLES)
        text = printable(f"{where}: unknown table `{name}` (ignored{'; ' + hint if hint else ''})")
        if self.strict:
            raise ConfigError(text, key=name, line=line)
        self.warnings.append(text)


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


def _is_seconds(v: object) -> TypeGuard[int | float]:
    """A finite number of seconds > 0 (TOML allows ``inf`` and ``nan``: neither is a limit)."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0



def _table_path(raw: object, table: str, idx: int, problems: _Problems
                ) -> tuple[dict[str, object], str] | None:
    """The table ``raw`` (entry ``idx`` of ``[[table]]``) and its ``path``, expanded; ``None``
    (with the problem reported) when it is not a table or has no usable ``path``."""
    key0 = f"{table}[{idx + 1}]"
    if not isinstance(raw, dict):
        problems.add(key0, f"must be a table, not {_describe(raw)}", section=None, name=table,
                     fallback="ignored")
        return None
    path = raw.get("path")
    if not isinstance(path, str) or not path.strip() or "\0" in path:
        what = ("is missing" if path is None
                else f"must be a non-empty string (no NUL), not {_describe(path)}")
        problems.add(f"{key0}.path", what, section=(table, idx), name="path",
                     fallback=f"this [[{table}]] entry is ignored")
        return None
    return raw, expand_path(path.strip())


def _polling(value: object) -> str | None:
    """A ``polling`` string (one of :data:`POLLING_CHOICES`, any case and spacing), else
    ``None``."""
    if isinstance(value, str) and value.strip().lower() in POLLING_CHOICES:
        return value.strip().lower()
    return None


def _parse_watch(
    raw: object, idx: int, problems: _Problems
) -> WatchSpec | None:
    sect = ("watch", idx)
    key0 = f"watch[{idx + 1}]"
    table = _table_path(raw, "watch", idx, problems)
    if table is None:
        return None
    raw, path = table
    spec = WatchSpec(path=path, table_index=idx)

    def bad(name: str, message: str, default: object) -> None:
        problems.add(f"{key0}.{name}", message, section=sect, name=name,
                     fallback=f"using {_describe(default)}")

    for name, value in raw.items():
        if name == "path":
            continue
        if name in ("recursive", "allow_higher_privilege", "allow_emergency",
                    "readable_lock_files"):
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
            if _is_seconds(value):
                spec.stale_after = float(value)
            else:
                bad(name, f"must be a finite positive number of seconds, not {_describe(value)}",
                    spec.stale_after)
        elif name == "format_stale_after":
            _parse_format_limits(value, spec, key0, sect, problems)
        elif name == "polling":
            if isinstance(value, bool):
                spec.polling = "on" if value else "off"
            elif (polling := _polling(value)) is not None:
                spec.polling = polling
            else:
                bad(name, f"must be one of auto, on, off, not {_describe(value)}", spec.polling)
        else:
            problems.add(f"{key0}.{name}", "unknown key", section=sect, name=name,
                         fallback=unknown_key_fallback(name, WATCH_KEYS))
    return spec


def _parse_project(raw: object, idx: int, problems: _Problems) -> ProjectSpec | None:
    """One ``[[projects]]`` table: ``path`` (required), ``skip`` (directory-name patterns),
    ``stale_after`` (s), ``polling`` (auto | on | off)."""
    sect = ("projects", idx)
    key0 = f"projects[{idx + 1}]"
    table = _table_path(raw, "projects", idx, problems)
    if table is None:
        return None
    raw, path = table
    spec = ProjectSpec(path=path, table_index=idx)
    for name, value in raw.items():
        fallback = f"using {_describe(getattr(spec, name, None))}"
        if name == "path":
            continue
        if name == "skip":
            if isinstance(value, list) and all(isinstance(p, str) and p for p in value):
                spec.skip = list(value)
            else:
                problems.add(f"{key0}.skip", "must be a list of directory-name patterns, not "
                             f"{_describe(value)}", section=sect, name=name, fallback=fallback)
        elif name == "stale_after":
            if _is_seconds(value):
                spec.stale_after = float(value)
            else:
                problems.add(f"{key0}.stale_after", "must be a finite positive number of "
                             f"seconds, not {_describe(value)}", section=sect, name=name,
                             fallback=fallback)
        elif name == "polling":
            if (polling := _polling(value)) is not None:
                spec.polling = polling
            else:
                problems.add(f"{key0}.polling", f"must be one of auto, on, off, not "
                             f"{_describe(value)}", section=sect, name=name, fallback=fallback)
        else:
            problems.add(f"{key0}.{name}", "unknown key", section=sect, name=name,
                         fallback=unknown_key_fallback(name, PROJECT_KEYS))
    return spec


def _parse_format_limits(
    value: object, spec: WatchSpec, key0: str, sect: tuple[str, int], problems: _Problems
) -> None:
    """``format_stale_after = { "af-ledger" = 30, sema = 600 }``: per-format stale limits."""
    if not isinstance(value, dict):
        problems.add(f"{key0}.format_stale_after",
                     f"must be a table of format = seconds, not {_describe(value)}",
                     section=sect, name="format_stale_after", fallback="using the defaults")
        return
    from core.record import FORMATS  # here: reading a config needs no verdicts (`list --fleet`)

    for fmt, seconds in value.items():
        key = f"{key0}.format_stale_after.{fmt}"
        if fmt not in FORMATS:
            problems.add(key, f"unknown format (known: {', '.join(FORMATS)})",
                         section=sect, name="format_stale_after", fallback="ignored")
        elif not _is_seconds(seconds):
            problems.add(key, "must be a finite positive number of seconds, not "
                         f"{_describe(seconds)}", section=sect, name="format_stale_after",
                         fallback="using the default")
        else:
            spec.format_stale_after[fmt] = float(seconds)


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
            problems.add(key, "unknown key", section=sect, name=name,
                         fallback=unknown_key_fallback(name, vars(target)))
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
            if _is_seconds(value):
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


def _broken(path: str | None, label: str, message: str, line: int | None = None,
            column: int | None = None) -> Config:
    """The default configuration for a file that cannot be used as a whole, with its
    :class:`LoadError` and one warning saying so."""
    cfg = default_config()
    cfg.path = path
    cfg.load_error = LoadError(path or label, message, line, column)
    cfg.warnings = [f"{cfg.load_error.text()}; using the default configuration until it is "
                    "fixed (the file is left as it is)"]
    return cfg


def syntax_error(exc: tomllib.TOMLDecodeError) -> tuple[str, int | None, int | None]:
    """The parser's message without its position, and the line and column (1-based) of a
    TOML syntax error (tomllib says ``"... (at line 3, column 7)"``)."""
    msg = str(exc)
    m = re.search(r"\s*\(?at line (\d+), column (\d+)\)?\s*$", msg)
    if m is None:
        return msg, None, None
    return msg[: m.start()], int(m.group(1)), int(m.group(2))


def _from_text(text: str, path: str | None, *, strict: bool) -> Config:
    label = os.path.basename(path) if path else "config"
    problems = _Problems(text, label, strict)
    try:
        data = tomllib.loads(text)
    except RecursionError as exc:  # absurdly deep nesting: tomllib recurses
        what = f"{label}: invalid TOML: nested too deeply"
        if strict:
            raise ConfigError(what) from exc
        return _broken(path, label, "invalid TOML: nested too deeply")
    except tomllib.TOMLDecodeError as exc:
        message, line, column = syntax_error(exc)
        key = _syntax_key(problems.lines, line)
        where = f"{label} line {line}" if line else label
        what = f"{where}: " + (f"{key}: " if key else "") + f"invalid TOML: {exc}"
        if strict:
            raise ConfigError(what, key=key, line=line) from exc
        return _broken(path, label, (f"{key}: " if key else "") + f"invalid TOML: {message}",
                       line, column)

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
                cfg.watches = default_watches()
                cfg.watches_are_default = True
        elif name == "projects":
            if not isinstance(value, list):
                problems.add("projects", "must be an array of [[projects]] tables, not "
                             f"{_describe(value)}", section=None, name="projects",
                             fallback="ignored")
                continue
            projects = (_parse_project(raw, i, problems) for i, raw in enumerate(value))
            cfg.projects = [p for p in projects if p is not None]
        elif name in SERVER_KINDS:
            if not isinstance(value, list):
                problems.add(name, f"must be an array of [[{name}]] tables, not "
                             f"{_describe(value)}", section=None, name=name, fallback="ignored")
                continue
            for i, raw in enumerate(value):
                server = parse_server(name, raw, i, problems)
                if server is not None:
                    server.table_index = i
                    cfg.servers.append(server)
        elif name == "fleet":
            cfg.fleet = parse_fleet(value, problems)
        elif name == "notifications":
            _parse_section(value, "notifications", cfg.notifications, problems)
        elif name == "ui":
            _parse_section(value, "ui", cfg.ui, problems)
        elif name == "history":
            from core.config.history import parse_history

            def bad(key: str, message: str, fallback: str) -> None:
                problems.add(key, message, section=("history", 0),
                             name=key.rpartition(".")[2], fallback=fallback)

            parse_history(value, cfg.history, bad)
        elif isinstance(value, dict) or (
                isinstance(value, list) and value and all(isinstance(v, dict) for v in value)):
            problems.unknown_table(name)
        else:
            problems.add(name, "unknown key", section=None, name=name,
                         fallback=unknown_key_fallback(name, TOP_LEVEL_TABLES))
    if "watch" not in data or not isinstance(data.get("watch"), list):
        cfg.watches = default_watches()
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
        raw = read_config_bytes(target)
    except FileNotFoundError:  # first run: not a problem, save() will create it
        cfg = default_config()
        cfg.path = target
        return cfg
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return _broken(target, os.path.basename(target), f"cannot be read ({reason})")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        cfg = _from_text(raw.decode("utf-8", errors="replace"), target, strict=False)
        if cfg.load_error is None:  # usable, but never written back: that would lose bytes
            cfg.load_error = LoadError(target, "not UTF-8 text", line, column)
            cfg.warnings.insert(0, f"{cfg.load_error.text()}: Lockwarden reads it but will "
                                "not write it until it is fixed")
        return cfg
    return _from_text(text, target, strict=False)


def load_strict(path: str) -> Config:
    """Load ``path`` and refuse any problem.

    Raises:
        ConfigError: with ``key`` (``"watch[2].stale_after"``, ``"ui.theme"``; the key on the
            offending line for a syntax error, when there is one) and ``line`` (1-based) of the
            first problem: TOML syntax, wrong type, out-of-range value, unknown key.
        OSError: the file cannot be read, is not a regular file or is larger than 1 MiB
            (``FileNotFoundError`` when it does not exist).
    """
    target = expand_path(path)
    raw = read_config_bytes(target)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{os.path.basename(target)} line {line}: not UTF-8 text",
                          line=line) from exc
    return _from_text(text, target, strict=True)
