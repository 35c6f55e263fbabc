"""Icons of the app: the tray's state icons (SVG from ``resources/icons/`` with a drawn
fallback), the stale-count badge, and the small state dots used in the lock table.

The SVG files are made by the packaging engineer; until they exist, or when the SVG image
plugin is missing in a frozen build, the icons are drawn with QPainter so the app always shows
something meaningful. Colours are chosen to read on light and dark panels alike.
"""

from __future__ import annotations

import sys
from functools import cache
from pathlib import Path

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QIcon, QPainter, QPen, QPixmap

from core.record import State

#: Aggregate states of the tray icon, best to worst (docs/DESIGN.md "GUI").
TRAY_STATES: tuple[str, ...] = ("free", "held", "stale", "problem")

#: Colour of each lock state, readable on light and dark backgrounds.
STATE_COLORS: dict[str, str] = {
    "free": "#2e9d4f",
    State.FREE.value: "#2e9d4f",
    State.HELD.value: "#2f7fd6",
    State.STALE.value: "#e0822c",
    State.EXPIRED.value: "#d4a417",
    State.WRITING.value: "#8a8f98",
    State.UNREADABLE.value: "#d23c3c",
    "held-dead": "#8e6cc0",  # app.table.lockinfo.HELD_DEAD: held by the rules, its holder is gone
    "problem": "#d23c3c",
}


def resources_dir() -> Path:
    """Directory of the bundled resources: ``sys._MEIPASS/resources`` in a PyInstaller build,
    else ``<repo>/resources`` next to the ``app`` package."""
    frozen = getattr(sys, "_MEIPASS", None)
    if frozen:
        return Path(frozen) / "resources"
    return Path(__file__).resolve().parents[2] / "resources"


def _svg_icon(name: str) -> QIcon | None:
    path = resources_dir() / "icons" / name
    if not path.is_file():
        return None
    icon = QIcon(str(path))
    if icon.isNull() or icon.pixmap(32, 32).isNull():
        return None
    return icon


