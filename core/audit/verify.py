"""Checking an audit log (``lockwarden audit --verify``): the hash chain, Lockwarden lines that
lost their ``prev``, interrupted writes and their repairs, and this user's chain head.

Part of :mod:`core.audit`. The rules, in the order a line meets them: docs/audit.md, "What
``verify`` checks".
"""

from __future__ import annotations

import os

from core.audit import appender
from core.audit import heads as audit_heads
from core.audit.heads import ChainHead
from core.audit.model import (
    TAIL_WINDOW,
    ZERO_HASH,
    AuditEntry,
    VerifyResult,
    explain,
    resolve_log_path,
)
from core.audit.parse import load_object
from core.audit.read import RawLine, entry_of, is_entry_line, iter_lines, open_log
from core.errors import UnreadableError


def verify(path: str) -> VerifyResult:
    """Check the audit log for ``path`` (a log, a lock file or a directory, as
    :func:`core.audit.read`) and report the FIRST bad line.

    Reasons are plain words, e.g. ``"line 7: prev does not match line 6 (edited, removed or
    reordered)"``, ``"line 3: not valid JSON"``. A missing log gives ``missing=True`` (and
    ``ok`` unless this user's chain head says the log existed). Never raises: a log that cannot
    be read gives ``ok=False``, ``bad_line=None`` and the reason. Rules: module docstring.
    """
    log = resolve_log_path(path)
    appender.flush_heads()  # this process's heads written in batches: write them first
    head = audit_heads.load(log)
    try:
        fd = open_log(log)
    except UnreadableError as exc:
        return VerifyResult(False, 0, 0, None, f"{log}: {exc.reason}", log)
    if fd is None:
        return _missing(log, head)
    checker = _Checker(log, head, os.fstat(fd))
    try:
        for raw in iter_lines(fd):
            checker.feed(raw)
    except OSError as exc:
        return VerifyResult(
            False, checker.entries, checker.foreign, None, f"{log}: {explain(exc)}", log
        )
    finally:
        os.close(fd)
    return checker.result()


def _missing(log: str, head: ChainHead | None) -> VerifyResult:
    """The verdict for a log that does not exist: ``ok`` unless this user's head says it did."""
    reason = f"no audit log at {log}"
    if head is None:
        return VerifyResult(True, 0, 0, None, reason, log, missing=True)
    reason += f", though you appended to it at {head.written}: it was removed or renamed"
    return VerifyResult(False, 0, 0, None, reason, log, missing=True, head_checked=True)


