"""Confirmations of risky actions (docs/gui.md "Window", "Dialogs"): a light one for reclaiming
a stale lock, one that needs a reason for a forced release or forced reclaim, and one that also
needs the user to discard, by name, the unsaved changes a file stands for."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from datetime import datetime

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.table.lockinfo import is_remote, lock_name
from core.engine.end_holder import TERM_GRACE
from core.holder import describe_holder
from core.reasons import Reason, render
from core.record import LockStatus, State
from core.text import printable
from core.tools import removal_words
from core.verdicts.liveness import ProcessFacts


class ConfirmDialog(QDialog):
    """Confirmation of a risky action. With ``ask_reason`` (forced release/reclaim of a lock
    whose holder may be alive) the OK button stays disabled until a reason is typed; the
    reason goes into the audit entry."""

    def __init__(self, title: str, text: str, ok_text: str, *, ask_reason: bool = False,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.label = QLabel(text)
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.PlainText)
        self.label.setMinimumWidth(420)
        lay = QVBoxLayout(self)
        lay.addWidget(self.label)
        self.reason = QLineEdit()
        self.reason.setPlaceholderText("Reason (recorded in the audit log)")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        self.ok = buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok.setText(ok_text)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        if ask_reason:
            lay.addWidget(QLabel("Reason:"))
            lay.addWidget(self.reason)
            self.ok.setEnabled(False)
            self.reason.textChanged.connect(lambda t: self.ok.setEnabled(bool(t.strip())))
        self.ask_reason = ask_reason
        lay.addWidget(buttons)

    def accept(self) -> None:
        """Refuse to accept without a reason when one is required."""
        if self.ask_reason and not self.reason.text().strip():
            return
        super().accept()


def force_dialog(st: LockStatus, *, reclaim: bool, parent: QWidget | None = None) -> ConfirmDialog:
    """Confirmation for a forced release (``reclaim=False``) or forced reclaim of ``st``. It
    says what will happen: delete the lock file, or for a lock on a server what its server
    does (:func:`core.tools.removal_words`: terminate the PostgreSQL session, delete the Redis
    key, revoke the etcd lease; docs/remote.md, "What a release does")."""
    name = printable(lock_name(st.path))
    verb = "Force reclaim" if reclaim else "Force release"
    if st.kind == "server":
        return _server_force_dialog(st, name, parent)
    what = ("remove it and take it for Lockwarden" if reclaim else "delete the lock file")
    if not is_remote(st.path):
        what = (("replace it with a lock of Lockwarden's" if reclaim else "remove the lock file")
                + " (a file Lockwarden did not write goes to the trash"
                + ("" if reclaim else "; Undo puts it back") + ")")
    expired = ""
    if st.state is State.EXPIRED:
        expired = ("Its lease has expired, but its holder is still alive and may still be "
                   "working.\n\n")
    task_mcp = ""
    if not reclaim and st.record is not None and st.record.format == "task-mcp":
        task_mcp = ("This is a Task MCP lock: Task MCP's own release_lock deletes a lock "
                    "without checking who holds it, so its holder will not notice that the "
                    "lock is gone.\n\n")
    text = (f"{verb} {name}?\n\nHolder: {describe_holder(st)}\nPath: {printable(st.path)}"
            f"\n\n{expired}{task_mcp}This will {what}. If the holder is still working, two "
            "programs may then run what the lock protects at the same time.")
    return ConfirmDialog(f"{verb}…", text, verb, ask_reason=True, parent=parent)


def _server_force_dialog(st: LockStatus, name: str, parent: QWidget | None) -> ConfirmDialog:
    """The forced release of a lock on a server, in its server's terms."""
    expired = ""
    if st.state is State.EXPIRED:
        expired = ("Its lease has expired, but its holder is still alive and may still be "
                   "working.\n\n")
    text = (f"Force release {name}?\n\nHolder: {describe_holder(st)}\nLock: "
            f"{printable(st.path)}\n\n{expired}This will {removal_words(st)}. If the holder is "
            "still working, another program may take the lock at once and both may then run "
            "what it protects at the same time.")
    return ConfirmDialog("Force release…", text, "Force release", ask_reason=True,
                         parent=parent)


def reclaim_dialog(st: LockStatus, parent: QWidget | None = None) -> ConfirmDialog:
    """Lighter confirmation for reclaiming a stale lock (no reason needed)."""
    reasons = "\n".join(f"• {printable(render(r))}" for r in st.reasons) or "• judged stale"
    text = (f"Reclaim {printable(os.path.basename(st.path))}? Lockwarden will break the stale "
            f"lock and hold it.\n\nHolder: {describe_holder(st)}\n{reasons}")
    return ConfirmDialog("Reclaim lock", text, "Reclaim", parent=parent)


def _process_lines(facts: ProcessFacts) -> str:
    """Name, user, PID, start and command line of a process, one per line, for a person to
    recognise it before it is ended."""
    started = datetime.fromtimestamp(facts.start).astimezone().strftime("%Y-%m-%d %H:%M:%S")
    cmd = shlex.join(facts.cmdline) if facts.cmdline else "(not readable)"
    if len(cmd) > 500:
        cmd = cmd[:500] + "…"
    return (f"Process: {printable(facts.name)} (PID {facts.pid})\n"
            f"User: {printable(facts.user or 'unknown')}\n"
            f"Started: {started}\n"
            f"Command line: {printable(cmd)}")


def _own_warning(facts: ProcessFacts, own: str | None) -> str:
    """A paragraph saying that the process is the user's own shell or session leader
    (:func:`core.kernel.proof.own_session_role`), or "" when it is not."""
    if own is None:
        return ""
    return (f"Warning: PID {facts.pid} is {printable(own)}: ending it ends the programs of "
            "your session.\n\n")


