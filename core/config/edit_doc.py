"""The ``tomlkit`` document :mod:`core.config.edit` edits: values written as TOML (seconds
without ``.0``), a key set keeping its line's indent and comment, array tables removed and
appended when the edit is finished (docs/DESIGN.md, "Nothing lost": the configuration is edited,
never regenerated).

``tomlkit`` is imported inside the functions, and this module only when saving:
``lockwarden status`` never loads it (tests/core/cli/test_cli_startup_imports.py).
"""

from __future__ import annotations

from typing import Any

__all__ = ["EditDoc", "set_key", "toml_seconds"]


def toml_seconds(v: float) -> int | float:
    """Seconds as TOML: ``3600``, not ``3600.0``."""
    return int(v) if float(v).is_integer() and abs(v) < 2**53 else float(v)



def _toml_value(key: str, value: object) -> Any:
    """A Python value as the tomlkit item written for ``key``."""
    import tomlkit

    if isinstance(value, dict):
        table = tomlkit.inline_table()
        for k, v in value.items():
            table[k] = toml_seconds(v) if isinstance(v, float) else v
        return table
    if isinstance(value, float) and (key == "stale_after" or key == "rescan_interval"):
        return toml_seconds(value)
    return value


def set_key(table: Any, key: str, value: object) -> None:
    """Set ``key`` of a tomlkit table (``None``: remove it), keeping the indent and the
    comment of the line it replaces. A new key goes right after the table's last key, above
    the blank lines and comments that end the table in the file: tomlkit counts the comment
    that introduces the next table as this one's, and a key appended there would read as the
    next table's (:func:`_after_last_key`)."""
    import tomlkit

    if value is None:
        if key in table:
            del table[key]
        return
    item = tomlkit.item(_toml_value(key, value))
    old = table.get(key)
    trivia = getattr(old, "trivia", None)
    if trivia is not None and not isinstance(value, dict):
        item.trivia.indent = trivia.indent
        item.trivia.comment_ws = trivia.comment_ws
        item.trivia.comment = trivia.comment
        item.trivia.trail = trivia.trail
    if old is None and _after_last_key(table, key, item):
        return
    table[key] = item


def _after_last_key(table: Any, key: str, item: Any) -> bool:
    """Insert the new ``key`` after ``table``'s last plain key/value (first when it has none)
    when blank lines, comments or sub-tables follow it; False when nothing follows (a plain
    append is right) or the table is not one whose lines can be told apart (an inline table,
    a tomlkit without the container's insertion)."""
    from tomlkit.items import AoT, Table

    container = getattr(table, "value", None)
    body = getattr(container, "body", None)
    insert = getattr(container, "_insert_at", None)
    if not isinstance(body, list) or insert is None:
        return False
    at = 1 + max((i for i, (k, v) in enumerate(body)
                  if k is not None and not isinstance(v, Table | AoT)), default=-1)
    if at >= len(body):
        return False
    insert(at, key, item)
    return True



class EditDoc:
    """The tomlkit document being edited, with the deferred removals of array tables."""

    def __init__(self, text: str) -> None:
        import tomlkit

        self.doc = tomlkit.parse(text)
        self.removed: dict[str, set[int]] = {}
        self.appended: dict[str, list[dict[str, object]]] = {}

    def table(self, array: str, index: int) -> Any:
        return self.doc[array][index]

    def remove(self, array: str, index: int) -> None:
        self.removed.setdefault(array, set()).add(index)

    def append(self, array: str, values: dict[str, object]) -> None:
        self.appended.setdefault(array, []).append(values)

    def section(self, name: str) -> Any:
        import tomlkit

        current = self.doc.get(name)
        if not isinstance(current, dict):
            if name in self.doc:
                del self.doc[name]
            self.doc[name] = tomlkit.table()
        return self.doc[name]

    def ensure_array(self, name: str) -> None:
        """An (empty) ``name = []`` when the file has no such array: ``watch = []`` means
        "watch nothing", unlike a missing key."""
        import tomlkit

        if not isinstance(self.doc.get(name), list):
            if name in self.doc:
                del self.doc[name]
            self.doc[name] = tomlkit.array()

    def finish(self) -> str:
        import tomlkit
        from tomlkit.items import AoT

        for name, indices in self.removed.items():
            arr = self.doc[name]
            for i in sorted(indices, reverse=True):
                del arr[i]
        for name, tables in self.appended.items():
            arr = self.doc.get(name)
            if not isinstance(arr, list):
                if name in self.doc:
                    del self.doc[name]
                arr = None
            inline = arr is not None and not isinstance(arr, AoT) and len(arr) > 0
            if arr is not None and not isinstance(arr, AoT) and not inline:
                del self.doc[name]  # an empty inline array: tables read better
                arr = None
            existing = arr is not None
            for values in tables:
                if inline:
                    item: Any = tomlkit.inline_table()
                else:
                    item = tomlkit.table()
                for k, v in values.items():
                    item[k] = _toml_value(k, v)
                if existing and not inline:
                    item.add(tomlkit.nl())  # apart from what follows the array in the file
                if arr is None:
                    if self.doc.as_string() and not self.doc.as_string().endswith("\n\n"):
                        self.doc.add(tomlkit.nl())
                    self.doc.append(name, tomlkit.aot())
                    arr = self.doc[name]
                arr.append(item)
        text: str = self.doc.as_string()
        return text