class _Checker:
    """State of one forward pass over a log's lines (fed by :func:`verify`)."""

    def __init__(self, log: str, head: ChainHead | None, st: os.stat_result) -> None:
        self.log = log
        self.size = st.st_size
        self.entries = 0
        self.foreign = 0
        self.repaired = 0
        self.bad: tuple[int, str] | None = None
        self.prev_digest: str | None = None
        self.prev_line = 0
        self.last_lineno = 0
        self.pending: tuple[AuditEntry, str, bool] | None = None  # error line, digest before, LF
        self.head = head
        self.replaced = head is not None and head.ino != st.st_ino
        self.head_open = head is not None and not self.replaced

    def fail(self, line: int, reason: str) -> None:
        """Note a bad line; the one with the lowest number is reported."""
        if self.bad is None or line < self.bad[0]:
            self.bad = (line, f"line {line}: {reason}")

    def feed(self, raw: RawLine) -> None:
        """Check the next physical line."""
        self.last_lineno = raw.lineno
        if not is_entry_line(raw):
            return
        e = entry_of(self.log, raw)
        self.entries += 1
        if e.foreign and e.error is None:
            self.foreign += 1
        if self.pending is not None:
            self._settle(e, *self.pending)
            self.pending = None
        if e.error is not None:
            self.pending = (e, self.prev_digest or ZERO_HASH, raw.terminated)
        else:
            problem = check_line(e, self.prev_digest, self.prev_line)
            if problem is not None:
                self.fail(e.line, problem)
        self._check_head(raw, e)
        self.prev_digest, self.prev_line = e.digest, e.line

    def _settle(self, e: AuditEntry, bad: AuditEntry, before: str, _terminated: bool) -> None:
        """``e`` follows the erroneous line ``bad`` (``before``: digest of the line before
        that): only a repair entry naming ``bad`` excuses it."""
        if is_repair_of(e, bad, before):
            self.repaired += 1
        else:
            self.fail(bad.line, bad.error or "not an entry")

    def _check_head(self, raw: RawLine, e: AuditEntry) -> None:
        """Compare the first line reaching the head's offset with the recorded head."""
        head = self.head
        if not self.head_open or head is None or raw.offset + raw.total < head.offset:
            return
        self.head_open = False
        if raw.offset != head.offset or raw.digest != head.digest:
            self.fail(e.line, f"differs from the entry you appended at {head.written} "
                              f"(byte {head.offset}): the log was rewritten since")  # fmt: skip

    def result(self) -> VerifyResult:
        """The verdict once every line was fed."""
        torn = False
        if self.pending is not None:
            bad, _before, terminated = self.pending
            long = bad.offset < 0 or self.size - bad.offset > TAIL_WINDOW
            if terminated or long:
                self.fail(bad.line, bad.error or "not an entry")
            else:
                torn = True
        if self.replaced and self.head is not None:
            self.fail(1, f"this is not the file you last appended to (at {self.head.written}): "
                         "the log was replaced since")  # fmt: skip
        if self.head_open and self.head is not None:
            self.fail(self.last_lineno + 1, f"the log ends at byte {self.size}, before the "
                      f"entry you appended at {self.head.written} (bytes {self.head.offset}-"
                      f"{self.head.end}): it was truncated or rewritten since")  # fmt: skip
        bad_line, reason = self.bad if self.bad is not None else (None, None)
        if reason is None and torn and self.pending is not None:
            reason = (
                f"line {self.pending[0].line}: interrupted write (the last line is cut short: "
                "no newline, not a complete entry; disk full or a crash during an append); "
                "the next append repairs it"
            )
        return VerifyResult(
            bad_line is None, self.entries, self.foreign, bad_line, reason, self.log,
            torn_tail=torn, repaired=self.repaired, head_checked=self.head is not None,
        )  # fmt: skip


def is_repair_of(e: AuditEntry, bad: AuditEntry, before: str) -> bool:
    """True when ``e`` is Lockwarden's ``repair`` entry for the interrupted write ``bad``, whose
    previous non-blank line has SHA-256 ``before`` (64 zeros when it was the first line)."""
    if e.error is not None or e.foreign or e.operation != "repair" or e.prev != bad.digest:
        return False
    torn = e.details.get("torn")
    return (
        isinstance(torn, dict)
        and torn.get("digest") == bad.digest
        and torn.get("offset") == bad.offset
        and e.details.get("before") == before
    )


def check_line(e: AuditEntry, prev_digest: str | None, prev_line: int) -> str | None:
    """What is wrong with the JSON-object line ``e`` given the SHA-256 of the previous
    non-blank line (None when ``e`` is the first) and that line's number; None when fine."""
    if e.foreign:
        return None
    if e.prev is None:
        obj = load_object(e.raw.encode("utf-8", "surrogateescape"))
        if obj is not None and "prev" not in obj:
            return (
                "Lockwarden's entry without prev (prev was removed, which hides any edit "
                "before it)"
            )
    if not isinstance(e.prev, str) or len(e.prev) != 64 or _not_hex(e.prev):
        return "prev is not a SHA-256 hex digest"
    if prev_digest is None:
        if e.prev != ZERO_HASH:
            return (
                "prev should be 64 zeros in the first line of a log (lines before it were removed)"
            )
        return None
    if e.prev != prev_digest:
        return f"prev does not match line {prev_line} (edited, removed or reordered)"
    return None


def _not_hex(s: str) -> bool:
    """True when ``s`` holds anything but lower-case hex digits."""
    return any(c not in "0123456789abcdef" for c in s)
