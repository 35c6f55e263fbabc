"""Which shared libraries the Linux bundle carries (docs/packaging.md "What is in the bundle"):
packaging/elf_needed.py reads an ELF file's direct links as ``readelf`` does, and the spec's
closure keeps what the kept plugins and extensions link through bundled libraries, leaving the
host libraries (packaging/lockwarden.spec ``HOST_LIBS``) and what only they need."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import ROOT
from tests.support.packaging import PYSIDE_DIR, exec_spec

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ELF, Linux")

sys.path.insert(0, str(ROOT / "packaging"))
from elf_needed import needed  # type: ignore[import-not-found]  # noqa: E402

SYSTEM = Path("/usr/lib/x86_64-linux-gnu")


@pytest.mark.skipif(shutil.which("readelf") is None, reason="binutils' readelf")
@pytest.mark.parametrize("lib", ["Qt/lib/libQt6Gui.so.6", "Qt/plugins/platforms/libqxcb.so",
                                 "QtCore.abi3.so"])
def test_needed_reads_what_readelf_reads(lib: str) -> None:
    path = PYSIDE_DIR / lib
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True,
                         check=True).stdout
    assert needed(path) == re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def test_needed_of_a_file_that_is_not_elf_is_empty(tmp_path: Path) -> None:
    (tmp_path / "x.so").write_text("not ELF")
    assert needed(tmp_path / "x.so") == []


@pytest.mark.skipif(not (SYSTEM / "libglib-2.0.so.0").exists()
                    or not (SYSTEM / "libxcb-cursor.so.0").exists(),
                    reason="Debian's multiarch libraries (glib, xcb-cursor)")
def test_the_closure_leaves_host_libraries_and_what_only_they_link(monkeypatch, tmp_path):
    qt = PYSIDE_DIR / "Qt"
    binaries = [("PySide6/Qt/plugins/platforms/libqxcb.so",
                 str(qt / "plugins" / "platforms" / "libqxcb.so"), "BINARY")]
    binaries += [(f"PySide6/Qt/lib/{n}", str(qt / "lib" / n), "BINARY")
                 for n in ("libQt6Core.so.6", "libQt6Gui.so.6", "libQt6XcbQpa.so.6",
                           "libQt6DBus.so.6")]
    binaries += [(n, str(SYSTEM / n), "BINARY")
                 for n in ("libglib-2.0.so.0", "libpcre2-8.so.0", "libX11.so.6",
                           "libxcb-cursor.so.0", "libstdc++.so.6")
                 if (SYSTEM / n).exists()]
    made = exec_spec(binaries, [], monkeypatch, tmp_path)
    kept = {Path(d).name for d, _s, _k in made["globals"]["a"].binaries}
    assert {"libqxcb.so", "libQt6XcbQpa.so.6", "libQt6Gui.so.6", "libQt6Core.so.6",
            "libxcb-cursor.so.0"} <= kept  # linked by the kept plugin, not on every desktop
    # host libraries, and libpcre2 which only glib (a host library) links
    assert kept.isdisjoint({"libglib-2.0.so.0", "libpcre2-8.so.0", "libX11.so.6",
                            "libstdc++.so.6"})


def test_the_linux_bundle_carries_no_qtnetwork(monkeypatch, tmp_path):
    """POSIX's single-instance guard is a Unix socket of Python's own (app/startup/single.py)."""
    qt = PYSIDE_DIR / "Qt"
    binaries = [(f"PySide6/Qt/lib/{n}", str(qt / "lib" / n), "BINARY")
                for n in ("libQt6Network.so.6", "libQt6Core.so.6")]
    binaries.append(("PySide6/QtNetwork.abi3.so", str(PYSIDE_DIR / "QtNetwork.abi3.so"),
                     "EXTENSION"))
    made = exec_spec(binaries, [], monkeypatch, tmp_path)
    assert "PySide6.QtNetwork" in made["analysis_kw"]["excludes"]
    kept = {Path(d).name for d, _s, _k in made["globals"]["a"].binaries}
    assert "libQt6Network.so.6" not in kept
