"""Build the Lockwarden bundle for this OS (``make package`` runs this after installing
``.[dev,package]``).

Steps:

1. generate the icons from the SVGs (``packaging/make_icons.py`` -> ``resources/generated/``);
2. run PyInstaller on ``packaging/lockwarden.spec`` (one-dir; ``build/`` and ``dist/``);
3. Linux: add the desktop integration files to ``dist/lockwarden/share/`` (the ``.desktop``
   entry and hicolor icons, so ``cp -r share ~/.local/`` installs them), check with ``ldd``
   that no bundled library misses a dependency, and pack
   ``dist/lockwarden-<version>-linux-<arch>.tar.gz``, after replacing the 32 MB ICU data
   library with a trimmed one (``packaging/trim_icu.py``; ``LOCKWARDEN_TRIM_ICU=0`` keeps it);
   macOS: zip ``Lockwarden.app`` (``ditto``) into ``dist/lockwarden-<version>-macos-<arch>.zip``;
   Windows: zip the folder into ``dist/lockwarden-<version>-windows-<arch>.zip``;
4. print the bundle size, then run the frozen ``--version`` and ``--self-test`` (with
   ``QT_QPA_PLATFORM=offscreen``) and fail if either fails.

Options: ``--skip-pyinstaller`` (reuse an existing ``dist/``: re-check and re-pack only),
``--no-check`` (skip step 4). Exit status 0 on success, 1 on any failure.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "dist"
BUILD = ROOT / "build"
SPEC = ROOT / "packaging" / "lockwarden.spec"
IS_MAC = sys.platform == "darwin"
IS_WIN = sys.platform.startswith("win")
IS_LINUX = sys.platform.startswith("linux")
HICOLOR_SIZES = (16, 22, 24, 32, 48, 64, 128, 256, 512)
#: System libraries whose absence on the build machine is no defect of the bundle.
OPTIONAL_SYSTEM_LIBS = ("libwayland-",)


def version() -> str:
    """Lockwarden's version, read from ``core/__init__.py`` (without importing it)."""
    text = (ROOT / "core" / "__init__.py").read_text(encoding="utf-8")
    m = re.search(r'__version__ = "([^"]+)"', text)
    if not m:
        raise SystemExit("build: no __version__ in core/__init__.py")
    return m.group(1)


def arch() -> str:
    """Machine name for artifact names: ``x86_64``, ``arm64``, ``amd64`` …"""
    m = platform.machine().lower()
    return {"aarch64": "arm64", "amd64": "x86_64"}.get(m, m) or "unknown"


def bundle_dir() -> Path:
    """The folder whose size is reported: ``dist/Lockwarden.app`` on macOS, else
    ``dist/lockwarden``."""
    return DIST / "Lockwarden.app" if IS_MAC else DIST / "lockwarden"


def executable() -> Path:
    """The frozen executable the checks run (the console one on Windows)."""
    if IS_MAC:
        return DIST / "Lockwarden.app" / "Contents" / "MacOS" / "lockwarden"
    if IS_WIN:
        return DIST / "lockwarden" / "lockwarden-cli.exe"
    return DIST / "lockwarden" / "lockwarden"


