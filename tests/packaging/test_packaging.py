"""Packaging: icons (SVG sources, generated PNG/ICO/ICNS), the desktop entry, the frozen
entry's dispatch, the self-test from source, the PyInstaller spec's Qt trimming and the Windows
version resource (docs/packaging.md). The PyInstaller build itself runs in ``.ci/run`` after
the tests (``python packaging/build.py``), never inside pytest."""

from __future__ import annotations

import configparser
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support.cli import ROOT
from tests.support.packaging import PYSIDE_DIR, exec_spec

ICONS = ROOT / "resources" / "icons"
TRAY_STATES = ("free", "held", "stale", "problem")


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _render(name: str, size: int) -> Any:
    """Render resources/icons/<name> to a QImage (ARGB32) of size x size."""
    from PySide6.QtCore import QRectF, Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer
    from PySide6.QtWidgets import QApplication

    # a QApplication (not QGuiApplication): widget tests later in the session share it
    _app = QApplication.instance() or QApplication([])
    renderer = QSvgRenderer(str(ICONS / name))
    assert renderer.isValid(), name
    img = QImage(size, size, QImage.Format.Format_ARGB32)
    img.fill(Qt.GlobalColor.transparent)
    p = QPainter(img)
    renderer.render(p, QRectF(0, 0, size, size))
    p.end()
    return img


def _pixels(img: Any) -> list[tuple[int, int, int, int]]:
    from PySide6.QtGui import QColor

    out = []
    for y in range(img.height()):
        for x in range(img.width()):
            c = QColor.fromRgba(img.pixel(x, y))
            out.append((c.red(), c.green(), c.blue(), c.alpha()))
    return out


def _gray(px: tuple[int, int, int, int]) -> float:
    """Luminance composited on mid grey: what a colour-blind eye (or a monochrome panel) sees."""
    r, g, b, a = px
    lum = 0.299 * r + 0.587 * g + 0.114 * b
    return (lum * a + 128 * (255 - a)) / 255


@pytest.mark.parametrize("name", ["lockwarden.svg", "tray-template.svg",
                                  *[f"tray-{s}.svg" for s in TRAY_STATES]])
def test_every_icon_renders_at_16_and_256(name):
    big = _render(name, 256)
    assert not big.isNull() and big.width() == 256
    opaque = sum(1 for p in _pixels(_render(name, 16)) if p[3] > 128)
    # a 16 px icon must cover a good part of its square to read in a tray
    assert opaque > 0.35 * 16 * 16, (name, opaque)


def test_tray_states_differ_without_colour():
    """Colour must never be the only cue: the four tray icons differ in luminance/shape."""
    grays = {s: [_gray(p) for p in _pixels(_render(f"tray-{s}.svg", 22))] for s in TRAY_STATES}
    for i, a in enumerate(TRAY_STATES):
        for b in TRAY_STATES[i + 1:]:
            diff = sum(1 for x, y in zip(grays[a], grays[b], strict=True) if abs(x - y) > 40)
            assert diff >= 20, f"tray-{a} and tray-{b} differ in only {diff} pixels at 22 px"


def test_tray_icons_have_light_and_dark_edges():
    """Readable on light and dark panels: each tray icon has both near-white (halo) and
    near-black (outline) opaque pixels at 32 px."""
    for s in TRAY_STATES:
        px = [p for p in _pixels(_render(f"tray-{s}.svg", 32)) if p[3] > 200]
        light = sum(1 for p in px if min(p[:3]) > 225)
        dark = sum(1 for p in px if max(p[:3]) < 50)
        assert light >= 10 and dark >= 10, (s, light, dark)


def test_template_icon_is_a_black_mask():
    px = _pixels(_render("tray-template.svg", 32))
    assert any(p[3] == 255 for p in px)
    assert any(p[3] == 0 for p in px)
    assert all(p[0] == p[1] == p[2] == 0 for p in px if p[3] > 0)