def sharers_text(sharers: Sequence[str]) -> str:
    """``"sleep (PID 4243) shares it and keeps the lock after this one ends"`` for the other
    processes proven to hold the same kernel lock (``sharers``: their labels, "name (PID
    N)"), as the CLI's kill-holder prompt says it; "" for none."""
    if not sharers:
        return ""
    one = len(sharers) == 1
    return (f"{', '.join(printable(s) for s in sharers)} share{'s' if one else ''} it and "
            f"keep{'s' if one else ''} the lock after this one ends")


def end_holder_dialog(st: LockStatus, facts: ProcessFacts, own: str | None = None,
                      parent: QWidget | None = None,
                      sharers: Sequence[str] = ()) -> ConfirmDialog:
    """Confirmation for ending the process ``facts`` that holds a kernel lock on ``st``'s file:
    it names the process, its user and its command line, and says so when it is the user's own
    shell or session leader (``own``, :func:`core.kernel.proof.own_session_role`) and when
    other processes share the lock (``sharers``, "name (PID N)": a child of ``flock(1)``
    keeps it after its parent ends, :func:`sharers_text`); a reason is required (it goes to
    the audit log). Gracefully first: SIGTERM (docs/gui.md, "End holder process")."""
    name = printable(os.path.basename(st.path))
    shared = sharers_text(sharers)
    shared = f"Note: {shared}; end that one too to free the lock.\n\n" if shared else ""
    text = (f"End {printable(facts.name)} (PID {facts.pid}), which holds a kernel lock on "
            f"{name}?\n\n{_own_warning(facts, own)}{shared}{_process_lines(facts)}\n"
            f"Path: {printable(st.path)}\n\n"
            "Only the kernel knows this lock: deleting the file would not release it. "
            "Lockwarden asks the process to end (SIGTERM), so it can clean up, and waits "
            f"{TERM_GRACE:g} s for it; if it is still running then, you will be asked before it "
            "is killed. Do this only if it hangs: whatever it was doing stops.")
    return ConfirmDialog("End holder process…", text, "End process", ask_reason=True,
                         parent=parent)


class UnsavedDialog(ConfirmDialog):
    """Force release of a file that stands for unsaved work (``why``: the ``unsaved_changes``
    reason, :func:`core.verdicts.unsaved.unsaved_changes`): names the changes and where they
    are, offers the recovery command (shown, selectable, and a button copies it), and accepts
    only when the user ticks "Discard the unsaved changes…" and gives a reason. The file goes
    to the trash (docs/gui.md, "Window")."""

    def __init__(self, st: LockStatus, why: Reason, parent: QWidget | None = None) -> None:
        name = printable(os.path.basename(st.path))
        text = (f"{name} holds unsaved work.\n\n{printable(render(why))}.\n\nHolder: "
                f"{describe_holder(st)}\nPath: {printable(st.path)}\n\nRecover the changes "
                "first. Force release moves the file to the trash (Undo puts it back); the "
                f"{printable(str(why.get('tool')))} that wrote it will no longer see it.")
        super().__init__("Unsaved changes", text, "Force release", ask_reason=True,
                         parent=parent)
        self.command = QLineEdit(str(why.get("recover") or ""))
        self.command.setReadOnly(True)
        self.command.setAccessibleName("Recovery command")
        self.copy = QPushButton("Copy command")
        self.copy.setAccessibleName("Copy the recovery command")
        self.copy.clicked.connect(lambda: QGuiApplication.clipboard().setText(
            self.command.text()))
        row = QHBoxLayout()
        row.addWidget(QLabel("Recover with:"))
        row.addWidget(self.command, 1)
        row.addWidget(self.copy)
        lay = self.layout()
        assert isinstance(lay, QVBoxLayout)
        lay.insertLayout(1, row)
        self.discard = QCheckBox(
            f"Discard the unsaved changes to {printable(os.path.basename(str(why.get('file'))))}")
        self.discard.setAccessibleName("Discard the unsaved changes")
        lay.insertWidget(2, self.discard)
        self.discard.toggled.connect(self._update_ok)
        self.reason.textChanged.connect(self._update_ok)
        self._update_ok()

    def _update_ok(self) -> None:
        self.ok.setEnabled(self.discard.isChecked() and bool(self.reason.text().strip()))

    def accept(self) -> None:
        """Refuse to accept unless the changes are discarded by name and a reason is given."""
        if not self.discard.isChecked():
            return
        super().accept()


def unsaved_dialog(st: LockStatus, why: Reason, parent: QWidget | None = None) -> UnsavedDialog:
    """Confirmation for a forced release of ``st``, a file standing for unsaved work ``why``."""
    return UnsavedDialog(st, why, parent)


def kill_holder_dialog(st: LockStatus, facts: ProcessFacts, own: str | None = None,
                       parent: QWidget | None = None) -> ConfirmDialog:
    """The second confirmation: the holder did not exit within :data:`TERM_GRACE` s of
    SIGTERM; kill it (SIGKILL, which it cannot catch nor clean up after)? ``own`` as in
    :func:`end_holder_dialog`."""
    text = (f"{printable(facts.name)} (PID {facts.pid}) is still running {TERM_GRACE:g} s after "
            f"it was asked to end, and still holds the lock on "
            f"{printable(os.path.basename(st.path))}.\n\n{_own_warning(facts, own)}"
            f"{_process_lines(facts)}\n\n"
            "Kill it (SIGKILL)? It cannot clean up: files it was writing may be left "
            "half-written.")
    return ConfirmDialog("Kill holder process…", text, "Kill process", parent=parent)
