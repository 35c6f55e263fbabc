"""Writing the configuration by editing the file that is there, never regenerating it
(docs/DESIGN.md, "Nothing lost").

:func:`write` reads the file again just before writing, parses it with ``tomlkit`` and changes
only what the caller changed, from ``base`` (what it started from) to ``new``: a three-way merge
per key against the file as it is now. A key both sides changed is a :class:`Conflict`: unless
``prefer_mine``, nothing is written and :class:`ConfigConflict` lists them. A file that does not
parse is never overwritten (:class:`ConfigUnparsable`: line and column); one that cannot be read
raises :class:`OSError`. Rules (how tables are matched, what stays byte for byte, atomic
writes): docs/watching.md, "Configuration" ("Saving edits the file, never regenerates it").

How each kind of table maps to fields is :mod:`core.config.edit_tables`; the ``tomlkit``
document edited is :mod:`core.config.edit_doc`. ``tomlkit`` is imported there only, and these
modules only when saving (tests/core/cli/test_cli_startup_imports.py).
"""

from __future__ import annotations

import os
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass

from core.config.edit_doc import EditDoc, set_key
from core.config.edit_tables import (
    PROJECTS_ARRAY,
    WATCH_ARRAY,
    Spec,
    TableArray,
    match_specs,
    server_array,
)
from core.config.load import _from_text, syntax_error
from core.config.model import SERVER_KINDS, Config, expand_path
from core.config.platform_defaults import default_config
from core.config.read import read_config_bytes
from core.errors import ConfigError
from core.fsutil import fsync_dir

__all__ = ["HEADER", "ConfigConflict", "ConfigUnparsable", "Conflict", "edit_text", "write"]

HEADER = (
    "# Lockwarden configuration (docs/watching.md, \"Configuration\"). Lockwarden edits this\n"
    "# file in place: comments and tables it does not know are kept.\n"
    "# [[watch]]: path, recursive, patterns, stale_after (s), polling (auto|on|off),\n"
    "#            allow_higher_privilege, allow_emergency, readable_lock_files,\n"
    "#            format_stale_after = { format = seconds }\n"
    "# [[projects]]: path, skip (directory names), stale_after (s), polling\n"
    "# [[postgres]] dsn, [[redis]] url/profiles/patterns, [[etcd]] endpoints/prefix/username:\n"
    "#            password_env or keyring (never a password), stale_after (s)\n\n"
)
"""The comment a new configuration file starts with."""

_OLD_FIRST_LINE = ("# Lockwarden configuration (written by Lockwarden; comments are not "
                   "preserved).\n")
"""The first line earlier versions wrote: no longer true, so it is replaced when met."""

_NEW_FIRST_LINE = ("# Lockwarden configuration (edited in place by Lockwarden: comments and "
                   "tables it does not know are kept).\n")

_RETRIES = 3
"""How many times :func:`write` merges again when the file changes between its read and its
replacement."""


class ConfigUnparsable(ConfigError):
    """The configuration file does not parse (TOML syntax, not UTF-8): it is not overwritten.

    Attributes:
        path: the file.
        line, column: where the parser stopped (1-based), or None.
        problem: the parser's words without the position.
    """

    def __init__(self, path: str, problem: str, line: int | None, column: int | None) -> None:
        self.path = path
        self.problem = problem
        self.column = column
        where = path + (f" line {line}" if line is not None else "") + (
            f", column {column}" if column is not None else "")
        super().__init__(f"{where}: {problem}; the file was left as it is: fix it (or move it "
                         "away) and save again", line=line)


@dataclass(frozen=True)
class Conflict:
    """One key both the caller and someone else (the file on disk) changed, differently.

    Attributes:
        where: the table (``"watch /srv/locks"``, ``"redis redis://cache:6379/0"``, ``"ui"``).
        key: the key in that table, or ``""`` for the whole table (removed on one side).
        file: what the file says now (None: the key or table is no longer there).
        mine: what the caller wants (None: removed).
    """

    where: str
    key: str
    file: object
    mine: object

    def text(self) -> str:
        """One line: ``watch /srv/locks, stale_after: the file now says 600; yours says
        1200``."""
        what = f"{self.where}, {self.key}" if self.key else self.where
        theirs = "removed" if self.file is None else f"says {_describe(self.file)}"
        mine = "removes it" if self.mine is None else f"says {_describe(self.mine)}"
        if not self.key:
            theirs = "removed it" if self.file is None else "changed it"
            mine = "removes it" if self.mine is None else "changed it"
        return f"{what}: the file {'now ' if self.key else ''}{theirs}; yours {mine}"


