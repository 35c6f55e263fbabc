"""The history timeline (docs/gui.md "History"; docs/history.md): one row per lock, time left
to right, drawn with QPainter.

Held spans are coloured by holder (one hue per holder, :func:`core.history.spans.holder_key`:
a named agent keeps its colour across its processes; the same every time), stale spans in
the stale colour with a hatch, expired spans in the expired colour, free time empty; Lockwarden's
own actions (transitions naming an audit entry) and reclaims are markers (triangles) above
the bar. Spans narrower than a pixel are gathered per pixel column (the worst state wins), so
a week of a busy lock costs at most one line per column.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Sequence

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QPainter, QPaintEvent, QPen, QPolygonF
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.style.icons import STATE_COLORS
from core.history.model import Transition
from core.history.spans import Span

ROW_H = 22
"""Height of one lock's bar, px."""

AXIS_H = 18
"""Height of the time axis under the bars, px."""

LABEL_W = 0
"""Width kept for lock names at the left (0: names are in the tooltip and the table)."""

MARKER_EVENTS = frozenset({"reclaimed", "force_released", "cleared"})
"""Events drawn as markers even without an audit entry."""

_RANK = {"held": 1, "expired": 2, "stale": 3, "unreadable": 4}


def holder_color(holder: str) -> QColor:
    """A stable colour for a holder's label (hue from its digest; blue-ish for ``""``)."""
    if not holder:
        return QColor(STATE_COLORS["held"])
    hue = int(hashlib.sha256(holder.encode("utf-8", "replace")).hexdigest()[:4], 16) % 360
    return QColor.fromHsl(hue, 150, 120)


