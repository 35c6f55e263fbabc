"""``lockwarden who PATH...``: every process using a file or folder (docs/cli.md, "who"), from
:func:`core.kernel.usage.who_uses`. Exit 0 when nothing uses any PATH, 1 when something does,
3 when a PATH cannot be reached."""

from __future__ import annotations

import argparse

from core.cli.common import EXIT_IO, EXIT_NO, EXIT_OK, CliError, Out


def cmd_who(args: argparse.Namespace, out: Out) -> int:
    """Print who uses ``args.paths`` (a table, or with ``--json`` one object).

    Returns:
        0 nothing uses them, 1 something does.

    Raises:
        CliError: a path does not exist or cannot be reached (exit 3).
    """
    from datetime import datetime

    from core.kernel.usage import UsageReport, who_uses
    from core.text import printable

    try:
        report: UsageReport = who_uses(args.paths)
    except OSError as exc:
        raise CliError(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "),
                       EXIT_IO) from None
    uses = sorted(report.uses.values(), key=lambda u: u.pid)
    hidden = _hidden_line(report)
    if out.json:
        out.data({
            "paths": [t.real for t in report.targets],
            "processes": [{"pid": u.pid, "name": u.name, "user": u.user,
                           "cmdline": list(u.cmdline), "started": u.started,
                           "how": u.how, "files": u.files} for u in uses],
            "uninspected": len(report.uninspected),
            "uninspected_users": sorted({u or "?" for u in report.uninspected.values()}),
            "lock_table_cut": report.lock_table_cut,
        })
    else:
        if not uses:
            out.result("nothing uses " + ", ".join(printable(t.real) for t in report.targets))
        else:
            rows = [("PID", "USER", "NAME", "HOW", "SINCE", "COMMAND")]
            for u in uses:
                since = (datetime.fromtimestamp(u.started).astimezone().strftime(
                    "%Y-%m-%d %H:%M:%S") if u.started is not None else "?")
                command = printable(" ".join(u.cmdline) or u.name)
                rows.append((str(u.pid), printable(u.user or "?"), printable(u.name),
                             ",".join(u.how), since, command))
            widths = [max(len(r[i]) for r in rows) for i in range(5)]
            for r in rows:
                out.result("  ".join(c.ljust(w) for c, w in zip(r[:5], widths, strict=True))
                           + "  " + r[5])
        if hidden:
            out.note(hidden)
        if report.lock_table_cut:
            out.note("the kernel's lock table was too large to read whole: a lock held only "
                     "by a process that could not be inspected may be missing")
    return EXIT_NO if uses else EXIT_OK


def _hidden_line(report: object) -> str:
    """"3 processes of other users (bob, root) could not be inspected", or ""."""
    from core.kernel.usage import UsageReport
    from core.text import printable

    assert isinstance(report, UsageReport)
    n = len(report.uninspected)
    if not n:
        return ""
    users = sorted({u or "?" for u in report.uninspected.values()})
    who = ", ".join(printable(u) for u in users[:5]) + (", ..." if len(users) > 5 else "")
    return (f"{n} process{'' if n == 1 else 'es'} of other users ({who}) could not be "
            "inspected (run as root to see them)")