@pytest.mark.slow
def test_make_icons_generates_png_ico_icns(tmp_path):
    pytest.importorskip("PIL", reason="Pillow is in the 'package' extra")
    from PIL import Image

    out = tmp_path / "gen"
    proc = subprocess.run([sys.executable, str(ROOT / "packaging" / "make_icons.py"),
                           "--out", str(out)], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, QT_QPA_PLATFORM="offscreen"))
    assert proc.returncode == 0, proc.stderr
    mk = _load(ROOT / "packaging" / "make_icons.py", "lw_make_icons")
    for n in mk.APP_SIZES:
        with Image.open(out / f"lockwarden-{n}.png") as im:
            assert im.size == (n, n) and im.mode == "RGBA"
    for s in (*TRAY_STATES, "template"):
        for n in mk.TRAY_SIZES:
            with Image.open(out / f"tray-{s}-{n}.png") as im:
                assert im.size == (n, n)
    with Image.open(out / "lockwarden.ico") as ico:
        assert {w for w, _h in ico.info["sizes"]} == set(mk.ICO_SIZES)
    with Image.open(out / "lockwarden.icns") as icns:
        assert icns.size == (1024, 1024)
        assert {w for w, _h, _s in icns.info["sizes"]} >= {16, 32, 128, 256, 512}


def test_desktop_entry():
    cp = configparser.ConfigParser(interpolation=None)
    cp.optionxform = str  # type: ignore[assignment,method-assign]
    cp.read(ROOT / "resources" / "lockwarden.desktop", encoding="utf-8")
    e = cp["Desktop Entry"]
    assert e["Type"] == "Application"
    assert e["Exec"] == "lockwarden gui"
    assert e["Icon"] == "lockwarden"
    cats = [c for c in e["Categories"].split(";") if c]
    assert {"Utility", "System", "Monitor"} <= set(cats)
    assert e["Categories"].endswith(";")


def test_entry_routes_gui_cli_and_selftest():
    entry = _load(ROOT / "packaging" / "entry.py", "lw_entry")
    assert entry.route([]) == "app"
    assert entry.route(["gui"]) == "app"
    assert entry.route(["gui", "--demo"]) == "app"
    assert entry.route(["--minimized"]) == "app"  # autostart re-launches the executable so
    assert entry.route(["--demo-helper", "held", "/x"]) == "app"  # and the demo's helpers
    assert entry.route(["--config=/x.toml"]) == "app"
    assert entry.route(["--self-test"]) == "selftest"
    assert entry.route(["--version"]) == "cli"
    assert entry.route(["status", "/tmp/x.lock"]) == "cli"
    assert entry.route(["--json", "list", "/tmp"]) == "cli"


