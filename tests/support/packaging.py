"""Packaging helpers (docs/packaging.md): where the installed PySide6 lives, and
packaging/lockwarden.spec executed with PyInstaller's build classes replaced by recorders (the
filter logic is what the tests check; the real build runs in .ci/run)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.support.cli import ROOT

PYSIDE_DIR = Path(importlib.util.find_spec("PySide6").origin).parent  # type: ignore[arg-type,union-attr]
"""The installed PySide6 package's directory (its ``Qt/`` holds the libraries and plugins)."""


def exec_spec(binaries: list[tuple[str, str, str]], datas: list[tuple[str, str, str]],
              monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """Execute packaging/lockwarden.spec as PyInstaller would, ``binaries`` and ``datas``
    being what its ``Analysis`` found; return what the spec made: ``analysis_kw``, one list of
    ``(args, kw)`` per build class (``PYZ``, ``EXE``, ``COLLECT``, ``BUNDLE``) and the spec's
    ``globals``. ``tmp_path`` is PyInstaller's ``workpath``; ``monkeypatch`` is the caller's
    (its platform patches apply)."""
    made: dict[str, Any] = {}

    def analysis(scripts: Any, **kw: Any) -> SimpleNamespace:
        made["analysis_kw"] = kw
        return SimpleNamespace(binaries=list(binaries), datas=list(datas), pure=[],
                               scripts=scripts)

    def record(kind: str) -> Any:
        def f(*args: Any, **kw: Any) -> SimpleNamespace:
            made.setdefault(kind, []).append((args, kw))
            return SimpleNamespace(kind=kind)
        return f

    g: dict[str, Any] = {
        "SPECPATH": str(ROOT / "packaging"), "workpath": str(tmp_path),
        "Analysis": analysis, "PYZ": record("PYZ"), "EXE": record("EXE"),
        "COLLECT": record("COLLECT"), "BUNDLE": record("BUNDLE"), "__name__": "__main__",
    }
    code = compile((ROOT / "packaging" / "lockwarden.spec").read_text(encoding="utf-8"),
                   "lockwarden.spec", "exec")
    exec(code, g)
    made["globals"] = g
    return made