def tree_size(path: Path) -> int:
    """Bytes of every regular file under ``path`` (symlinks not followed or counted)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            p = Path(dirpath) / name
            if not p.is_symlink():
                total += p.stat().st_size
    return total


def mb(n: int) -> str:
    """``n`` bytes in MB (10^6), one decimal."""
    return f"{n / 1e6:.1f} MB"


def run(cmd: list[str], cwd: str | None = None) -> None:
    """Run ``cmd`` (in ``cwd``), echoing it; raise ``SystemExit`` when it fails."""
    print("+", " ".join(cmd), flush=True)
    rc = subprocess.call(cmd, cwd=cwd)
    if rc != 0:
        raise SystemExit(f"build: {cmd[0]} failed with status {rc}")


def make_icons() -> None:
    """Step 1: ``packaging/make_icons.py``."""
    run([sys.executable, str(ROOT / "packaging" / "make_icons.py")])


def pyinstaller() -> float:
    """Step 2: PyInstaller; returns the seconds it took."""
    t0 = time.monotonic()
    run([sys.executable, "-m", "PyInstaller", "--noconfirm", "--clean", "--log-level", "WARN",
         "--distpath", str(DIST), "--workpath", str(BUILD), str(SPEC)], cwd=str(ROOT))
    return time.monotonic() - t0


def linux_share(bundle: Path) -> None:
    """Desktop integration files inside the bundle: ``share/applications/lockwarden.desktop``
    and ``share/icons/hicolor/<N>x<N>/apps/lockwarden.png`` plus the scalable SVG."""
    share = bundle / "share"
    apps = share / "applications"
    apps.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "resources" / "lockwarden.desktop", apps / "lockwarden.desktop")
    gen = ROOT / "resources" / "generated"
    for n in HICOLOR_SIZES:
        d = share / "icons" / "hicolor" / f"{n}x{n}" / "apps"
        d.mkdir(parents=True, exist_ok=True)
        shutil.copy2(gen / f"lockwarden-{n}.png", d / "lockwarden.png")
    d = share / "icons" / "hicolor" / "scalable" / "apps"
    d.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "resources" / "icons" / "lockwarden.svg", d / "lockwarden.svg")


def ldd_check(bundle: Path) -> list[str]:
    """Linux: ``ldd`` every shared object in the bundle; return the ``"lib => not found"``
    lines (a library we left out that something kept still needs). Empty list = complete."""
    if shutil.which("ldd") is None:
        return []
    missing: list[str] = []
    internal = bundle / "_internal"
    env = dict(os.environ)
    libdirs = [str(internal), str(internal / "PySide6" / "Qt" / "lib")]
    env["LD_LIBRARY_PATH"] = os.pathsep.join(libdirs)
    for path in sorted(bundle.rglob("*.so*")):
        if path.is_symlink() or not path.is_file():
            continue
        out = subprocess.run(["ldd", str(path)], capture_output=True, text=True, env=env)
        for line in out.stdout.splitlines():
            # libwayland-*.so are system libraries every Wayland session has; the Wayland
            # plugin is optional (X11/XWayland works without it), so a build machine without
            # them is fine.
            if "not found" in line and not line.strip().startswith(OPTIONAL_SYSTEM_LIBS):
                missing.append(f"{path.relative_to(bundle)}: {line.strip()}")
    return missing


def package(ver: str) -> Path:
    """Step 3: the archive to upload."""
    a = arch()
    if IS_LINUX:
        out = DIST / f"lockwarden-{ver}-linux-{a}.tar.gz"
        with tarfile.open(out, "w:gz", compresslevel=6) as tar:
            tar.add(DIST / "lockwarden", arcname=f"lockwarden-{ver}")
        return out
    if IS_MAC:
        out = DIST / f"lockwarden-{ver}-macos-{a}.zip"
        out.unlink(missing_ok=True)
        # ditto keeps the bundle's symlinks, permissions and signature (zip -r breaks them)
        run(["ditto", "-c", "-k", "--sequesterRsrc", "--keepParent",
             str(DIST / "Lockwarden.app"), str(out)])
        return out
    out = DIST / f"lockwarden-{ver}-windows-{a}"
    return Path(shutil.make_archive(str(out), "zip", root_dir=DIST, base_dir="lockwarden"))


def frozen_checks(exe: Path) -> bool:
    """Step 4: ``--version`` must print the version; ``--self-test`` must exit 0."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    ok = True
    for args in (["--version"], ["--self-test"]):
        t0 = time.monotonic()
        proc = subprocess.run([str(exe), *args], capture_output=True, text=True, env=env,
                              timeout=180)
        dt = time.monotonic() - t0
        print(f"+ {exe.name} {' '.join(args)}  (exit {proc.returncode}, {dt:.2f} s)")
        for line in (proc.stdout + proc.stderr).splitlines():
            print("  " + line)
        if proc.returncode != 0:
            ok = False
        if args == ["--version"] and version() not in proc.stdout:
            print(f"build: --version does not name {version()}")
            ok = False
    return ok


def main(argv: list[str] | None = None) -> int:
    """Build, pack and check; return the exit status."""
    parser = argparse.ArgumentParser(description="Build the Lockwarden bundle (PyInstaller).")
    parser.add_argument("--skip-pyinstaller", action="store_true",
                        help="reuse dist/ from an earlier build: only re-pack and re-check")
    parser.add_argument("--no-check", action="store_true",
                        help="do not run the frozen --version and --self-test")
    args = parser.parse_args(argv)
    ver = version()
    t0 = time.monotonic()
    make_icons()
    took = 0.0 if args.skip_pyinstaller else pyinstaller()
    bundle = bundle_dir()
    if not bundle.is_dir():
        print(f"build: {bundle} was not built", file=sys.stderr)
        return 1
    if IS_LINUX:
        linux_share(bundle)
        if os.environ.get("LOCKWARDEN_TRIM_ICU", "1") != "0":
            sys.path.insert(0, str(ROOT / "packaging"))
            from trim_icu import trim_bundle

            print(trim_bundle(bundle), flush=True)
        missing = ldd_check(bundle)
        if missing:
            print("build: bundled libraries miss dependencies:", *missing, sep="\n  ")
            return 1
    archive = package(ver)
    print(f"build: PyInstaller {took:.0f} s, total {time.monotonic() - t0:.0f} s")
    print(f"build: bundle {bundle.relative_to(ROOT)}: {mb(tree_size(bundle))}")
    print(f"build: archive {archive.relative_to(ROOT)}: {mb(archive.stat().st_size)}")
    if args.no_check:
        return 0
    if not frozen_checks(executable()):
        print("build: the frozen executable failed its checks", file=sys.stderr)
        return 1
    print("build: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
