"""``lockwarden audit [PATH|DIR] [--tail N] [--json] [--verify]``: read the audit log or check
its hash chain (docs/cli.md, "``audit``"; the log itself: docs/DESIGN.md, "Audit log").

JSON entries use Task MCP's field names (``lockPath``; ``docs/specs/task-mcp.txt``)
plus Lockwarden's own, the physical ``line`` and an ``error`` for a line that is not a JSON
object.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from core.cli.common import EXIT_NO, EXIT_OK, PROG, CliError, Out, one_line
from core.text import plural

if TYPE_CHECKING:
    from core.audit import AuditEntry, VerifyResult


def cmd_audit(args: argparse.Namespace, out: Out) -> int:
    """Print the audit log (:func:`core.audit.read`; ``PATH`` is a log, a lock file or a
    directory; for a directory in a git repository, the entries about its locks from this
    user's own log too) or, with ``--verify``, check its hash chain (:func:`core.audit.verify`).
    ``--tail N`` reads only the last ``N`` entries, from the end (:func:`core.audit.tail`).

    Returns:
        0; with ``--verify``, 1 when the chain is broken.

    Raises:
        CliError: no such path (exit 3); ``--verify`` of a missing log (exit 1) or of a log
            that cannot be read (exit 3).
        core.errors.UnreadableError: the log cannot be read (mapped to exit 3 by
            :func:`core.cli.main.main`).
    """
    from core import audit

    path: str = args.path
    if not os.path.lexists(path) and not os.path.isdir(os.path.dirname(path) or "."):
        raise CliError(f"{path}: no such file or directory")
    if args.verify:
        return _verify(audit.verify(path), out)
    tail: int | None = args.tail
    got = audit.read(path) if tail is None else audit.tail(path, tail)
    more = _from_users_log(path, out)
    if more:
        got = sorted([*got, *more], key=lambda e: e.timestamp.timestamp() if e.timestamp else 0.0)
        if tail is not None:
            got = got[-tail:] if tail else []
    entries = [audit_dict(e) for e in got]
    if out.json:
        out.data(entries)
    elif not out.quiet:
        from core.cli.output import audit_table

        print(audit_table(entries), flush=True)
    return EXIT_OK


def _from_users_log(path: str, out: Out) -> list[AuditEntry]:
    """Entries about locks under ``path``'s directory from this user's own log, when that
    directory lies in a git repository: Lockwarden audits such locks there, never in the
    repository (docs/audit.md, "Where entries go"); a note says so."""
    from core import audit

    log = audit.resolve_log_path(path)
    where = os.path.dirname(log)
    if audit.repository_of(where) is None:
        return []
    own = audit.fallback_log_path()
    prefix = where.rstrip(os.sep) + os.sep
    mine = [e for e in audit.read(own) if e.lock_path and e.lock_path.startswith(prefix)]
    out.note(f"{where} is in a git repository: its locks are audited in your own log, {own}")
    return mine


def _verify(result: VerifyResult, out: Out) -> int:
    """Report a chain verification; exit 0 intact, 1 broken."""
    if result.missing:
        raise CliError(f"no audit log at {result.log_path}", EXIT_NO)
    if not result.ok and result.bad_line is None:
        raise CliError(f"audit log cannot be read: {result.reason}")
    if out.json:
        out.data({"ok": result.ok, "entries": result.entries, "foreign": result.foreign,
                  "bad_line": result.bad_line, "reason": result.reason,
                  "log_path": result.log_path, "torn_tail": result.torn_tail})
    elif result.ok:
        entries = plural(result.entries, "entry", "entries")
        out.result(f"{result.log_path}: chain intact ({entries}, "
                   f"{result.foreign} from other tools)"
                   + (f"; {result.reason}" if result.reason else ""))  # escaped by result()
    else:
        broken = f"{result.log_path}: chain BROKEN: {result.reason or ''}"
        print(f"{PROG}: {one_line(broken)}", file=sys.stderr, flush=True)
    return EXIT_OK if result.ok else EXIT_NO


def audit_dict(e: AuditEntry) -> dict[str, object]:
    """An audit entry as JSON: Task MCP's field names (``lockPath``) plus ours, the physical
    ``line`` and ``error`` for a line that is not a JSON object. ``timestamp`` is RFC 3339 UTC
    with milliseconds (``...Z``) or None."""
    ts = (e.timestamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")
          if e.timestamp else None)
    return {
        "line": e.line, "timestamp": ts, "operation": e.operation, "lockPath": e.lock_path,
        "details": e.details, "user": e.user, "pid": e.pid, "host": e.host, "via": e.via,
        "format": e.format, "result": e.result, "foreign": e.foreign, "error": e.error,
    }