def test_entry_version_and_cli_verb_from_source(tmp_path):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    proc = subprocess.run([sys.executable, str(ROOT / "packaging" / "entry.py"), "--version"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
    from core import __version__

    assert proc.returncode == 0 and __version__ in proc.stdout
    lock = tmp_path / "free.lock"
    proc = subprocess.run([sys.executable, str(ROOT / "packaging" / "entry.py"), "status",
                           str(lock)], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # status: exit 0 = free


@pytest.mark.slow
def test_selftest_from_source(tmp_path):
    """``python -m app.startup.selftest`` passes from the source tree (the frozen run is in
    .ci/run)."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    env.pop("QT_QPA_PLATFORM", None)  # the self-test must force offscreen by itself
    proc = subprocess.run([sys.executable, "-m", "app.startup.selftest"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT, env=env)
    lines = proc.stdout.splitlines()
    checks = [ln for ln in lines if ln.startswith(("ok   ", "FAIL "))]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = [ln[5:].split(":")[0] for ln in checks]
    assert names == ["qt", "text", "icons", "app", "lock", "audit", "watch"]
    assert all(ln.startswith("ok   ") for ln in checks)
    assert "icons: 6 SVG loaded" in proc.stdout
    assert list(tmp_path.iterdir()) == []  # its temp directory is gone


def test_selftest_reports_a_broken_icon_and_fails(tmp_path, monkeypatch):
    """A bundle with a corrupt SVG must fail the icons check (real files, real Qt)."""
    from app.startup import selftest

    res = tmp_path / "resources"
    (res / "icons").mkdir(parents=True)
    for svg in ICONS.glob("*.svg"):
        (res / "icons" / svg.name).write_bytes(svg.read_bytes())
    (res / "icons" / "tray-held.svg").write_text("<svg><not-closed", encoding="utf-8")
    monkeypatch.setattr(selftest, "resources_dir", lambda: res)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the lock check's temp dir
    lines: list[str] = []
    failures = selftest.run_checks(lines.append)
    assert failures == 1
    bad = [ln for ln in lines if ln.startswith("FAIL")]
    assert len(bad) == 1 and bad[0].startswith("FAIL icons:") and "tray-held.svg" in bad[0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux plugin file names")
def test_spec_keeps_only_the_qt_plugins_the_app_uses(monkeypatch, tmp_path):
    qt = PYSIDE_DIR / "Qt"
    binaries = [(f"PySide6/Qt/plugins/{p.parent.name}/{p.name}", str(p), "BINARY")
                for p in sorted((qt / "plugins").glob("*/*.so"))]
    datas = [(f"PySide6/Qt/translations/{p.name}", str(p), "DATA")
             for p in sorted((qt / "translations").glob("qtbase_*.qm"))[:5]]
    made = exec_spec(binaries, datas, monkeypatch, tmp_path)
    g = made["globals"]
    a = made["analysis_kw"]
    kept = {Path(d).name for d, _s, _k in g["a"].binaries}
    for must in ("libqxcb.so", "libqoffscreen.so", "libqsvg.so", "libqico.so",
                 "libqsvgicon.so"):
        assert must in kept
    for gone in ("libqgtk3.so", "libqeglfs.so", "libqvnc.so", "libqpdf.so", "libqjpeg.so",
                 "libqopensslbackend.so", "libqtuiotouchplugin.so", "libqxcb-glx-integration.so"):
        assert gone not in kept
    assert g["a"].datas == []  # Qt's translations are left out
    assert "PySide6.QtQml" in a["excludes"] and "PySide6.QtWidgets" not in a["excludes"]
    assert {"PyQt5", "PyQt6", "tkinter"} <= set(a["excludes"])
    assert "app.startup.selftest" in a["hiddenimports"]
    # every verb module (imported by name when its verb runs) is in the bundle; drivers are not
    verbs = {f"core.cli.{p.stem}" for p in (ROOT / "core" / "cli").glob("*.py")
             if p.stem != "__init__"}
    assert verbs <= set(a["hiddenimports"])
    assert "core.remote.redis.backend" not in a["hiddenimports"]
    # one-dir: EXE with exclude_binaries, then COLLECT
    _exe_args, exe_kw = made["EXE"][0]
    assert exe_kw["exclude_binaries"] is True and exe_kw["name"] == "lockwarden"
    assert made["COLLECT"][0][1]["name"] == "lockwarden"


def test_windows_version_template_fills_and_evaluates():
    text = (ROOT / "packaging" / "windows" / "version_info.txt").read_text(encoding="utf-8")
    filled = text.replace("{version}", "1.2.3").replace("{version_tuple}", "1, 2, 3, 0")
    assert "{version" not in filled

    def ctor(kind):
        return lambda *a, **kw: (kind, a, kw)

    names = ["VSVersionInfo", "FixedFileInfo", "StringFileInfo", "StringTable", "StringStruct",
             "VarFileInfo", "VarStruct"]
    tree = eval(filled, {n: ctor(n) for n in names})  # the format PyInstaller evaluates
    kind, _a, kw = tree
    assert kind == "VSVersionInfo" and kw["ffi"][2]["filevers"] == (1, 2, 3, 0)
    strings = {s[1][0]: s[1][1] for s in kw["kids"][0][1][0][0][1][1]}
    assert strings["ProductVersion"] == "1.2.3" and strings["OriginalFilename"] == "lockwarden.exe"


def test_trim_icu_keeps_roots_and_core_data_only():
    trim = _load(ROOT / "packaging" / "trim_icu.py", "lw_trim_icu")
    for keep in ("pool.res", "root.res", "res_index.res", "uprops.icu", "ucase.icu",
                 "nfkc.nrm", "uts46.nrm", "likelySubtags.res", "zoneinfo64.res",
                 "metaZones.res", "supplementalData.res", "zone/root.res", "lang/root.res"):
        assert trim.keep_item(keep), keep
    for drop in ("de.res", "zh_Hant_TW.res", "es_419.res", "sr_Latn.res", "coll/de.res",
                 "coll/ucadata.icu", "coll/root.res", "brkitr/root.res", "brkitr/cjdict.dict",
                 "curr/fr.res", "lang/en.res",
                 "translit/root.txt.res", "gb18030.cnv", "unames.icu"):
        assert not trim.keep_item(drop), drop


@pytest.mark.skipif(not all(shutil.which(t) for t in ("objcopy", "objdump", "as", "ld", "icupkg")),
                    reason="needs binutils and icu-devtools (icupkg)")
def test_trim_icu_builds_a_small_library_with_the_same_symbol(tmp_path):
    trim = _load(ROOT / "packaging" / "trim_icu.py", "lw_trim_icu2")
    libs = sorted((PYSIDE_DIR / "Qt" / "lib").glob("libicudata.so.*"))
    if not libs:
        pytest.skip("this PySide6 does not ship ICU")
    out = tmp_path / libs[0].name
    before, after = trim.trim(libs[0], out)
    assert after < before / 4 and out.stat().st_size == after
    symbols = subprocess.run(["objdump", "-T", str(out)], capture_output=True, text=True).stdout
    assert re.search(r"\sicudt\d+_dat\s*$", symbols, re.MULTILINE)
    soname = subprocess.run(["objdump", "-p", str(out)], capture_output=True, text=True).stdout
    assert f"SONAME               {libs[0].name}" in soname
    # icupkg -l also checks that no kept item depends on a removed one (exit status 2 if so)
    dat = tmp_path / f"icudt{re.sub(r'[^0-9]', '', libs[0].name)}l.dat"
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.rodata", str(out), str(dat)],
                   check=True)
    proc = subprocess.run(["icupkg", "-l", str(dat)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    items = proc.stdout.split()
    assert "pool.res" in items and "root.res" in items and "coll/de.res" not in items


def test_spec_macos_bundle_is_tray_only_and_signed(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.delenv("LOCKWARDEN_CODESIGN_IDENTITY", raising=False)
    made = exec_spec([], [], monkeypatch, tmp_path)
    from core import __version__

    (_coll,), kw = made["BUNDLE"][0]
    assert kw["name"] == "Lockwarden.app"
    assert kw["bundle_identifier"] == "io.lockwarden.Lockwarden"
    assert kw["version"] == __version__
    plist = kw["info_plist"]
    assert plist["LSUIElement"] is True and plist["CFBundleShortVersionString"] == __version__
    _args, exe_kw = made["EXE"][0]
    assert exe_kw["codesign_identity"] is None  # ad-hoc
    assert exe_kw["strip"] is False  # stripping would break the signatures
    monkeypatch.setenv("LOCKWARDEN_CODESIGN_IDENTITY", "Developer ID Application: X (TEAM)")
    made = exec_spec([], [], monkeypatch, tmp_path)
    _args, exe_kw = made["EXE"][0]
    assert exe_kw["codesign_identity"].startswith("Developer ID")
    assert Path(exe_kw["entitlements_file"]).is_file()


def test_spec_windows_builds_a_windowed_and_a_console_exe(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "platform", "win32")
    made = exec_spec([], [], monkeypatch, tmp_path)
    exes = {kw["name"]: kw for _a, kw in made["EXE"]}
    assert set(exes) == {"lockwarden", "lockwarden-cli"}
    assert exes["lockwarden"]["console"] is False and exes["lockwarden-cli"]["console"] is True
    version_file = Path(exes["lockwarden"]["version"])
    assert version_file.parent == tmp_path and "{version" not in version_file.read_text()
    assert "BUNDLE" not in made
    assert len(made["COLLECT"][0][0]) == 4  # both executables, binaries, datas
