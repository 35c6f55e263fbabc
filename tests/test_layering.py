"""The import arrows of ``core`` and ``app`` point down and never go round in a circle.

Rules (docs/DESIGN.md, "Layout"): ``app`` imports ``core``, never the reverse, not even lazily
or by a string given to :func:`importlib.import_module`; ``core`` never imports Qt; no two
modules import each other, directly or through others. The imports are read from the source
with :mod:`ast` (every ``import``, ``from … import``, and ``import_module("literal")``
anywhere in a module, including inside functions and ``TYPE_CHECKING`` blocks), so a lazy
import counts like any other.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "app")
QT_ROOTS = ("PySide6", "shiboken6", "PyQt5", "PyQt6")


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imported_names(name: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every module name ``name`` imports, with the line, resolving relative imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            yield module, node.lineno
            for alias in node.names:  # ``from core.engine import lock`` imports core.engine.lock
                yield f"{module}.{alias.name}", node.lineno
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if called in ("import_module", "__import__") and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    yield arg.value, node.lineno


def _graph() -> tuple[dict[str, set[str]], list[str]]:
    """Edges between our own modules, and the list of forbidden upward/Qt arrows."""
    modules = _modules()
    edges: dict[str, set[str]] = {m: set() for m in modules}
    wrong: list[str] = []
    for name, path in modules.items():
        for target, line in _imported_names(name, path):
            root = target.split(".")[0]
            where = f"{path.relative_to(ROOT)}:{line} imports {target}"
            if name.split(".")[0] == "core" and (root == "app" or root in QT_ROOTS):
                wrong.append(where)
            if target in modules and target != name:
                edges[name].add(target)
    return edges, wrong


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _package_edge(a: str, b: str) -> bool:
    """``core.formats.sema`` importing its own package ``core.formats`` (or the reverse) is how
    Python packages work; only circles between sibling modules count."""
    return a.startswith(b + ".") or b.startswith(a + ".")


def test_core_never_imports_app_or_qt() -> None:
    _, wrong = _graph()
    assert wrong == [], "upward arrows:\n" + "\n".join(wrong)


def test_no_import_circles() -> None:
    edges, _ = _graph()
    pruned = {a: {b for b in bs if not _package_edge(a, b)} for a, bs in edges.items()}
    circles = _circles(pruned)
    assert circles == [], "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


def test_the_checker_sees_lazy_imports_and_circles(tmp_path: Path) -> None:
    """The checker itself: a function-level import and an import_module string both count."""
    src = tmp_path / "m.py"
    src.write_text("def f():\n    import app.main\n    importlib.import_module('app.tray')\n")
    names = [n for n, _ in _imported_names("core.m", src)]
    assert names == ["app.main", "app.tray"]
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []


# --- rooms (docs/architecture.md "Rooms") -----------------------------------------------------

#: core's rooms from the bottom up: a module imports only its own room or rooms below it.
#: ``""`` is core's root, the shared vocabulary every room speaks.
CORE_ROOMS = ("", "kernel", "formats", "config", "audit", "verdicts", "engine", "watch",
              "history", "remote", "fleet", "cli")
#: app's rooms from the bottom up (docs/architecture.md "Rooms"). ``""`` is app's root: the
#: entry points, the application that builds every part, the main window and the tray; only
#: ``shots`` (the screenshots, run as a script) stands above it.
APP_ROOMS = ("style", "table", "bridges", "startup", "dialogs", "fleet", "history", "actions",
             "frame", "", "shots")
#: The most modules app's root may hold (``__init__`` and ``__main__`` included).
APP_ROOT_MAX = 15
#: The only modules at core's root: the vocabulary (and the package's own entry points).
VOCABULARY = {"core", "core.__main__", "core.record", "core.codes", "core.reasons", "core.errors",
              "core.defaults", "core.stale_policy", "core.fsutil", "core.tempfiles",
              "core.holder", "core.tools", "core.text", "core.seam"}
#: Calls that link, unlink or rename a file.
FILE_MOVES = {"link", "unlink", "remove", "rename", "replace", "renames", "rmdir", "symlink"}
#: Modules outside core/engine/ that may move files, and the file they move: none of them is
#: in a lock directory.
MOVES_ALLOWED = {
    "core/config/edit.py": "the configuration file, replaced atomically when saved",
    "core/audit/heads.py": "this user's audit chain heads in the per-user data directory",
}


def _room(module: str) -> str:
    """``core.engine.lock`` -> ``engine``; ``core.record`` and ``core`` -> ``""`` (the root).
    ``core.__main__`` (``python -m core``) is the command line's entry point: room ``cli``.
    For app: ``app.table.model`` -> ``table``; ``app.window`` and ``app`` -> ``""``."""
    parts = module.split(".")
    if parts[0] == "app":
        return parts[1] if len(parts) > 2 or (len(parts) == 2 and (ROOT / "app" / parts[1])
                                                .is_dir()) else ""
    if parts[0] != "core":
        return "outside"
    if module == "core.__main__":
        return "cli"
    if len(parts) == 1 or module in VOCABULARY:
        return ""
    return parts[1]


def test_every_core_room_is_known_and_the_root_holds_only_the_vocabulary() -> None:
    modules = [m for m in _modules() if m.startswith("core")]
    rooms = {_room(m) for m in modules}
    assert rooms <= set(CORE_ROOMS), f"rooms not in CORE_ROOMS: {rooms - set(CORE_ROOMS)}"
    root = {m for m in modules if m.count(".") == 1 and not (ROOT / "core" /
            m.split(".")[1]).is_dir()} | {"core"}
    assert root == VOCABULARY, f"core's root must hold only the vocabulary: {root ^ VOCABULARY}"


def test_a_module_imports_only_its_own_room_or_rooms_below() -> None:
    edges, _ = _graph()
    order = {room: i for i, room in enumerate(CORE_ROOMS)}
    upward = [f"{a} ({_room(a) or 'root'}) imports {b} ({_room(b) or 'root'})"
              for a, targets in edges.items() if a.startswith("core")
              for b in targets if b.startswith("core") and order[_room(b)] > order[_room(a)]]
    assert upward == [], "upward arrows between rooms:\n" + "\n".join(sorted(upward))


def _file_moves(path: Path) -> list[int]:
    """Lines of ``path`` that call ``os.link/unlink/rename/...`` or a pathlib ``.unlink()``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner = node.func.value
        name = node.func.attr
        if (isinstance(owner, ast.Name) and owner.id == "os" and name in FILE_MOVES) or (
                name == "unlink" and not node.args):
            lines.append(node.lineno)
    return lines


