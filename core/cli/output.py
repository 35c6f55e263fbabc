"""Text output of the ``lockwarden`` CLI: the ``status`` block and aligned tables (docs/cli.md,
"``status`` and ``list`` output").

Every value that comes from a file, a path or a process (tags, paths, holders, hosts, reasons,
audit fields) is escaped with :func:`core.text.printable`: control characters,
separators, bidi overrides and undecodable bytes never reach the terminal as they are
(docs/cli.md, "Control characters").

Ages are human durations from :func:`core.text.human_duration` ("3m 12s"); times are shown
in UTC (RFC 3339). A holder in one phrase comes from :func:`core.holder.describe_holder` (the one
describer). JSON output does not come through here: it is ``LockStatus.to_dict()``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from core.holder import process_label
from core.record import LockStatus, State
from core.text import human_duration, printable


def _age(status: LockStatus) -> str:
    """The lock's age as a human duration, ``"-"`` when there is none; for an age counted from
    when it was first seen (:attr:`core.record.LockStatus.age_is_lower_bound`) ``">=3m 12s"``,
    or ``"?"`` when that was just now (a command that looks once never makes up "0s")."""
    age = status.age_s
    if age is None:
        return "-"
    if status.age_is_lower_bound:
        return "?" if age < 1.0 else f">={human_duration(age)}"
    return human_duration(max(age, 0.0))


def status_text(status: LockStatus) -> str:
    """Text of ``lockwarden status``: sema's ``key: value`` lines first (``locked``, ``pid``,
    ``timestamp``, ``tag``: docs/specs/semats.txt, "Compatibility"), then
    Lockwarden's verdict, one ``reason:`` line per reason (its rendered text). Each line is
    escaped (:func:`core.text.printable`), so a value can never add a line."""
    d = status.to_dict()
    lines = [f"locked: {'true' if d['locked'] else 'false'}"]
    if d["pid"] is not None:
        lines.append(f"pid: {d['pid']}")
    if d["timestamp"] is not None:
        lines.append(f"timestamp: {d['timestamp']}")
    if d["tag"] is not None:
        lines.append(f"tag: {d['tag']}")
    lines.append(f"path: {d['path']}")
    lines.append(f"state: {d['state']}")
    if status.present:  # a lock file, or a free kernel-lock anchor (tool, kind, reason)
        if d["format"]:
            lines.append(f"format: {d['format']}")
        if d["tool"]:
            lines.append(f"tool: {d['tool']}")
        if d["kind"]:
            lines.append(f"kind: {d['kind']}")
        if d["holder"] and status.record is not None:  # else the process line names it
            lines.append(f"holder: {d['holder']}")
        process = process_label(status)
        if process:
            lines.append(f"process: {process}")
        if d["host"]:
            lines.append(f"host: {d['host']}")
        lines.append(f"liveness: {d['liveness']}")
        if d["age_s"] is not None:
            age = _age(status)
            lines.append("age: unknown (first seen now)" if age == "?" else
                         f"age: {age} (since first seen)" if status.age_is_lower_bound else
                         f"age: {age}")
        if d["expires_at"]:
            lines.append(f"expires: {d['expires_at']}")
        if d["error"]:
            lines.append(f"error: {d['error']}")
        for reason in d["reasons"]:
            lines.append(f"reason: {reason['text']}")
        from core.tools import safe_action

        action = safe_action(status)
        if action:
            lines.append(f"safe action: {action}")
    return "\n".join(printable(line) for line in lines)


def render_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces; the last column is not padded. Cells are
    escaped (:func:`core.text.printable`): each row stays one line."""
    cells = [list(header), *[[printable(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    out = []
    for r in cells:
        padded = [c.ljust(w) for c, w in zip(r[:-1], widths[:-1], strict=True)]
        out.append("  ".join([*padded, r[-1]]).rstrip())
    return "\n".join(out)


TABLE_HEADER = ("STATE", "AGE", "PID", "LIVENESS", "FORMAT", "KIND", "HOLDER/TAG", "PATH")
"""The columns of ``lockwarden list`` (:func:`table`)."""


def table_row(s: LockStatus) -> list[str]:
    """One row of :func:`table` (cells not yet escaped)."""
    rec = s.record
    if s.state is State.UNREADABLE:
        who = s.error or "unreadable"
    else:
        who = " ".join(x for x in ((rec.holder if rec else None),
                                   process_label(s, pid=False) or None,
                                   (repr(rec.tag) if rec and rec.tag else None)) if x)
    return [
        s.state.value,
        _age(s),
        str(s.holder_pid) if s.holder_pid is not None else "-",
        s.liveness.value,
        rec.format if rec else ("kernel" if s.kernel_held else "-"),
        s.kind or "-",
        who or "-",
        s.path,
    ]


def table_cells(statuses: Sequence[LockStatus]) -> list[list[str]]:
    """The rows of :func:`table` for ``statuses``, each cell escaped
    (:func:`core.text.printable`)."""
    return [[printable(c) for c in table_row(s)] for s in statuses]


def table(statuses: Sequence[LockStatus]) -> str:
    """Aligned table of ``lockwarden list``: STATE AGE PID LIVENESS FORMAT KIND HOLDER/TAG PATH
    (KIND: ``marker``, ``kernel``, ``-``; HOLDER/TAG: the recorded owner, the holder process's
    name and user (:func:`core.holder.process_label`), the tag).

    Unreadable entries show their reason in the HOLDER/TAG column. An empty list prints
    ``(no lock files)``."""
    if not statuses:
        return "(no lock files)"
    return render_table(TABLE_HEADER, [table_row(s) for s in statuses])


class TableWriter:
    """:func:`table` printed as the rows come (``list`` streams: docs/cli.md, "``status`` and
    ``list`` output"). The first ``hold`` rows are held back to set the column widths, so a
    listing of up to ``hold`` rows prints exactly :func:`table`; past them each batch is
    printed at once, aligned on the widest cell seen so far (a wider cell widens its column
    from there on). Nothing more than ``hold`` rows of text is ever kept.

    Args:
        write: where the text goes (lines ending in ``\n``).
        hold: rows held back before the first line is printed (>= 0).
    """

    def __init__(self, write: Callable[[str], object], *, hold: int = 1000) -> None:
        self._write = write
        self._hold = hold
        self._held: list[list[str]] = []
        self._widths = [len(h) for h in TABLE_HEADER]
        self._started = False

    def rows(self, statuses: Sequence[LockStatus]) -> None:
        """Print ``statuses`` (held back while fewer than ``hold`` rows came)."""
        self.cells(table_cells(statuses))

    def cells(self, cells: list[list[str]]) -> None:
        """Print rows already escaped (:func:`table_cells`), as :meth:`rows`."""
        widths = self._widths
        for r in cells:
            for i, c in enumerate(r[:-1]):
                if len(c) > widths[i]:
                    widths[i] = len(c)
        if not self._started:
            self._held.extend(cells)
            if len(self._held) < self._hold:
                return
            cells, self._held = [list(TABLE_HEADER), *self._held], []
            self._started = True
        self._print(cells)

    def _print(self, cells: list[list[str]]) -> None:
        widths = self._widths
        self._write("".join(
            "  ".join([*(c.ljust(w) for c, w in zip(r[:-1], widths, strict=False)),
                       r[-1]]).rstrip() + "\n" for r in cells))

    def close(self) -> None:
        """Print the rows held back; ``(no lock files)`` when there was none."""
        if not self._started:
            if not self._held:
                self._write("(no lock files)\n")
                return
            self._print([list(TABLE_HEADER), *self._held])
            self._held = []
            self._started = True


def audit_table(entries: Sequence[Mapping[str, object]]) -> str:
    """Aligned table of ``lockwarden audit``: TIME OPERATION RESULT VIA USER PID LOCK. A field
    an entry lacks shows ``-``; a line that is no entry (``error``: not JSON, too long, a run
    of NUL bytes in a sparse log) says so in the LOCK column with its line number, instead of
    a row of empty fields."""
    if not entries:
        return "(no audit entries)"

    def cell(value: object) -> str:
        return "-" if value is None or value == "" else str(value)

    rows = []
    for e in entries:
        error = e.get("error")
        last = (f"(line {e.get('line')}: {error})" if error
                else cell(e.get("lockPath", e.get("lock_path"))))
        rows.append([cell(e.get("timestamp")), cell(e.get("operation")), cell(e.get("result")),
                     cell(e.get("via")), cell(e.get("user")), cell(e.get("pid")), last])
    return render_table(["TIME", "OPERATION", "RESULT", "VIA", "USER", "PID", "LOCK"], rows)
