""""Notify me when free" (docs/gui.md "Notify me when free"): the user picks a held lock on a
row's context menu or in the tray menu; the first time it is released, reclaimed (another
holder took it over) or turns stale, one notification says so and the lock is dropped from
the list.

:class:`FreeWatch` follows the inventory's merged updates (``WatchBridge.updated``, GUI thread)
and emits :attr:`FreeWatch.freed`; the app shows it through the tray, or in the status bar when
there is no tray.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from PySide6.QtCore import QObject, Signal

from core.record import LockStatus, State


def holder_of(st: LockStatus) -> tuple[object, ...]:
    """What names a lock's holder: PID, holder name, host, token, acquisition time, kernel
    PID. A change of it is another holder (the lock was taken over)."""
    rec = st.record
    if rec is None:
        return (st.kernel_pid,)
    return (rec.pid, rec.holder, rec.host, rec.token, rec.acquired_at, st.kernel_pid)


def wanted(st: LockStatus | None) -> bool:
    """True when a "Notify me when free" makes sense for ``st``: it is held (or expired: its
    holder may still work)."""
    return st is not None and st.state in (State.HELD, State.EXPIRED, State.WRITING)


class FreeWatch(QObject):
    """The locks the user asked to be told about.

    Signals:
        freed(str, str, str, str): ``(path, title, body, kind)``, once per request; ``kind``
            is ``free`` (released: gone or free), ``taken`` (reclaimed or taken over by another
            holder) or ``stale``.
        changed(): the set of watched locks changed (menus refresh their check marks).
    """

    freed = Signal(str, str, str, str)
    changed = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._watched: dict[str, tuple[object, ...]] = {}

    def paths(self) -> list[str]:
        """The locks being watched."""
        return list(self._watched)

    def watching(self, path: str) -> bool:
        """True when ``path`` is being watched."""
        return path in self._watched

    def add(self, st: LockStatus) -> bool:
        """Watch ``st``'s lock (as held by its present holder); False when it is not held
        (nothing to wait for)."""
        if not wanted(st):
            return False
        self._watched[st.path] = holder_of(st)
        self.changed.emit()
        return True

    def remove(self, path: str) -> None:
        """Stop watching ``path``."""
        if self._watched.pop(path, None) is not None:
            self.changed.emit()

    def toggle(self, st: LockStatus) -> bool:
        """Watch ``st``'s lock, or stop watching it; True when it is watched afterwards."""
        if st.path in self._watched:
            self.remove(st.path)
            return False
        return self.add(st)

    def apply(self, updates: Sequence[tuple[str, LockStatus | None]]) -> None:
        """Slot for ``WatchBridge.updated``: notify and drop each watched lock that is free,
        stale or held by someone else now."""
        if not self._watched:
            return
        for path, st in updates:
            before = self._watched.get(path)
            if before is None:
                continue
            name = os.path.basename(path)
            if st is None or st.state is State.FREE:
                kind, title, body = "free", f"{name} is free", f"{path} was released"
            elif st.state is State.STALE:
                kind, title, body = ("stale", f"{name} is stale",
                                     f"{path}: its holder is gone; the lock can be reclaimed")
            elif st.state is State.HELD and holder_of(st) != before:
                kind, title, body = ("taken", f"{name} changed hands",
                                     f"{path} was reclaimed or taken over")
            else:
                continue
            del self._watched[path]
            self.freed.emit(path, title, body, kind)
            self.changed.emit()