def _drawn_lock(color: str, size: int = 64) -> QPixmap:
    """A padlock drawn with QPainter in ``color`` (fallback when no SVG is available)."""
    pm = QPixmap(size, size)
    pm.fill(Qt.GlobalColor.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    s = size / 64.0
    outline = QPen(QColor("#1d1f21"), 3 * s)
    shackle = QPen(QColor(color).darker(130), 7 * s)
    shackle.setCapStyle(Qt.PenCapStyle.RoundCap)
    p.setPen(shackle)
    p.setBrush(Qt.BrushStyle.NoBrush)
    p.drawArc(QRectF(18 * s, 6 * s, 28 * s, 32 * s), 0, 180 * 16)
    p.drawLine(int(18 * s), int(22 * s), int(18 * s), int(30 * s))
    p.drawLine(int(46 * s), int(22 * s), int(46 * s), int(30 * s))
    p.setPen(outline)
    p.setBrush(QBrush(QColor(color)))
    p.drawRoundedRect(QRectF(10 * s, 28 * s, 44 * s, 32 * s), 6 * s, 6 * s)
    p.end()
    return pm


@cache
def app_icon() -> QIcon:
    """The application icon (``resources/icons/lockwarden.svg`` or a drawn padlock)."""
    icon = _svg_icon("lockwarden.svg")
    return icon if icon is not None else QIcon(_drawn_lock(STATE_COLORS[State.HELD.value]))


@cache
def _tray_base(state: str, size: int) -> QPixmap:
    icon = _svg_icon(f"tray-{state}.svg")
    if icon is not None:
        pm = icon.pixmap(size, size)
        if not pm.isNull():
            if pm.width() != size:
                pm = pm.scaled(size, size, Qt.AspectRatioMode.KeepAspectRatio,
                               Qt.TransformationMode.SmoothTransformation)
            return pm
    return _drawn_lock(STATE_COLORS.get(state, STATE_COLORS["problem"]), size)


def badge_text(count: int, size: int) -> str:
    """Badge glyphs for ``count`` at icon edge ``size`` px: the number; above 9 at panel sizes
    (< 32 px) "9+", above 99 "99+", so the glyphs stay large enough to read."""
    if size < 32 and count > 9:
        return "9+"
    return str(count) if count < 100 else "99+"


def badge_geometry(text: str, size: int) -> tuple[QRectF, QFont, float]:
    """Where the badge with ``text`` goes on a ``size`` px icon (lower right corner, at most
    74% of the width so the padlock's colour stays visible), its font and ring width (px)."""
    h = size * (0.6 if size < 32 else 0.52)
    ring = 1.0 if size < 32 else size / 24
    cap = size * 0.74
    font = QFont()
    font.setBold(True)
    font.setPixelSize(max(7, round(h - 2.5 * ring)))
    if len(text) > 1:
        font.setStretch(QFont.Stretch.SemiCondensed)
    fm = QFontMetricsF(font)
    while font.pixelSize() > 7 and fm.horizontalAdvance(text) + 3 * ring > cap:
        font.setPixelSize(font.pixelSize() - 1)
        fm = QFontMetricsF(font)
    w = min(cap, max(h, fm.horizontalAdvance(text) + 3 * ring + h * 0.25))
    return QRectF(size - w, size - h, w, h), font, ring


def tray_pixmap(state: str, badge: int = 0, size: int = 64) -> QPixmap:
    """Tray icon for an aggregate ``state`` (one of :data:`TRAY_STATES`) with a red count
    ``badge`` (stale + expired locks) in the lower right corner when ``badge > 0``
    (:func:`badge_text`). The badge has a dark outer ring (and from 32 px a white inner one),
    so it stands out from the red "problem" padlock and from light and dark panels alike.
    ``size`` is the pixmap edge in pixels."""
    pm = QPixmap(_tray_base(state, size))
    if badge <= 0:
        return pm
    text = badge_text(badge, size)
    rect, font, ring = badge_geometry(text, size)
    p = QPainter(pm)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    p.setRenderHint(QPainter.RenderHint.TextAntialiasing)
    p.setPen(Qt.PenStyle.NoPen)
    layers = [("#1d1f21", 0.0), ("#ffffff", ring), ("#c62828", 2 * ring)]
    if size < 32:  # panel sizes: no room for two rings; the dark one parts the colours
        layers = [("#1d1f21", 0.0), ("#c62828", ring)]
    for color, inset in layers:
        r = rect.adjusted(inset, inset, -inset, -inset)
        p.setBrush(QColor(color))
        p.drawRoundedRect(r, r.height() / 2, r.height() / 2)
    p.setFont(font)
    p.setPen(QColor("#ffffff"))
    p.drawText(rect, int(Qt.AlignmentFlag.AlignCenter), text)
    p.end()
    return pm


def tray_icon(state: str, badge: int = 0) -> QIcon:
    """:func:`tray_pixmap` at 16..64 px as one QIcon."""
    icon = QIcon()
    for size in (16, 22, 24, 32, 48, 64):
        icon.addPixmap(tray_pixmap(state, badge, size))
    return icon


@cache
def state_icon(state: str) -> QIcon:
    """A dot in the state's colour for the table's state column (14 and 28 px): filled, but a
    ring for ``held-dead`` (:data:`app.table.lockinfo.HELD_DEAD`), so that state differs from
    ``held`` by shape as well as colour."""
    icon = QIcon()
    for size in (14, 28):
        pm = QPixmap(size, size)
        pm.fill(Qt.GlobalColor.transparent)
        p = QPainter(pm)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        color = QColor(STATE_COLORS.get(state, STATE_COLORS["problem"]))
        if state == "held-dead":
            p.setPen(QPen(color, max(2.0, size / 6)))
            p.setBrush(Qt.BrushStyle.NoBrush)
        else:
            p.setPen(QPen(color.darker(140), max(1.0, size / 14)))
            p.setBrush(color)
        m = size * 0.12
        p.drawEllipse(QRectF(m, m, size - 2 * m, size - 2 * m))
        p.end()
        icon.addPixmap(pm)
    return icon
