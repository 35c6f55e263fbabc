"""At most :data:`MAX_LONG` functions of ``core`` and ``app`` run over :data:`LONG` lines
(``end_lineno - lineno + 1`` of each ``def``, docstring included, read with :mod:`ast`): a
long function is split into named helpers, and one that stays long says why at its ``def``."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LONG = 80
MAX_LONG = 4


def test_few_long_functions() -> None:
    long: list[str] = []
    for pkg in ("core", "app"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    n = (node.end_lineno or node.lineno) - node.lineno + 1
                    if n > LONG:
                        long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({n})")
    assert len(long) <= MAX_LONG, "\n".join(long)
