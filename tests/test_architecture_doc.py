"""docs/architecture.md tells the truth about the tree: its rooms table has one row per folder
of ``core/`` and ``app/`` (and no other), and each row lists exactly the modules in that folder,
so every module is in exactly one room."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
ROW = re.compile(r"^\| `((?:core|app)/(?:[\w]+/)*)` \| ([^|]+) \|", re.M)


def _documented() -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for m in ROW.finditer(DOC.read_text(encoding="utf-8")):
        # `__init__` is named only where it is a facade ("`__init__` the facade"): not a module
        names = [n for n in re.findall(r"`([\w]+)`", m.group(2)) if n != "__init__"]
        assert m.group(1) not in rows, f"{m.group(1)} has two rows"
        rows[m.group(1)] = names
    return rows


def _on_disk() -> dict[str, list[str]]:
    folders: dict[str, list[str]] = {}
    for pkg in ("core", "app"):
        for init in sorted((ROOT / pkg).rglob("__init__.py")):
            folder = init.parent
            key = str(folder.relative_to(ROOT)) + "/"
            folders[key] = sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__")
    return folders


def test_the_rooms_table_has_one_row_per_folder() -> None:
    assert sorted(_documented()) == sorted(_on_disk())


def test_each_row_lists_exactly_the_modules_of_its_folder() -> None:
    documented = _documented()
    wrong = {folder: {"missing": sorted(set(mods) - set(documented.get(folder, []))),
                      "not on disk": sorted(set(documented.get(folder, [])) - set(mods))}
             for folder, mods in _on_disk().items()
             if sorted(set(documented.get(folder, []))) != mods}
    assert wrong == {}
    for folder, names in documented.items():
        assert len(names) == len(set(names)), f"{folder} lists a module twice"
