"""``make run`` installs the checkout in editable mode (``pip install -e '.[dev]'``): with this
pyproject.toml setuptools builds it without a warning (its meta-path finder for a flat layout
printed "Editable installation. Please be careful with folders in your working directory…"
on every fresh clone), and the installed ``core`` and ``app`` are the checkout's. Real pip and
setuptools, into a fresh virtual environment, from a copy of pyproject.toml with empty
packages (the checkout itself is never written)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_editable_install_prints_no_setuptools_warning(tmp_path: Path) -> None:
    src = tmp_path / "src"
    for pkg in ("core", "app"):
        (src / pkg).mkdir(parents=True)
        (src / pkg / "__init__.py").write_text("")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    env_dir = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=120)
    python = env_dir / "bin" / "python"
    # as the Makefile: the newest pip first (older ones did not show the backend's warnings)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True,
                   timeout=300, capture_output=True)
    out = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "-e",
                          str(src)], capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    said = out.stdout + out.stderr
    assert "Editable installation" not in said and "BuildBackendWarning" not in said, said
    where = subprocess.run([str(python), "-c", "import core, app; print(core.__file__); "
                            "print(app.__file__)"], capture_output=True, text=True, cwd=tmp_path,
                           timeout=60, check=True).stdout.split()
    assert where == [str(src / "core" / "__init__.py"), str(src / "app" / "__init__.py")]
