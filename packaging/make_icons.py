"""Generate every raster icon from the SVG sources in ``resources/icons/`` (the one source of
truth): PNG sizes, a multi-size Windows ``.ico`` and a macOS ``.icns``.

Usage: ``python packaging/make_icons.py [--out DIR]`` (default ``resources/generated/``, which
is git-ignored; ``packaging/build.py`` runs this before PyInstaller).

Each size is rendered from the vector with QtSvg (``QSvgRenderer`` on the ``offscreen``
platform, so no display is needed) rather than downscaled, so 16 px icons stay crisp; Pillow
then assembles the ``.ico`` and ``.icns`` containers from those renderings.

Outputs (in ``DIR``):

- ``lockwarden-<N>.png`` for N in :data:`APP_SIZES` and ``lockwarden.png`` (256 px, the icon
  the Linux ``.desktop`` file names);
- ``tray-<state>-<N>.png`` for each tray SVG and N in :data:`TRAY_SIZES`;
- ``lockwarden.ico`` (:data:`ICO_SIZES`) and ``lockwarden.icns`` (:data:`ICNS_SIZES`).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SVG_DIR = ROOT / "resources" / "icons"
OUT_DEFAULT = ROOT / "resources" / "generated"

APP_SIZES: tuple[int, ...] = (16, 22, 24, 32, 48, 64, 128, 256, 512, 1024)
TRAY_SIZES: tuple[int, ...] = (16, 22, 24, 32, 44, 48, 64)
ICO_SIZES: tuple[int, ...] = (16, 24, 32, 48, 64, 128, 256)
ICNS_SIZES: tuple[int, ...] = (16, 32, 64, 128, 256, 512, 1024)


def render_png(svg: Path, size: int, dest: Path) -> None:
    """Render ``svg`` to a ``size`` x ``size`` RGBA PNG file ``dest``. Needs a Qt GUI
    application (created on the offscreen platform by :func:`generate`). Raises ``ValueError``
    when QtSvg cannot parse the file and ``OSError`` when the PNG cannot be written."""
    from PySide6.QtCore import QRectF, Qt
    from PySide6.QtGui import QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise ValueError(f"{svg}: QtSvg cannot parse it")
    image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
    renderer.render(painter, QRectF(0, 0, size, size))
    painter.end()
    if not image.convertToFormat(QImage.Format.Format_ARGB32).save(str(dest)):
        raise OSError(f"cannot write {dest}")


def generate(out: Path = OUT_DEFAULT, svg_dir: Path = SVG_DIR) -> list[Path]:
    """Write every icon into ``out`` (created if missing); return the files written.

    Raises ``FileNotFoundError`` when ``svg_dir/lockwarden.svg`` is missing and ``ValueError``
    for an SVG QtSvg cannot parse.
    """
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PIL import Image
    from PySide6.QtGui import QGuiApplication

    _app = QGuiApplication.instance() or QGuiApplication(["make_icons"])
    app_svg = svg_dir / "lockwarden.svg"
    if not app_svg.is_file():
        raise FileNotFoundError(app_svg)
    if not set(ICO_SIZES) | set(ICNS_SIZES) <= set(APP_SIZES):
        raise ValueError("ICO/ICNS sizes must be among APP_SIZES")
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []

    for size in APP_SIZES:
        dest = out / f"lockwarden-{size}.png"
        render_png(app_svg, size, dest)
        written.append(dest)
    shutil.copyfile(out / "lockwarden-256.png", out / "lockwarden.png")
    written.append(out / "lockwarden.png")

    for svg in sorted(svg_dir.glob("tray-*.svg")):
        for size in TRAY_SIZES:
            dest = out / f"{svg.stem}-{size}.png"
            render_png(svg, size, dest)
            written.append(dest)

    def img(size: int) -> Image.Image:
        with Image.open(out / f"lockwarden-{size}.png") as im:
            return im.convert("RGBA")

    # ICO: the largest image first, the others appended, so each size is its own rendering.
    ico = out / "lockwarden.ico"
    largest = max(ICO_SIZES)
    img(largest).save(ico, format="ICO", sizes=[(s, s) for s in ICO_SIZES],
                      append_images=[img(s) for s in ICO_SIZES if s != largest])
    written.append(ico)
    icns = out / "lockwarden.icns"
    largest = max(ICNS_SIZES)
    img(largest).save(icns, format="ICNS",
                      append_images=[img(s) for s in ICNS_SIZES if s != largest])
    written.append(icns)
    return written


def main(argv: list[str] | None = None) -> int:
    """Command line: generate the icons; print how many files went where."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=OUT_DEFAULT, help="output directory")
    args = parser.parse_args(argv)
    files = generate(args.out)
    print(f"make_icons: {len(files)} files in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
