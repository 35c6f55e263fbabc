"""README.md is written for a newcomer and cannot drift from docs/: its sections come in the
order a new user needs them, it says how to reach the ``lockwarden`` command after ``make run``,
its Guarantees stay a short summary (the rules are in docs/), its performance rows are copied
from docs/performance.md's summary as they stand (so the two never disagree), and its
Development section names every room of ``core/`` and ``app/``."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README_FILE = ROOT / "README.md"
PERFORMANCE_FILE = ROOT / "docs" / "performance.md"
README = README_FILE.read_text(encoding="utf-8")
ORDER = ("## Install and quick start", "## The app", "## Command line", "## Python API",
         "## Guarantees", "## Performance", "## Development")
GUARANTEES_MAX_LINES = 25


def _section(heading: str) -> str:
    start = README.index(heading + "\n")
    end = README.find("\n## ", start + len(heading))
    return README[start + len(heading):end if end >= 0 else None]


def test_sections_come_in_a_newcomers_order() -> None:
    places = [README.index(h + "\n") for h in ORDER]
    assert places == sorted(places), [h for _, h in sorted(zip(places, ORDER, strict=True))]


def test_it_says_how_to_reach_the_command() -> None:
    quick = _section("## Install and quick start")
    assert "make run" in quick and "make test" in quick
    assert ".venv/bin/lockwarden" in quick and "source .venv/bin/activate" in quick


def test_guarantees_are_a_short_summary() -> None:
    lines = [ln for ln in _section("## Guarantees").splitlines() if ln.strip()]
    assert len(lines) <= GUARANTEES_MAX_LINES, len(lines)
    assert "docs/" in _section("## Guarantees")


def test_performance_rows_are_docs_performance_rows_as_they_stand() -> None:
    perf = PERFORMANCE_FILE.read_text(encoding="utf-8").splitlines()
    rows = [ln for ln in _section("## Performance").splitlines() if ln.startswith("|")]
    assert len(rows) >= 4, "a header, its rule and a few headline rows"
    assert [r for r in rows if r not in perf] == []
    link = f"({PERFORMANCE_FILE.relative_to(ROOT)})"
    assert link in _section("## Performance")


def test_development_names_every_room() -> None:
    dev = _section("## Development")
    named = set(re.findall(r"`([\w/<>]+)/`", dev))
    rooms = {init.parent.name for pkg in ("core", "app")
             for init in (ROOT / pkg).rglob("__init__.py") if init.parent.name != pkg}
    assert rooms - named == set()
