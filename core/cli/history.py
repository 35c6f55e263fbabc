"""``lockwarden history PATH|DIR|URL`` and ``lockwarden stats DIR``: what the recorders saw
(docs/cli.md, "``history`` and ``stats``"; docs/history.md), and the recorder that
``lockwarden watch`` runs (:func:`start_recorder`).

``history`` prints one line per transition, oldest first (``--json``: one JSON object per
line, :meth:`core.history.model.Transition.to_dict`); ``stats`` prints the contention figures
of :func:`core.history.spans.stats_of`. Both read the store without writing it; an empty or
missing history is not an error: a note on stderr, and on stdout ``history`` prints no line
(``--json`` too: JSON Lines of zero objects) while ``stats --json`` prints its one object with
zero figures.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

from core.cli.common import EXIT_IO, EXIT_OK, EXIT_USAGE, CliError, Out
from core.text import human_duration, printable

if TYPE_CHECKING:
    import argparse

    from core.history.recorder import Recorder
    from core.history.store import HistoryStore

DEFAULT_STATS_SINCE = "7d"
"""``stats``'s window when ``--since`` is not given."""


def since_of(text: str | None, now: float) -> float | None:
    """``--since SPAN`` as Unix seconds (``now - span``), ``None`` without it.

    Raises:
        CliError: not a span such as ``1d``, ``12h``, ``90m`` (exit 2).
    """
    if text is None:
        return None
    from core.text import parse_duration

    try:
        return now - parse_duration(text)
    except ValueError as exc:
        raise CliError(f"--since: {exc}", EXIT_USAGE) from None


def target_of(path: str) -> tuple[str | None, str | None]:
    """``(lock, under)`` for a PATH, DIR or URL: a server URL or a lock path (which need not
    exist any more: its history is the point) is one lock; a directory is every lock in it
    and below it."""
    if "://" in path:
        return path, None
    full = os.path.abspath(path)
    if os.path.isdir(full):
        return None, full
    return full, None


def open_store(out: Out) -> HistoryStore | None:
    """The store, read-only; ``None`` (after a note) when nothing was recorded yet.

    Raises:
        CliError: the store cannot be read (exit 3), with the reason.
    """
    from core.history.model import HistoryUnavailable
    from core.history.store import HistoryStore, default_path

    if not os.path.exists(default_path()):
        out.note(f"no history recorded yet ({default_path()} does not exist; the app and "
                 "`lockwarden watch` record it)")
        return None
    try:
        return HistoryStore(readonly=True)
    except HistoryUnavailable as exc:
        raise CliError(f"history unavailable: {exc.reason}", EXIT_IO) from None


def cmd_history(args: argparse.Namespace, out: Out) -> int:
    """``history PATH|DIR|URL [--since SPAN] [--json]``: see the module.

    Returns:
        0 (also when there is nothing to show).

    Raises:
        CliError: a bad ``--since`` (exit 2); the store cannot be read (exit 3).
    """
    from core.history.model import HistoryUnavailable

    since = since_of(args.since, time.time())
    lock, under = target_of(args.path)
    store = open_store(out)
    if store is None:
        return EXIT_OK
    try:
        rows = store.lines(lock, under=under, since=since, as_json=out.json)
    except HistoryUnavailable as exc:
        raise CliError(f"history unavailable: {exc.reason}", EXIT_IO) from None
    finally:
        store.close()
    if rows and (out.json or not out.quiet):  # SQLite's JSON escapes control characters
        text = "\n".join(rows)
        if not out.json and printable(flat := text.replace("\n", " ")) is not flat:
            text = "\n".join(map(printable, rows))  # a line to escape: line by line
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    if not rows:
        out.note(f"no transitions recorded for {args.path}"
                 + (f" in the last {args.since}" if args.since else ""))
    return EXIT_OK


def cmd_stats(args: argparse.Namespace, out: Out) -> int:
    """``stats DIR|PATH [--since SPAN] [--json]``: time held, longest hold, distinct holders,
    time stale and expired, times reclaimed, over the window (default the last 7 days).

    Returns:
        0.

    Raises:
        CliError: a bad ``--since`` (exit 2); the store cannot be read (exit 3).
    """
    from core.history.model import HistoryUnavailable
    from core.history.spans import stats_of

    now = time.time()
    since = since_of(args.since or DEFAULT_STATS_SINCE, now)
    assert since is not None
    lock, under = target_of(args.path)
    store = open_store(out)
    if store is None:
        if out.json:  # a JSON consumer reads stdout: the figures of an empty window
            out.data({"path": args.path, **stats_of([], since, now).to_dict()})
        return EXIT_OK
    try:
        rows = store.transitions(lock, under=under, since=since)
        before = store.before(lock, under=under, at=since)
    except HistoryUnavailable as exc:
        raise CliError(f"history unavailable: {exc.reason}", EXIT_IO) from None
    finally:
        store.close()
    from core.verdicts.liveness import hostname

    st = stats_of(rows, since, now, before, my_host=hostname())  # a row without a host: here
    if out.json:
        out.data({"path": args.path, **st.to_dict()})
        return EXIT_OK
    hold = "-"
    if st.longest_hold:
        where, who = st.longest_hold
        hold = f"{human_duration(st.longest_hold_s)}, by {who or 'an unnamed holder'}"
        hold += f", of {where}" if under is not None else ""
    window = args.since or DEFAULT_STATS_SINCE
    for line in (
        f"{args.path}, last {window}: {st.locks} lock(s), {st.transitions} transition(s)",
        f"  time held          {human_duration(st.held_s)}",
        f"  longest hold       {hold}",
        f"  distinct holders   {len(st.holders)}",
        f"  time stale         {human_duration(st.stale_s)}",
        f"  time expired       {human_duration(st.expired_s)}",
        f"  times reclaimed    {st.reclaimed}",
        f"  released           {st.released} (forced {st.force_released})",
        f"  handovers          {st.handovers}",
    ):
        out.result(line)
    return EXIT_OK


def start_recorder(out: Out, *, disabled: bool,
                   config_path: str | None = None) -> Recorder | None:
    """The recorder ``lockwarden watch`` runs unless ``--no-history`` (``disabled``) or
    ``[history] enabled = false`` in the configuration at ``config_path`` (``--config``;
    None: ``$LOCKWARDEN_CONFIG``, else the per-user file); its pauses and resumptions are
    notes on stderr."""
    if disabled:
        return None
    from core.cli.common import load_config
    from core.history.recorder import Recorder

    settings = load_config(config_path).history
    if not settings.enabled:
        return None

    def told(reason: str | None) -> None:
        if reason is None:
            out.note("history: recording again")
        else:
            out.note(f"history paused: {reason} (the monitor keeps running)")

    return Recorder(keep_s=settings.keep_s, max_bytes=settings.max_bytes, on_status=told)
