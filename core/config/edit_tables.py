"""How each kind of configuration table maps to what :mod:`core.config.edit` merges: per
kind (``[[watch]]``, ``[[projects]]``, the server arrays) the fields compared, the table written
for a new spec, the key that matches a spec to its table (the expanded ``path``; a server's URL,
etcd's endpoints) and the label a conflict names; and the matching of specs between two sides
(docs/DESIGN.md, "Nothing lost": the configuration is edited, never regenerated).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from core.config.edit_doc import toml_seconds
from core.config.model import ProjectSpec, ServerSpec, WatchSpec, expand_path
from core.config.servers import server_to_dict

__all__ = ["PROJECTS_ARRAY", "WATCH_ARRAY", "Spec", "TableArray", "match_specs",
           "server_array"]

Spec = WatchSpec | ProjectSpec | ServerSpec


def _watch_fields(w: Spec) -> dict[str, object]:
    assert isinstance(w, WatchSpec)
    return {"path": expand_path(w.path), "recursive": bool(w.recursive),
            "patterns": list(w.patterns), "stale_after": float(w.stale_after),
            "polling": w.polling, "allow_higher_privilege": bool(w.allow_higher_privilege),
            "allow_emergency": bool(w.allow_emergency),
            "readable_lock_files": bool(w.readable_lock_files),
            "format_stale_after": {k: float(v) for k, v in sorted(w.format_stale_after.items())}}


def _watch_new(w: Spec) -> dict[str, object]:
    assert isinstance(w, WatchSpec)
    out: dict[str, object] = {"path": w.path, "recursive": bool(w.recursive),
                              "patterns": list(w.patterns),
                              "stale_after": toml_seconds(w.stale_after), "polling": w.polling}
    if w.allow_higher_privilege:
        out["allow_higher_privilege"] = True
    if w.allow_emergency:
        out["allow_emergency"] = True
    if w.readable_lock_files:
        out["readable_lock_files"] = True
    if w.format_stale_after:
        out["format_stale_after"] = {k: toml_seconds(v)
                                     for k, v in sorted(w.format_stale_after.items())}
    return out


def _project_fields(p: Spec) -> dict[str, object]:
    assert isinstance(p, ProjectSpec)
    return {"path": expand_path(p.path), "skip": list(p.skip),
            "stale_after": float(p.stale_after), "polling": p.polling}


def _project_new(p: Spec) -> dict[str, object]:
    assert isinstance(p, ProjectSpec)
    return {"path": p.path, "skip": list(p.skip), "stale_after": toml_seconds(p.stale_after),
            "polling": p.polling}


def _server_fields(s: Spec) -> dict[str, object]:
    assert isinstance(s, ServerSpec)
    out: dict[str, object]
    if s.kind == "postgres":
        out = {"dsn": s.url}
    elif s.kind == "redis":
        out = {"url": s.url, "profiles": list(s.profiles), "patterns": list(s.patterns),
               "notifications": bool(s.notifications)}
    else:
        out = {"endpoints": list(s.endpoints), "prefix": s.prefix, "username": s.username}
    out.update(password_env=s.password_env, keyring=bool(s.keyring),
               stale_after=float(s.stale_after), deadline=float(s.deadline))
    return out


def _server_new(s: Spec) -> dict[str, object]:
    assert isinstance(s, ServerSpec)
    out = server_to_dict(s)
    out["stale_after"] = toml_seconds(s.stale_after)
    return out


def _path_key(s: Spec) -> object:
    assert isinstance(s, WatchSpec | ProjectSpec)
    return expand_path(s.path)


def _server_key(s: Spec) -> object:
    assert isinstance(s, ServerSpec)
    return (s.kind, tuple(s.endpoints) if s.kind == "etcd" else s.url)


@dataclass(frozen=True)
class TableArray:
    """One array of tables of the file and how its specs map to it."""

    name: str
    fields: Callable[[Spec], dict[str, object]]
    new_table: Callable[[Spec], dict[str, object]]
    key: Callable[[Spec], object]
    label: Callable[[Spec], str]


def _path_label(name: str) -> Callable[[Spec], str]:
    def label(s: Spec) -> str:
        assert isinstance(s, WatchSpec | ProjectSpec)
        return f"{name} {s.path}"
    return label


def _server_label(s: Spec) -> str:
    assert isinstance(s, ServerSpec)
    return f"{s.kind} {s.url or ', '.join(s.endpoints)}"


WATCH_ARRAY = TableArray("watch", _watch_fields, _watch_new, _path_key, _path_label("watch"))
PROJECTS_ARRAY = TableArray("projects", _project_fields, _project_new, _path_key,
                   _path_label("projects"))


def server_array(kind: str) -> TableArray:
    return TableArray(kind, _server_fields, _server_new, _server_key, _server_label)



def match_specs(left: Sequence[Spec], right: Sequence[Spec], key: Callable[[Spec], object], *,
           by_index: bool) -> dict[int, int]:
    """Pair items of ``left`` with items of ``right`` (positions): first by ``table_index``
    (when ``by_index``), then by ``key``, in order."""
    pairs: dict[int, int] = {}
    used: set[int] = set()
    if by_index:
        where = {r.table_index: j for j, r in enumerate(right) if r.table_index is not None}
        for i, item in enumerate(left):
            j = where.get(item.table_index) if item.table_index is not None else None
            if j is not None and j not in used:
                pairs[i] = j
                used.add(j)
    for i, item in enumerate(left):
        if i in pairs:
            continue
        k = key(item)
        for j, other in enumerate(right):
            if j not in used and key(other) == k:
                pairs[i] = j
                used.add(j)
                break
    return pairs

