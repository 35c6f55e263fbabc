"""Every document a comment or docstring cites exists in the repository, every quoted section
of it is found there, and no code cites an issue tracker number (the tracker is not in the
repository; what an issue decided is written into docs/)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CODE_DIRS = ("core", "app", "tests", "packaging")
DOC_SEARCH = (ROOT, ROOT / "docs", ROOT / "docs" / "specs")

CITATION = re.compile(
    r"(?<![\w/.-])((?:docs/)?(?:specs/)?[A-Za-z][\w-]*(?:/[\w-]+)*\.md"
    r"|(?:docs/)?specs/[\w.-]+\.txt)"
    r"(?:,?\s*(?:§\s*\d+\s*)?[\"“]([^\"”\n]{3,80})[\"”])?"
)
ISSUE = re.compile(r"\bissues?\s*#?\d+\b", re.IGNORECASE)


def _code_files() -> list[Path]:
    files = [p for d in CODE_DIRS for p in (ROOT / d).rglob("*.py")
             if "data" not in p.parts and p != Path(__file__).resolve()]
    return sorted(files)


def _resolve(name: str) -> Path | None:
    for base in DOC_SEARCH:
        candidate = base / name
        if candidate.is_file():
            return candidate
    return None


def _flatten(text: str) -> str:
    return re.sub(r"[\s*`_#]+", " ", text).lower()


def test_cited_documents_and_sections_exist() -> None:
    missing: list[str] = []
    for path in _code_files() + sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]:
        text = path.read_text(encoding="utf-8")
        for m in CITATION.finditer(text):
            name, section = m.group(1), m.group(2)
            line = text.count("\n", 0, m.start()) + 1
            where = f"{path.relative_to(ROOT)}:{line}"
            doc = _resolve(name)
            if doc is None:
                missing.append(f"{where}: {name} is not in the repository")
            elif section and _flatten(section) not in _flatten(doc.read_text(encoding="utf-8")):
                missing.append(f"{where}: {name} has no section {section!r}")
    assert missing == [], "\n".join(missing)


def test_no_issue_numbers_in_code() -> None:
    found: list[str] = []
    for path in _code_files():
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if ISSUE.search(line) and "noqa" not in line:
                found.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert found == [], "\n".join(found)