class TimelineWidget(QWidget):
    """Paints spans and markers of one or more locks over a window.

    Call :meth:`set_data`; :attr:`last_paint_ms` is how long the last paint took (ms)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName("History timeline")
        self.setMinimumHeight(ROW_H + AXIS_H + 8)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.spans: dict[str, list[Span]] = {}
        self.markers: list[Transition] = []
        self.since = time.time() - 3600
        self.until = time.time()
        self.last_paint_ms = 0.0
        self._colors: dict[str, QColor] = {}
        self.mark: float | None = None
        """A time (Unix s) marked by a vertical line (the audit entry shown), or ``None``."""

    def set_data(self, spans: dict[str, list[Span]], markers: Sequence[Transition],
                 since: float, until: float) -> None:
        """Show ``spans`` (per lock) and ``markers`` in ``[since, until)`` (Unix s)."""
        self.spans = spans
        self.markers = [m for m in markers if m.audit_id or m.event in MARKER_EVENTS]
        self.since, self.until = since, max(until, since + 1.0)
        rows = max(1, len(spans))
        self.setMinimumHeight(rows * (ROW_H + 4) + AXIS_H + 8)
        self.setToolTip(self._summary())
        self.setAccessibleDescription(self._summary())
        self.update()

    def _summary(self) -> str:
        held = sum(s.length for v in self.spans.values() for s in v if s.state == "held")
        stale = sum(s.length for v in self.spans.values() for s in v if s.state == "stale")
        holders = {s.who for v in self.spans.values() for s in v if s.state == "held"}
        return (f"{len(self.spans)} lock(s); held {held / 60:.1f} min by {len(holders)} "
                f"holder(s); stale {stale / 60:.1f} min; {len(self.markers)} action(s)")

    def x_of(self, t: float) -> float:
        """The x pixel of Unix time ``t``."""
        w = max(1, self.width() - LABEL_W - 2)
        return LABEL_W + 1 + (t - self.since) / (self.until - self.since) * w

    def paintEvent(self, event: QPaintEvent) -> None:
        started = time.perf_counter()
        p = QPainter(self)
        try:
            p.fillRect(self.rect(), self.palette().base())
            many = len(self.spans) > 1
            for row, lock in enumerate(sorted(self.spans)):
                top = 4 + row * (ROW_H + 4)
                self._paint_row(p, top, self.spans[lock])
                if many:  # which lock each bar is
                    p.setPen(QPen(self.palette().text().color()))
                    p.drawText(QRectF(LABEL_W + 4, top, self.width() / 3, ROW_H),
                               int(Qt.AlignmentFlag.AlignVCenter), os.path.basename(lock))
            self._paint_markers(p)
            if self.mark is not None:
                p.setPen(QPen(QColor(STATE_COLORS["problem"]), 2))
                x = self.x_of(self.mark)
                p.drawLine(QPointF(x, 0), QPointF(x, self.height() - AXIS_H))
            self._paint_axis(p)
        finally:
            p.end()
        self.last_paint_ms = (time.perf_counter() - started) * 1000

    def _paint_row(self, p: QPainter, top: int, spans: list[Span]) -> None:
        width = self.width()
        columns: list[int] = [0] * (width + 1)  # worst state per pixel for sub-pixel spans
        stale_brush = QBrush(QColor(0, 0, 0, 110), Qt.BrushStyle.BDiagPattern)  # hatch on top
        p.setPen(Qt.PenStyle.NoPen)
        since = self.since
        scale = max(1, width - LABEL_W - 2) / (self.until - self.since)
        left = LABEL_W + 1
        rank_of, colors = _RANK.get, self._colors
        for s in spans:  # the hot loop: 100,000 spans for a busy week (no calls into Qt)
            rank = rank_of(s.state, 0)
            if rank == 0:
                continue
            x0 = left + (s.start - since) * scale
            x1 = left + (s.end - since) * scale
            if x1 < 0 or x0 > width:
                continue
            if x1 - x0 < 1.0:
                col = min(width, max(0, int(x0)))
                if rank > columns[col]:
                    columns[col] = rank
                continue
            rect = QRectF(x0, top, x1 - x0, ROW_H)
            if rank == 1:
                color = colors.get(s.who)
                if color is None:
                    color = colors[s.who] = holder_color(s.who)
                p.fillRect(rect, color)
            else:
                p.fillRect(rect, QColor(STATE_COLORS.get(s.state, STATE_COLORS["problem"])))
                if s.state == "stale":
                    p.fillRect(rect, stale_brush)
        names = {v: QColor(STATE_COLORS.get(k, STATE_COLORS["held"])) for k, v in _RANK.items()}
        run_start, run_rank = 0, 0
        for x, rank in enumerate([*columns, 0]):  # neighbouring columns alike: one rectangle
            if rank != run_rank:
                if run_rank:
                    p.fillRect(QRectF(run_start, top, x - run_start, ROW_H), names[run_rank])
                run_start, run_rank = x, rank
        p.setPen(QPen(self.palette().mid().color()))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawRect(QRectF(LABEL_W + 0.5, top - 0.5, width - LABEL_W - 1, ROW_H + 1))

    def _paint_markers(self, p: QPainter) -> None:
        rows = sorted(self.spans)
        p.setPen(QPen(self.palette().text().color()))
        p.setBrush(self.palette().text())
        last_x = -10.0
        for m in self.markers:
            x = self.x_of(m.t)
            if x - last_x < 3 or not 0 <= x <= self.width():  # one marker per 3 px
                continue
            last_x = x
            row = rows.index(m.lock) if m.lock in rows else 0
            top = 4 + row * (ROW_H + 4)
            p.drawPolygon(QPolygonF([QPointF(x - 4, top), QPointF(x + 4, top),
                                     QPointF(x, top + 7)]))

    def _paint_axis(self, p: QPainter) -> None:
        bottom = self.height() - 2
        p.setPen(QPen(self.palette().text().color()))
        span = self.until - self.since
        step = next((s for s in (60, 300, 900, 3600, 3 * 3600, 6 * 3600, 86400, 2 * 86400,
                                 7 * 86400) if span / s <= 8), 7 * 86400)
        fmt = "%H:%M" if step < 86400 else "%d %b"
        t = (self.since // step + 1) * step
        while t < self.until:
            x = self.x_of(t)
            p.drawLine(QPointF(x, bottom - AXIS_H + 2), QPointF(x, bottom - AXIS_H + 6))
            p.drawText(QPointF(x + 2, bottom - 2), time.strftime(fmt, time.localtime(t)))
            t += step
