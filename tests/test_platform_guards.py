"""Platform code in ``core`` and ``app`` is guarded by ``sys.platform``, the form mypy narrows,
so ``mypy --platform win32`` and ``--platform darwin`` (``make typecheck``) check the Windows and
macOS paths on a Linux machine (docs/packaging.md, "Release workflow and its validation").

Read from the source with :mod:`ast`; refused:

- ``os.name`` in a comparison (write ``sys.platform == "win32"`` or ``!= "win32"``);
- ``hasattr(m, …)``, or ``getattr(m, "function", …)``, on ``os``, ``fcntl``, ``signal``,
  ``select`` or ``socket`` outside a ``sys.platform`` guard. A feature one platform may lack at
  run time (``os.pidfd_open`` before Linux 5.3) is asked inside that platform's guard: in the
  body of an ``if`` whose test reads ``sys.platform``, or after such a test in the same
  ``and``/``or``. ``getattr`` of an upper-case constant with a default (``O_NOFOLLOW``) is fine;
- a platform-only module (``fcntl``, ``pwd``, ``msvcrt``, …) imported in a ``try`` that catches
  ``ImportError``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "app")
PROBED = {"os", "fcntl", "signal", "select", "socket"}
"""Modules whose attributes differ by platform: asking for one is a platform guard."""
PLATFORM_MODULES = {"fcntl", "grp", "msvcrt", "pwd", "resource", "termios", "winreg", "_winapi"}
"""Modules that exist on one family of platforms only."""


def _reads_platform(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "platform"
               and isinstance(n.value, ast.Name) and n.value.id == "sys" for n in ast.walk(node))


def _contains(tree: ast.AST, node: ast.AST) -> bool:
    return any(n is node for n in ast.walk(tree))


def _guarded(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """True when ``node`` runs only behind a ``sys.platform`` test: in an ``if``'s body or
    ``else``, or after the test in one ``and``/``or``."""
    child, up = node, parents.get(node)
    while up is not None:
        if isinstance(up, ast.If) and child is not up.test and _reads_platform(up.test):
            return True
        if isinstance(up, ast.BoolOp):
            before = up.values[: next(i for i, v in enumerate(up.values) if v is child)]
            if any(_reads_platform(v) for v in before):
                return True
        child, up = up, parents.get(up)
    return False


def _catches_import_error(node: ast.Try) -> bool:
    names: list[str] = []
    for handler in node.handlers:
        kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        names += [k.id for k in kinds if isinstance(k, ast.Name)]
    return bool({"ImportError", "ModuleNotFoundError"} & set(names))


def problems(source: str, where: str = "<source>") -> list[str]:
    """Every refused platform guard in ``source``, as ``"where:line: what"``."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                if (isinstance(side, ast.Attribute) and side.attr == "name"
                        and isinstance(side.value, ast.Name) and side.value.id == "os"):
                    found.append(f"{where}:{node.lineno}: os.name compared; use sys.platform")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in ("hasattr", "getattr") and len(node.args) >= 2
              and isinstance(node.args[0], ast.Name) and node.args[0].id in PROBED):
            attr = node.args[1]
            name = attr.value if isinstance(attr, ast.Constant) else None
            if node.func.id == "getattr" and isinstance(name, str) and name.isupper():
                continue  # a constant with a default: O_NOFOLLOW, SIGKILL
            if not _guarded(node, parents):
                found.append(f"{where}:{node.lineno}: {node.func.id}({node.args[0].id}, "
                             f"{name!r}) outside a sys.platform guard")
        elif isinstance(node, ast.Try) and _catches_import_error(node):
            for stmt in node.body:
                for imp in ast.walk(stmt):
                    if not isinstance(imp, (ast.Import, ast.ImportFrom)):
                        continue
                    mods = ([a.name for a in imp.names] if isinstance(imp, ast.Import)
                            else [imp.module or ""])
                    for mod in mods:
                        if mod.split(".")[0] in PLATFORM_MODULES:
                            found.append(f"{where}:{imp.lineno}: import {mod} guarded by "
                                         "ImportError; use sys.platform")
    return found


def test_core_and_app_guard_platforms_by_sys_platform() -> None:
    found: list[str] = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            found += problems(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert not found, "platform guards mypy cannot narrow:\n" + "\n".join(found)


REFUSED = [
    'import os\nif os.name == "nt":\n    pass\n',
    'import os\nPOSIX = os.name != "nt"\n',
    'import os\nif hasattr(os, "geteuid"):\n    os.geteuid()\n',
    'import select\nHAVE_POLL = hasattr(select, "poll")\n',
    'import signal\nS = [s for s in ("SIGHUP",) if hasattr(signal, s)]\n',
    'import os\nf = getattr(os, "pidfd_open", None)\n',
    'try:\n    import fcntl\nexcept ImportError:\n    fcntl = None\n',
    'def f():\n    try:\n        import pwd\n    except (ImportError, KeyError):\n        pass\n',
    'import os, sys\nif hasattr(os, "pidfd_open") and sys.platform == "linux":\n    pass\n',
]
ALLOWED = [
    'import sys\nif sys.platform == "win32":\n    pass\n',
    'import os, sys\nif sys.platform.startswith("linux") and hasattr(os, "x"):\n    pass\n',
    'import os, sys\nif not sys.platform.startswith("linux") or not hasattr(os, "x"):\n    pass\n',
    'import os, sys\nif sys.platform != "win32":\n    if hasattr(os, "x"):\n        pass\n',
    'import os\nFLAGS = getattr(os, "O_NOFOLLOW", 0)\n',
    'import sys\nif sys.platform != "win32":\n    import fcntl\n',
    'try:\n    import inotify_simple\nexcept ImportError:\n    inotify_simple = None\n',
    'class A:\n    def f(self):\n        return hasattr(self, "x")\n',
]


def test_the_scan_refuses_each_form_and_allows_the_guarded_ones() -> None:
    for source in REFUSED:
        assert problems(source), source
    for source in ALLOWED:
        assert not problems(source), (source, problems(source))
