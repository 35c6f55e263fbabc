"""A spin box for durations that reads and writes them as people do: "1 h", "2 min",
"1 h 30 min", "45 s" (docs/gui.md, "Dialogs"), never "3600.000 s". The value stays float
seconds."""

from __future__ import annotations

import re

from PySide6.QtGui import QValidator
from PySide6.QtWidgets import QDoubleSpinBox, QWidget

from app.table.lockinfo import duration_words

UNITS: dict[str, float] = {
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "h": 3600.0, "hr": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0, "": 1.0,
}
"""Unit words accepted after a number (a bare number is seconds)."""

_PART = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-z]*)\s*", re.IGNORECASE)


def parse_duration(text: str) -> float | None:
    """Seconds of ``text`` ("1 h 30 min", "90", "2.5 s", "1d 2h"), or None when it is not a
    duration."""
    text = text.strip()
    if not text:
        return None
    total, pos = 0.0, 0
    while pos < len(text):
        m = _PART.match(text, pos)
        if m is None or m.end() == pos:
            return None
        unit = UNITS.get(m.group(2).lower())
        if unit is None:
            return None
        total += float(m.group(1)) * unit
        pos = m.end()
    return total


class DurationSpinBox(QDoubleSpinBox):
    """A :class:`QDoubleSpinBox` of seconds shown as :func:`app.table.lockinfo.duration_words` and
    typed in the same words (:func:`parse_duration`)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setDecimals(3)

    def textFromValue(self, value: float) -> str:
        """The value in words: "1 h", "2 min 30 s"."""
        return duration_words(value)

    def valueFromText(self, text: str) -> float:
        """Seconds of the typed text (the current value when it is not a duration)."""
        if self.specialValueText() and text == self.specialValueText():
            return self.minimum()
        seconds = parse_duration(text)
        return self.value() if seconds is None else seconds

    def validate(self, text: str, pos: int) -> tuple[QValidator.State, str, int]:
        """Acceptable when ``text`` is a duration within the range; Intermediate while it may
        become one (a number without its unit yet, an empty box)."""
        if self.specialValueText() and text == self.specialValueText():
            return (QValidator.State.Acceptable, text, pos)
        seconds = parse_duration(text)
        if seconds is None:
            return (QValidator.State.Intermediate, text, pos)
        if not self.minimum() <= seconds <= self.maximum():
            return (QValidator.State.Intermediate, text, pos)
        return (QValidator.State.Acceptable, text, pos)
