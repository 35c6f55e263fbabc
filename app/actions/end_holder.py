"""Ending the process that holds a kernel lock, from the window (docs/gui.md, "End holder
process"): a confirmation naming the proven holder (its user, command line and start time, and
whether it is the user's own shell or session leader), SIGTERM and a bounded wait in a worker
thread, then a second confirmation before SIGKILL while the same process still holds the lock
(core/engine/end_holder.py). Other processes holding the same lock (a child of ``flock(1)``
shares its descriptor and keeps the lock) are named before, and said to still hold it after."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Protocol

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QDialog, QWidget

from app.bridges.lock_actions import LockActions
from core.record import LockStatus
from core.text import printable
from core.verdicts.liveness import ProcessFacts


def sharers(pids: Sequence[int]) -> list[str]:
    """"name (PID N)" of each of ``pids`` (other holders of one kernel lock) still running,
    this app's own process left out."""
    from core.verdicts.liveness import process_facts

    out = []
    for pid in pids:
        if pid == os.getpid():
            continue
        f = process_facts(pid)
        out.append(f"{f.name} (PID {pid})" if f is not None else f"PID {pid}")
    return out


class Host(Protocol):
    """What the flow needs of :class:`app.actions.commands.Commands`."""

    def status_for(self, path: str) -> LockStatus | None: ...
    def show_error(self, title: str, text: str) -> object: ...
    def show_dialog(self, dlg: QDialog) -> None: ...
    def run_in_worker(self, fn: Callable[[], object]) -> None: ...
    def dialog_parent(self) -> QWidget: ...


class EndHolderFlow(QObject):
    """The two confirmations of ending a kernel lock's holder (module docstring).

    Args:
        ops: the commands that show dialogs and errors and run work off the GUI thread.
        actions: the engine calls (:meth:`app.bridges.lock_actions.LockActions.end_holder`).
    """

    _stillRunning = Signal(str, object, object, str)  # path, status, ProcessFacts, reason
    _stillHeld = Signal(str, str)  # title, text: another process keeps the lock

    def __init__(self, ops: Host, actions: LockActions, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._ops = ops
        self._actions = actions
        self._stillRunning.connect(self.open_kill)
        self._stillHeld.connect(lambda title, text: self._ops.show_error(title, text))

    def open(self, path: str) -> QDialog | None:
        """Ending the process that holds a kernel lock on ``path`` (docs/gui.md, "End holder
        process"): a confirmation naming the process, its user and its command line and asking
        for a reason; then SIGTERM and a bounded wait
        (:data:`core.engine.end_holder.TERM_GRACE`) in a worker thread; if the process is
        still running, a second confirmation before SIGKILL (:meth:`open_kill`).
        ``None`` when no kernel lock names a live holder (the user is told)."""
        from app.dialogs import end_holder_dialog
        from core.engine.end_holder import TERM_GRACE, holders
        from core.kernel.proof import own_session_role
        from core.verdicts.liveness import process_facts

        st = self._ops.status_for(path)
        pids = holders(path) if st is not None else ()
        facts = process_facts(pids[0]) if pids else None
        if st is None or facts is None:
            self._ops.show_error("Nothing to end", f"No running process can be proven to hold a "
                            f"kernel lock on {printable(path)} (none is held, or its holder "
                            "is another user's process).")
            return None
        own = own_session_role(facts.pid)
        dlg = end_holder_dialog(st, facts, own=own, parent=self._ops.dialog_parent(),
                                sharers=sharers(pids[1:]))

        def go() -> None:
            reason = dlg.reason.text().strip()

            def work() -> None:
                gone = self._actions.end_holder(path, reason=reason, expected_pid=facts.pid,
                                                expected_start=facts.start, grace=TERM_GRACE,
                                                own_session=own is not None)
                if not gone:
                    self._stillRunning.emit(path, st, facts, reason)
                else:
                    self._after(path, facts)

            self._ops.run_in_worker(work)

        dlg.accepted.connect(go)
        self._ops.show_dialog(dlg)
        return dlg

    def _after(self, path: str, facts: ProcessFacts) -> None:
        """(worker thread) ``facts`` has exited: when other processes still hold the lock (a
        child of ``flock(1)`` shares its descriptor), say so -- the lock is not free."""
        from core.engine.end_holder import holders

        left = [p for p in holders(path) if p != facts.pid]
        if left:
            who = ", ".join(sharers(left))
            self._stillHeld.emit(
                "The lock is still held",
                f"{printable(facts.name)} (PID {facts.pid}) ended, but {who}, which shared its "
                f"lock on {printable(path)}, still hold{'s' if len(left) == 1 else ''} it. End "
                "that process too (End holder process…) to free the lock.")

    def open_kill(self, path: str, st: LockStatus, facts: ProcessFacts,
                         reason: str) -> QDialog:
        """The second confirmation of :meth:`open`: the holder ``facts`` is still
        running after SIGTERM; on OK it is killed (SIGKILL) -- only while it is still that
        process and still the holder (:func:`core.engine.end_holder.end_holder`)."""
        from app.dialogs.confirm import kill_holder_dialog
        from core.kernel.proof import own_session_role

        own = own_session_role(facts.pid)
        dlg = kill_holder_dialog(st, facts, own=own, parent=self._ops.dialog_parent())

        def go() -> None:
            def work() -> None:
                self._actions.end_holder(path, reason=reason, expected_pid=facts.pid,
                                         expected_start=facts.start, kill=True,
                                         own_session=own is not None)
                self._after(path, facts)

            self._ops.run_in_worker(work)

        dlg.accepted.connect(go)
        self._ops.show_dialog(dlg)
        return dlg


__all__ = ["EndHolderFlow", "Host"]
