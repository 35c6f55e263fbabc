"""``[history]``: whether and how long the observation store keeps what the watcher saw
(docs/history.md, "Settings"), and spans of time written as ``"30d"``, ``"12h"``, ``"90m"``.

::

    [history]
    enabled = true      # the app and `lockwarden watch` record transitions
    keep = "30d"        # rows older than this are dropped (s, m, h, d, w; or a number of s)
    max_mb = 200        # and the oldest rows while the rows outgrow this many MiB
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from core.config.problems import unknown_key_fallback
from core.text import parse_duration


def parse_span(text: str | float) -> float:
    """Seconds of a span such as ``"30d"`` (:func:`core.text.parse_duration`).

    Raises:
        ValueError: not a positive span of at most 100 years.
    """
    return parse_duration(text)


@dataclass
class HistorySettings:
    """``[history]``: ``enabled`` (record transitions: the app and ``lockwarden watch``),
    ``keep`` (retention, a span such as ``"30d"``: :func:`parse_span`), ``max_mb`` (size bound
    of the rows, MiB, > 0)."""

    enabled: bool = True
    keep: str = "30d"
    max_mb: float = 200.0

    @property
    def keep_s(self) -> float:
        """``keep`` in seconds (30 days when it cannot be read: the loader already warned)."""
        try:
            return parse_span(self.keep)
        except ValueError:
            return 30 * 86400.0

    @property
    def max_bytes(self) -> int:
        """``max_mb`` in bytes."""
        return int(self.max_mb * 1024 * 1024)

    def to_dict(self) -> dict[str, Any]:
        """The ``[history]`` table as saved."""
        return {"enabled": self.enabled, "keep": self.keep, "max_mb": float(self.max_mb)}


def parse_history(raw: object, target: HistorySettings,
                  problem: Any) -> None:
    """Read a ``[history]`` table into ``target``; each bad value is reported through
    ``problem(key, message, fallback)`` and left at its default."""
    if not isinstance(raw, dict):
        problem("history", f"must be a table, not {type(raw).__name__}", "using defaults")
        return
    for name, value in raw.items():
        key = f"history.{name}"
        if name == "enabled":
            if isinstance(value, bool):
                target.enabled = value
            else:
                problem(key, f"must be true or false, not {value!r}", "using true")
        elif name == "keep":
            try:
                parse_span(value)
                target.keep = str(value) if isinstance(value, str) else f"{float(value):g}s"
            except (TypeError, ValueError) as exc:
                problem(key, str(exc), f"using {target.keep!r}")
        elif name == "max_mb":
            if (isinstance(value, int | float) and not isinstance(value, bool)
                    and math.isfinite(value) and value > 0):
                target.max_mb = float(value)
            else:
                problem(key, f"must be a positive number of MiB, not {value!r}",
                        f"using {target.max_mb:g}")
        else:
            problem(key, "unknown key",
                    unknown_key_fallback(name, ("enabled", "keep", "max_mb")))
