"""The app's history recorder (docs/history.md, "Recording"; docs/gui.md "History"): a
:class:`core.history.recorder.Recorder` fed by the watcher's change sets, started with the
first inventory, and its status brought to the GUI thread.

The recorder writes on its own thread, never on the GUI thread; :meth:`HistoryRecorder.on_change`
is called on the watcher's thread and only queues. ``[history] enabled = false`` starts none.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QObject, Signal

from core.config.history import HistorySettings
from core.history.recorder import Recorder
from core.record import LockStatus
from core.watch.inventory import ChangeSet


class HistoryRecorder(QObject):
    """Owns the app's :class:`~core.history.recorder.Recorder`.

    Signals:
        statusChanged(object): why history is paused (``str``), or ``None`` when it records;
            emitted from the recorder's thread, delivered queued in the GUI thread.
    """

    statusChanged = Signal(object)

    def __init__(self, settings: HistorySettings, parent: QObject | None = None, *,
                 path: str | None = None) -> None:
        super().__init__(parent)
        self.enabled = settings.enabled
        self.paused: str | None = None
        self.recorder: Recorder | None = None
        if settings.enabled:
            self.recorder = Recorder(path, keep_s=settings.keep_s, max_bytes=settings.max_bytes,
                                     on_status=self.statusChanged.emit)
        self.statusChanged.connect(self._remember)
        self._started = False

    def _remember(self, reason: object) -> None:
        self.paused = reason if isinstance(reason, str) else None

    def on_started(self, initial: Sequence[LockStatus], dirs: Sequence[str]) -> None:
        """The watcher's first inventory (any thread): start recording from it."""
        if self.recorder is not None and not self._started:
            self._started = True
            self.recorder.start(initial, dirs)

    def on_change(self, changes: ChangeSet) -> None:
        """The watcher's change sets (its thread): queued for the recorder."""
        if self.recorder is not None and self._started:
            self.recorder.on_change(changes)

    def close(self) -> None:
        """Write what is queued and stop (at most about 2 s)."""
        if self.recorder is not None:
            self.recorder.close()
