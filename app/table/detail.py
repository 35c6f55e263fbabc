"""The detail pane under the lock table (docs/gui.md "Window"): parsed fields, the verdict's
reasons in plain words, and the raw file in monospace."""

from __future__ import annotations

import html
import threading
from datetime import UTC, datetime

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.table.columns import holder_text
from app.table.fleet_rows import display_path
from app.table.lockinfo import (
    STATE_EXPLAIN,
    STATE_WORDS,
    current_reasons,
    deciding_rule,
    display_state,
    is_remote,
    local_time,
    utc_time,
)
from core.errors import UnreadableError
from core.fsutil import read_lock_file
from core.reasons import render
from core.record import LockStatus, State
from core.text import printable, printable_lines
from core.tools import force_words, kind_words, safe_action
from core.verdicts.liveness import hostname

RAW_LIMIT = 64 * 1024
"""At most this many bytes of an unreadable lock file are shown (bytes, 64 KiB)."""


def escaped_text(data: bytes) -> str:
    """``data`` as text for the raw pane: UTF-8 where it decodes, other bytes as ``\\xNN``;
    control characters other than line breaks and tabs, bidi overrides and every other
    Unicode format character escaped as :func:`core.text.printable_lines` does."""
    return raw_text(data.decode("utf-8", errors="backslashreplace"))


def raw_text(text: str) -> str:
    """A lock file's text as the raw pane shows it: line breaks and tabs kept, every other
    control character and every Unicode format character (U+202E...) escaped
    (:func:`core.text.printable_lines`), so the file cannot reorder or hide what it says."""
    return printable_lines(text, tabs=True)


def liveness_text(st: LockStatus) -> str:
    """The "Liveness" field: the holder's liveness and, for a live holder the watcher follows,
    which way (``Evidence.followed``, worded by :func:`core.reasons.render`: "liveness followed
    by the kernel (pidfd)…" or "liveness checked every 2 s…"; docs/watching.md, "Holders'
    exits")."""
    how = st.evidence.followed
    return st.liveness.value + (f" — {render(how)}" if how is not None else "")


