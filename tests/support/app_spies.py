"""Test helper: record a Qt signal's emissions in the test, so the app keeps no lists for tests
(its notifications, errors and lost locks are signals: ``TrayController.notified``,
``Commands.errorShown``, ``LockActions.lost``)."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import SignalInstance


class SignalSpy:
    """Every emission of ``signal`` since this spy was made, as argument tuples, oldest
    first."""

    def __init__(self, signal: SignalInstance) -> None:
        self.calls: list[tuple[Any, ...]] = []

        def record(*args: Any) -> None:
            self.calls.append(args)

        self._record = record  # keep the slot alive as long as the spy
        signal.connect(record)

    @property
    def last(self) -> tuple[Any, ...] | None:
        """The last emission's arguments, or ``None`` before the first."""
        return self.calls[-1] if self.calls else None

    def column(self, i: int) -> list[Any]:
        """Argument ``i`` of every emission (e.g. the titles of notifications)."""
        return [c[i] for c in self.calls]
