"""`import core` must work with PySide6 unavailable (docs/DESIGN.md, "Layout": one engine, no
Qt)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

CORE_MODULES = [
    "core",
    "core.errors",
    "core.record",
    "core.fsutil",
    "core.formats",
    "core.formats.sema",
    "core.formats.af",
    "core.formats.taskmcp",
    "core.formats.pidfile",
    "core.verdicts.liveness",
    "core.verdicts.judge",
    "core.verdicts.inspect",
    "core.audit",
    "core.engine.lock",
    "core.config",
    "core.watch.scan",
    "core.watch.watcher",
    "core.watch.directories",
    "core.watch.sources",
    "core.watch.inventory",
    "core.config.model",
    "core.config.load",
    "core.cli.main",
]


def test_core_imports_without_qt() -> None:
    code = textwrap.dedent(
        f"""
        import importlib, sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "PySide6" or name.startswith("PySide6.") or name == "app":
                    raise ImportError("blocked for this test: " + name)
                return None
        sys.meta_path.insert(0, Block())
        for m in {CORE_MODULES!r}:
            importlib.import_module(m)
        assert not any(k.startswith("PySide6") for k in sys.modules)
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