def test_only_the_engine_links_unlinks_or_renames_files() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}"
             for name, path in _modules().items() if name.startswith("core")
             and not name.startswith("core.engine")
             and str(path.relative_to(ROOT)) not in MOVES_ALLOWED
             for line in _file_moves(path)]
    assert found == [], "file moves outside core/engine/:\n" + "\n".join(found)
    assert _file_moves(ROOT / "core" / "engine" / "cleanup.py"), "the checker sees os.unlink"


def test_every_app_room_is_known_and_the_root_stays_small() -> None:
    modules = [m for m in _modules() if m.startswith("app")]
    rooms = {_room(m) for m in modules}
    assert rooms <= set(APP_ROOMS), f"rooms not in APP_ROOMS: {rooms - set(APP_ROOMS)}"
    root = sorted(p.name for p in (ROOT / "app").glob("*.py"))
    assert len(root) <= APP_ROOT_MAX, f"{len(root)} modules at app's root: {root}"


def test_an_app_module_imports_only_its_own_room_or_rooms_below() -> None:
    edges, _ = _graph()
    order = {room: i for i, room in enumerate(APP_ROOMS)}
    upward = [f"{a} ({_room(a) or 'root'}) imports {b} ({_room(b) or 'root'})"
              for a, targets in edges.items() if a.startswith("app.") or a == "app"
              for b in targets if b.startswith("app") and not _package_edge(a, b)
              and order[_room(b)] > order[_room(a)]]
    assert upward == [], "upward arrows between app's rooms:\n" + "\n".join(sorted(upward))


#: core's internals the app may not reach: it talks to a room through the names the room
#: publishes (docs/DESIGN.md, "Layout"). A module here is one room's private machinery.
CORE_PRIVATE = {"core.watch.tree", "core.watch.scan", "core.watch.walk", "core.watch.sources",
                "core.watch.directories", "core.watch.rounds", "core.watch.rejudge",
                "core.watch.messages",
                "core.watch.processes", "core.watch.watched_dir", "core.engine.publish",
                "core.engine.takeover", "core.engine.exchange", "core.engine.remove",
                "core.engine.waiting", "core.kernel.table", "core.kernel.getlk",
                "core.audit.appender", "core.audit.heads", "core.audit.write"}


def test_the_app_reaches_core_through_its_rooms_public_names() -> None:
    edges, _ = _graph()
    private = [f"{a} imports {b}" for a, targets in edges.items() if a.startswith("app")
               for b in targets if b in CORE_PRIVATE]
    assert private == [], "the app reaches into core's internals:\n" + "\n".join(sorted(private))