class DetailPane(QWidget):
    """Parsed fields, the verdict's reasons in plain words and the raw file (monospace).

    For an unreadable lock the raw file is read in a worker thread with
    :func:`core.fsutil.read_lock_file` (symlinks, FIFOs, devices and directories are never
    opened; at most :data:`RAW_LIMIT` bytes) and shown escaped; ``rawLoaded(path, text,
    placeholder)`` brings it back to the GUI thread."""

    rawLoaded = Signal(str, str, str)
    historyRequested = Signal(str)
    """The user asked for the shown lock's history (its path)."""
    endHolderRequested = Signal(str)
    """The user asked to end the process holding the shown kernel lock (its path)."""

    FIELDS = ("Path", "State", "Rule", "Safe action", "Tool", "Kind", "Force release",
              "Format", "Holder", "PID", "Host", "Liveness", "Acquired", "Expires", "TTL",
              "Tag", "Token")
    """The fields, in order. "Force release" says what a forced release does
    (:func:`core.tools.force_words`: on a server its action there; a file removed or kept in
    the trash); times are local, UTC in their tooltips."""

    # Long: the pane's widgets, laid out once, in the order they appear.
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.values: dict[str, QLabel] = {}
        # a grid, not a QFormLayout: the form layout kept the height a wrapped value had for
        # the previous lock, clipping a longer Rule or Safe action to one line
        form = QGridLayout()
        form.setVerticalSpacing(3)
        form.setColumnStretch(1, 1)
        for row, name in enumerate(self.FIELDS):
            lab = QLabel()
            lab.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            lab.setWordWrap(True)
            lab.setAccessibleName(name)
            self.values[name] = lab
            key = QLabel(name + ":")
            key.setBuddy(lab)
            form.addWidget(key, row, 0, Qt.AlignmentFlag.AlignTop)
            form.addWidget(lab, row, 1, Qt.AlignmentFlag.AlignTop)
        self.reasons = QLabel()
        self.reasons.setAccessibleName("Why: the reasons for the verdict")
        self.reasons.setWordWrap(True)
        self.reasons.setTextFormat(Qt.TextFormat.RichText)
        self.reasons.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.raw = QPlainTextEdit()
        self.raw.setAccessibleName("Raw file")
        self.raw.setReadOnly(True)
        self.raw.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.raw.setPlaceholderText("(file content)")
        self.raw.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        # two lines at least, not Qt's default: the pane shares the height with the table's
        # rows and the docks at the default window size (docs/gui.md "Docks")
        self.raw.setMinimumHeight(2 * self.raw.fontMetrics().lineSpacing()
                                  + 2 * self.raw.frameWidth() + 8)
        fields = QWidget()
        ll = QVBoxLayout(fields)
        ll.setContentsMargins(0, 0, 6, 0)
        ll.addLayout(form)
        self.history = QPushButton("Audit entries…")
        self.history.setToolTip("This lock's audit entries: who took, released, reclaimed or "
                                "forced it, and why (Ctrl+H)")
        self.history.setAccessibleName("Audit entries of this lock")
        self.history.setEnabled(False)
        self.history.clicked.connect(self._history_clicked)
        self.end_holder = QPushButton("End holder process…")
        self.end_holder.setToolTip("End the process holding this kernel lock: named, then asked "
                                   "to end (SIGTERM); killed only if you confirm again")
        self.end_holder.setAccessibleName("End the holder process of this lock")
        self.end_holder.setEnabled(False)
        self.end_holder.clicked.connect(self._end_holder_clicked)
        hl = QHBoxLayout()
        hl.addWidget(self.history)
        hl.addWidget(self.end_holder)
        hl.addStretch(1)
        ll.addLayout(hl)
        ll.addStretch(1)
        left = QScrollArea()
        left.setWidget(fields)
        left.setWidgetResizable(True)
        left.setFrameShape(QFrame.Shape.NoFrame)
        why = QWidget()
        rl = QVBoxLayout(why)
        rl.setContentsMargins(0, 0, 0, 0)
        title = QLabel("<b>Why</b>")
        rl.addWidget(title)
        rl.addWidget(self.reasons)
        self.raw_title = QLabel("<b>Raw file</b>")  # "Raw record" for a lock on a server
        rl.addWidget(self.raw_title)
        rl.addWidget(self.raw, 1)
        # scrolls when the docks leave the pane little height: the reasons are never cut
        right = QScrollArea()
        right.setWidget(why)
        right.setWidgetResizable(True)
        right.setFrameShape(QFrame.Shape.NoFrame)
        right.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(left)
        split.addWidget(right)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        split.setSizes([470, 600])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 6, 6, 6)
        lay.addWidget(split)
        # both sides scroll, so the pane could shrink to nothing: six lines at least, the rest
        # of the height shared between the table's rows and the docks (docs/gui.md "Docks")
        self.setMinimumHeight(6 * self.fontMetrics().lineSpacing() + 12)
        self.status: LockStatus | None = None
        self.rawLoaded.connect(self._raw_loaded)
        self.show_status(None)

    def show_status(self, st: LockStatus | None, *, age: str = "", mine: bool = False,
                    now: datetime | None = None, outside: bool = False) -> None:
        """Show ``st`` (``None`` clears the pane). ``age`` is the formatted age text; ``now``
        (aware UTC, default the clock) the moment the reasons are worded for; ``mine``: this
        app holds it; ``outside``: it lies outside every watched directory (a lock this app
        holds stays listed there: docs/gui.md, "Watched directories and the locks the app
        holds")."""
        self.status = st
        self.history.setEnabled(st is not None)
        self.end_holder.setEnabled(st is not None and st.kernel_pid is not None)
        server = st is not None and is_remote(st.path)  # no file: the server's record
        self.raw_title.setText("<b>Raw record</b>" if server else "<b>Raw file</b>")
        self.raw.setAccessibleName("The lock's record on its server" if server else "Raw file")
        self.raw.setPlaceholderText("(no record)" if server else "(file content)")
        for lab in self.values.values():
            lab.setText("")
            lab.setToolTip("")
        if st is None:
            self.reasons.setText("Select a lock to see who holds it and why it is in its state.")
            self.raw.setPlainText("")
            return
        rec = st.record
        v = self.values
        v["Path"].setText(printable(display_path(st.path)))  # host:/path for a fleet row
        state = STATE_WORDS[display_state(st)] + (" — held by this Lockwarden" if mine else "")
        if st.anchor_tool:
            state += f" (read-only: {st.anchor_tool}'s kernel-lock anchor, never deleted)"
        elif st.read_only:
            state += " (read-only: managed by its ledger)"
        if outside and not is_remote(st.path):
            state += " (outside the watched directories)"
        v["State"].setText(state)
        v["State"].setToolTip(STATE_EXPLAIN[display_state(st)])
        v["Rule"].setText(deciding_rule(st))
        v["Safe action"].setText(safe_action(st))
        v["Tool"].setText(st.tool)
        v["Kind"].setText(kind_words(st))
        v["Force release"].setText(force_words(st))
        v["Holder"].setText(printable(holder_text(st, hostname())))
        v["PID"].setText("" if st.holder_pid is None else str(st.holder_pid))
        if rec is None and st.kernel_held:
            v["Liveness"].setText(liveness_text(st))
        if rec is not None:
            v["Format"].setText(rec.format)
            v["Host"].setText(printable(rec.host or ""))
            v["Liveness"].setText(liveness_text(st))
            self._set_acquired(age)
            exp = rec.effective_expiry()
            v["Expires"].setText(local_time(exp) if exp else "never")
            v["Expires"].setToolTip(utc_time(exp) if exp else "")
            v["TTL"].setText("" if rec.ttl is None else f"{rec.ttl:g} s")
            v["Tag"].setText(printable(rec.tag or ""))
            v["Token"].setText(rec.token or "")
        self._set_reasons(now)
        self.raw.setPlainText(raw_text(rec.raw) if rec is not None else "")
        if rec is None and st.state is State.UNREADABLE:
            self.raw.setPlaceholderText("(reading…)")
            self._load_raw(st.path)

    def _end_holder_clicked(self) -> None:
        if self.status is not None:
            self.endHolderRequested.emit(self.status.path)

    def _history_clicked(self) -> None:
        if self.status is not None:
            self.historyRequested.emit(self.status.path)

    def _load_raw(self, path: str) -> None:
        def work() -> None:
            text, placeholder = "", ""
            try:
                data, _info = read_lock_file(path, RAW_LIMIT)
                text = escaped_text(data)
                if not text:
                    placeholder = "(empty file)"
            except UnreadableError as exc:
                placeholder = f"(not shown: {exc.reason})"
            except OSError as exc:
                placeholder = f"(not shown: {exc.strerror or exc})"
            try:
                self.rawLoaded.emit(path, text, placeholder)
            except RuntimeError:  # the pane is gone
                pass

        threading.Thread(target=work, name="lockwarden-raw", daemon=True).start()

    def _raw_loaded(self, path: str, text: str, placeholder: str) -> None:
        st = self.status
        if st is None or st.path != path or st.record is not None:
            return  # the selection moved on meanwhile
        self.raw.setPlaceholderText(placeholder or "(file content)")
        self.raw.setPlainText(text)

    def _set_acquired(self, age: str) -> None:
        st = self.status
        rec = st.record if st is not None else None
        if st is None or rec is None:
            return
        label = self.values["Acquired"]
        if rec.acquired_at is not None:
            label.setText(local_time(rec.acquired_at) + (f" ({age} ago)" if age else ""))
            label.setToolTip(utc_time(rec.acquired_at))
        elif st.file is not None:  # pidfiles and other tools' files record no time
            when = datetime.fromtimestamp(st.file.mtime_ns / 1e9, UTC)
            label.setText(
                local_time(when) + (f" ({age} ago)" if age else "")
                + " — from the file's modification time: the lock records no time")
            label.setToolTip(utc_time(when))

    def _set_reasons(self, now: datetime | None) -> None:
        st = self.status
        if st is None:
            return
        reasons = current_reasons(st, now)
        if st.error and st.error not in reasons:
            reasons.append(st.error)
        if not reasons:
            reasons = ["(no reasons given)"]
        text = "<ul style='margin-left:-20px'>" + "".join(
            f"<li>{html.escape(printable(r))}</li>" for r in reasons) + "</ul>"
        if text != self.reasons.text():
            self.reasons.setText(text)

    def tick(self, *, age: str, now: datetime) -> None:
        """Re-word the time-dependent texts ("Acquired … (3m ago)", "held for 3m 12s",
        "expired 5s ago") for ``now`` without touching the rest (the raw file keeps its
        scroll position and selection)."""
        if self.status is None:
            return
        self._set_acquired(age)
        self._set_reasons(now)
