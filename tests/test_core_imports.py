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
    "core.liveness",
    "core.policy",
    "core.inspect",
    "core.audit",
    "core.lock",
    "core.config",
    "core.scan",
    "core.watch",
    "core.watch_dirs",
    "core.watch_sources",
    "core.inventory",
    "core.config_model",
    "core.config_load",
    "core.cli",
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
