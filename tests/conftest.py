"""Shared pytest fixtures: fixture lock files, temp lock directories."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

# Widgets and models are tested offscreen; tray tests start their own Xvfb + trayer and run
# Qt in a subprocess with QT_QPA_PLATFORM=xcb (DESIGN.md, "Testing").
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

DATA = Path(__file__).parent / "data"
FIXTURES = DATA / "fixtures"


@pytest.fixture
def fixtures_dir(tmp_path: Path) -> Path:
    """A private copy of the reference tools' lock files (tests/data/fixtures)."""
    dest = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, dest)
    return dest


@pytest.fixture
def lockdir(tmp_path: Path) -> Path:
    """An empty directory for lock files."""
    d = tmp_path / "locks"
    d.mkdir()
    return d