class ConfigConflict(ConfigError):
    """The file changed on disk since ``base`` was read, and some keys were changed on both
    sides. Nothing was written.

    Attributes:
        conflicts: each key both sides changed (:class:`Conflict`).
    """

    def __init__(self, path: str, conflicts: Sequence[Conflict]) -> None:
        self.conflicts = tuple(conflicts)
        super().__init__(f"{path} was changed by someone else since it was read, and "
                         + "; ".join(c.text() for c in self.conflicts))


def _describe(v: object) -> str:
    """A value as a conflict names it: ``600`` (seconds without ``.0``), ``true``, ``'dark'``,
    ``['*.lock']``."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_describe(x)}" for k, x in v.items()) + "}"
    return repr(v)


# -- the merge ----------------------------------------------------------------------------------


def _merge_array(doc: EditDoc, arr: TableArray, base: Sequence[Spec], new: Sequence[Spec],
                 cur: Sequence[Spec], *, base_is_cur: bool, conflicts: list[Conflict]) -> None:
    """Three-way merge of one array of tables into ``doc``."""
    b2n = match_specs(base, new, arr.key, by_index=True)
    b2c = match_specs(base, cur, arr.key, by_index=base_is_cur)
    for i, b in enumerate(base):
        n = new[b2n[i]] if i in b2n else None
        c = cur[b2c[i]] if i in b2c else None
        bf = arr.fields(b)
        if n is None:
            if c is None:
                continue
            if arr.fields(c) == bf:
                doc.remove(arr.name, _index(c))
            else:
                conflicts.append(Conflict(arr.label(c), "", arr.fields(c), None))
                doc.remove(arr.name, _index(c))
            continue
        nf = arr.fields(n)
        if c is None:
            if nf != bf:  # edited here, removed there
                conflicts.append(Conflict(arr.label(n), "", None, nf))
                doc.append(arr.name, arr.new_table(n))
            continue
        cf = arr.fields(c)
        new_table = arr.new_table(n)
        table = doc.table(arr.name, _index(c))
        for key, nv in nf.items():
            bv, cv = bf.get(key), cf.get(key)
            if nv == bv or cv == nv:
                continue
            if cv != bv:
                conflicts.append(Conflict(arr.label(c), key, cv, nv))
            set_key(table, key, new_table.get(key))
    matched_new = set(b2n.values())
    matched_cur = set(b2c.values())
    extra_cur = [c for j, c in enumerate(cur) if j not in matched_cur]
    for j, n in enumerate(new):
        if j in matched_new:
            continue
        nf = arr.fields(n)
        same = next((c for c in extra_cur if arr.fields(c) == nf), None)
        if same is not None:  # someone added the very same table meanwhile
            extra_cur.remove(same)
            continue
        doc.append(arr.name, arr.new_table(n))


def _index(spec: Spec) -> int:
    assert spec.table_index is not None, "a spec read from the file has its table's index"
    return spec.table_index


def _section_fields(config: Config, name: str) -> dict[str, object]:
    if name == "notifications":
        n = config.notifications
        return {"on_stale": n.on_stale, "on_expired": n.on_expired, "on_acquire": n.on_acquire,
                "on_release": n.on_release, "paused": n.paused}
    u = config.ui
    return {"theme": u.theme, "start_minimized": u.start_minimized,
            "rescan_interval": float(u.rescan_interval)}


def _merge(doc: EditDoc, base: Config, new: Config, cur: Config, *, base_is_cur: bool
           ) -> list[Conflict]:
    conflicts: list[Conflict] = []
    watches_same = (new.watches == base.watches
                    and new.watches_are_default == base.watches_are_default)
    if not watches_same:
        base_w = [] if base.watches_are_default else base.watches
        cur_w = [] if cur.watches_are_default else cur.watches
        _merge_array(doc, WATCH_ARRAY, base_w, new.watches, cur_w, base_is_cur=base_is_cur,
                     conflicts=conflicts)
        if not new.watches and not cur_w:
            doc.ensure_array("watch")
    if new.projects != base.projects:
        _merge_array(doc, PROJECTS_ARRAY, base.projects, new.projects, cur.projects,
                     base_is_cur=base_is_cur, conflicts=conflicts)
    for kind in SERVER_KINDS:
        b = [s for s in base.servers if s.kind == kind]
        n = [s for s in new.servers if s.kind == kind]
        if n != b:
            _merge_array(doc, server_array(kind), b, n,
                         [s for s in cur.servers if s.kind == kind],
                         base_is_cur=base_is_cur, conflicts=conflicts)
    for name in ("notifications", "ui"):
        bf, nf, cf = (_section_fields(c, name) for c in (base, new, cur))
        for key, nv in nf.items():
            bv, cv = bf[key], cf[key]
            if nv == bv or cv == nv:
                continue
            if cv != bv:
                conflicts.append(Conflict(name, key, cv, nv))
            set_key(doc.section(name), key, nv)
    return conflicts


def _parse_current(text: str | None, path: str) -> Config:
    """The configuration the file holds now (the defaults, with no file)."""
    if text is None:
        cfg = default_config()
        cfg.path = path
        return cfg
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        problem, line, column = syntax_error(exc)
        raise ConfigUnparsable(path, f"invalid TOML: {problem}", line, column) from None
    except RecursionError:
        raise ConfigUnparsable(path, "invalid TOML: nested too deeply", None, None) from None
    return _from_text(text, path, strict=False)


def edit_text(text: str | None, new: Config, base: Config | None, *, path: str = "config.toml",
              prefer_mine: bool = False) -> str:
    """The file's new text: ``text`` (None: no file yet) with the changes from ``base`` to
    ``new`` merged in (see the module). ``base`` None: the file's own content is the base, so
    the result says what ``new`` says, keeping the comments and formatting of what did not
    change and every table ``new`` does not name... except that tables of ``[[watch]]``,
    ``[[projects]]`` and the server arrays that ``new`` lacks are removed.

    Raises:
        ConfigUnparsable: ``text`` is not valid TOML.
        ConfigConflict: both sides changed a key and ``prefer_mine`` is False.
    """
    cur = _parse_current(text, path)
    source = text if text is not None else HEADER
    if source.startswith(_OLD_FIRST_LINE):
        source = _NEW_FIRST_LINE + source[len(_OLD_FIRST_LINE):]
    try:
        doc = EditDoc(source)
    except Exception as exc:  # tomlkit refuses what tomllib took: never guess, never write
        raise ConfigUnparsable(path, f"cannot be edited ({exc})", None, None) from None
    conflicts = _merge(doc, cur if base is None else base, new, cur,
                       base_is_cur=base is None)
    if conflicts and not prefer_mine:
        raise ConfigConflict(path, conflicts)
    out = doc.finish()
    if text is None and out == HEADER:
        return out
    try:
        tomllib.loads(out)
    except tomllib.TOMLDecodeError as exc:  # a bug here: never write what cannot be read
        raise ConfigError(f"{path}: the edited configuration would not parse ({exc}); "
                          "nothing was written") from None
    return out


def _read_text(path: str) -> tuple[str | None, bytes | None]:
    """The file's text and bytes (None, None: no file).

    Raises:
        ConfigUnparsable: not UTF-8.
        OSError: not a regular file, too large, unreadable.
    """
    try:
        raw = read_config_bytes(path)
    except FileNotFoundError:
        return None, None
    try:
        return raw.decode("utf-8"), raw
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigUnparsable(path, "not UTF-8 text", line, column) from None


def write(new: Config, path: str, *, base: Config | None = None,
          prefer_mine: bool = False) -> Config:
    """Edit the configuration file at ``path`` from ``base`` to ``new`` (see the module) and
    return the configuration it now holds, as :func:`core.config.load` reads it (with the
    ``table_index`` of the tables written, for the next edit).

    The file is read again just before it is replaced; when it changed meanwhile the merge
    is done again (up to :data:`_RETRIES` times). Written to a temp file in the same
    directory, fsynced, ``os.replace``-d over the old one (its permissions kept) and the
    directory fsynced: a crash leaves the old or the new file. Nothing is written when the
    text would not change.

    Raises:
        ConfigUnparsable: the file does not parse (TOML syntax, not UTF-8); not overwritten.
        ConfigConflict: both sides changed a key (``prefer_mine`` False); nothing written.
        ConfigError: the edited text would not parse (a bug; nothing written).
        OSError: the file cannot be read (not a regular file, too large, permission) or
            the directory cannot be written.
    """
    target = expand_path(path)
    directory = os.path.dirname(target)
    for _attempt in range(_RETRIES):
        text, raw = _read_text(target)
        out = edit_text(text, new, base, path=target, prefer_mine=prefer_mine)
        if out == text:
            return _from_text(out, target, strict=False)
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp",
                                   dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(out.encode("utf-8"))
                f.flush()
                os.fsync(f.fileno())
            if raw is not None:
                try:
                    os.chmod(tmp, os.stat(target).st_mode & 0o7777)
                except OSError:
                    pass
            again, _ = _read_text(target)
            if again != text:  # changed while we merged: merge again with what is there now
                os.unlink(tmp)
                continue
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
        return _from_text(out, target, strict=False)
    raise ConfigError(f"{target} keeps changing while Lockwarden writes it; nothing was "
                      "written: try again")

