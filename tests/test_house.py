"""The tests share, they do not import each other: helpers live in tests/support/ by job,
fixtures in a conftest.py (tests/conftest.py for the whole suite), and no Python file under
tests/ (a test module, a conftest, a support module, a benchmark) imports a test module or a
conftest. A test module imported by another runs its module-level code twice under two names,
registers its fixtures twice, and ties one room's tests to another's file layout.

The imports are read with :mod:`ast`, as tests/test_layering.py reads core's and app's: every
``import``, ``from … import`` and ``import_module("literal")``, inside functions too."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def _is_test_module(name: str) -> bool:
    """``tests.…test_x`` or ``tests.…conftest``: a module pytest collects or loads itself."""
    parts = name.split(".")
    return parts[0] == "tests" and len(parts) > 1 and (
        parts[-1].startswith("test_") or parts[-1] == "conftest")


@functools.cache
def _tree(source: str, filename: str) -> ast.Module:
    """``source`` parsed (once: both checks read every file)."""
    return ast.parse(source, filename=filename)


def _imports(source: str, filename: str) -> Iterator[tuple[str, int]]:
    """Every module name ``source`` imports, with its line (``from a import b`` yields ``a``
    and ``a.b``: b may be a module)."""
    for node in ast.walk(_tree(source, filename)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module, node.lineno
            for alias in node.names:
                yield f"{node.module}.{alias.name}", node.lineno
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called in ("import_module", "__import__") and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    yield arg.value, node.lineno


def _test_imports(source: str, filename: str) -> list[str]:
    """``filename:line imports name`` for each test module or conftest ``source`` imports."""
    return sorted({f"{filename}:{line} imports {name}" for name, line in _imports(source, filename)
                   if _is_test_module(name)})


def _python_files() -> list[Path]:
    """Every Python file under tests/ but the data (which holds other tools' files)."""
    return [p for p in sorted(TESTS.rglob("*.py")) if "data" not in p.relative_to(TESTS).parts]


def test_no_file_under_tests_imports_a_test_module_or_a_conftest() -> None:
    wrong = [w for p in _python_files()
             for w in _test_imports(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT)))]
    assert wrong == [], ("a shared helper belongs in tests/support/, a shared fixture in a "
                         "conftest.py:\n" + "\n".join(wrong))


def test_the_support_modules_import_no_test_module() -> None:
    support = sorted((TESTS / "support").glob("*.py"))
    assert len(support) > 5  # the check reads the real folder
    wrong = [w for p in support
             for w in _test_imports(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT)))]
    assert wrong == []


def test_the_check_sees_every_form_of_import() -> None:
    src = (
        "import tests.core.cli.test_cli\n"
        "from tests.core.cli.test_cli import lw\n"
        "from tests.app import test_tray_xvfb\n"
        "from tests.remote.conftest import own_audit_log\n"
        "def f():\n"
        "    from tests.core.watch.test_watch import watch\n"
        "    importlib.import_module('tests.test_layering')\n"
        "from tests.support.cli import lw\n"  # allowed: a support module
        "from tests.support import servers\n"  # allowed
        "import test_something_else\n"  # not ours
        "from core.cli import test_mode\n"  # not under tests
    )
    assert _test_imports(src, "x.py") == [
        "x.py:1 imports tests.core.cli.test_cli", "x.py:2 imports tests.core.cli.test_cli",
        "x.py:3 imports tests.app.test_tray_xvfb", "x.py:4 imports tests.remote.conftest",
        "x.py:6 imports tests.core.watch.test_watch", "x.py:7 imports tests.test_layering",
    ]


def test_the_command_line_runner_is_defined_once() -> None:
    """``lw`` (``python -m core ARGS``) lives in tests/support/cli.py; a second copy drifts
    (its environment, its timeout) from the first."""
    where = []
    for p in _python_files():
        for node in ast.walk(_tree(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT)))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "lw":
                where.append(str(p.relative_to(TESTS)))
    assert set(where) == {"support/cli.py"}, where
