"""The fleet on the command line (docs/fleet.md, docs/cli.md "Fleet"):

- ``lockwarden agent [--config FILE]``: watch the configured directories and publish this
  host's verdicts, heartbeat and PID liveness to the ``[fleet]`` database until SIGINT/SIGTERM;
- ``lockwarden list --fleet [--config FILE] [--json]``: every host's published locks;
- :func:`fleet_judged`: how ``status`` and ``list`` re-judge a lock recorded on another host by
  that host's report when ``[fleet]`` is configured.

A fleet database that is down, slow or refuses is one line on stderr; the local verdict stands.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING

from core.cli.common import EXIT_OK, EXIT_USAGE, CliError, Out, one_line
from core.cli.common import load_config as _load_config

if TYPE_CHECKING:  # imported where used: `list --fleet` needs no verdicts (docs/fleet.md)
    from core.config.model import Config, FleetSpec
    from core.record import LockStatus

PROG = "lockwarden"

_STEP_S = 0.2
"""Longest single wait of the agent's loop, in seconds: how soon it sees a signal."""


def load_config(args: argparse.Namespace) -> Config:
    """The configuration ``--config`` names (default: the per-user file, or
    ``LOCKWARDEN_CONFIG``); its warnings go to stderr."""
    return _load_config(getattr(args, "config", None))


def fleet_judged(statuses: Sequence[LockStatus], args: argparse.Namespace,
                 config: Config | None = None) -> list[LockStatus]:
    """``statuses``, each lock recorded on another host re-judged by that host's report
    (:func:`core.fleet.judge.judge_with_fleet`) when the configuration has ``[fleet]``;
    unchanged otherwise, and when the fleet database fails (said once on stderr). The
    database is asked only when some lock names another host."""
    from core.record import Liveness

    if not any(s.liveness is Liveness.REMOTE for s in statuses):
        return list(statuses)
    judge = fleet_judge(args, config, pids={
        s.record.pid for s in statuses if s.liveness is Liveness.REMOTE
        and s.record is not None and s.record.pid is not None})
    return list(statuses) if judge is None else [judge(s) for s in statuses]


def fleet_judge(args: argparse.Namespace, config: Config | None = None, *,
                pids: Collection[int] | None = None
                ) -> Callable[[LockStatus], LockStatus] | None:
    """The re-judging :func:`fleet_judged` applies, with the fleet's reports read once (a
    listing that streams asks once, at the first lock naming another host), or ``None`` when
    there is no ``[fleet]`` or its database fails or does not answer within the fleet's
    deadline (said in one line on stderr: "judged without the fleet: ..."; docs/fleet.md,
    "Deadline"). ``pids``: only the reports on these PIDs are read (the locks to judge are
    known); ``None``: every PID's (a listing that streams does not know its locks yet)."""
    cfg = config if config is not None else load_config(args)
    if cfg.fleet is None:
        return None
    from core.config.servers import redact_url
    from core.fleet.judge import judge_with_fleet
    from core.fleet.link import Link
    from core.fleet.store import FleetError, read_snapshot

    spec = cfg.fleet
    where = redact_url(spec.dsn)
    link = Link(spec, name="lockwarden-fleet-read")
    try:
        snap = link.run("read", lambda conn: read_snapshot(conn, pids=pids, where=where))
    except FleetError as exc:
        print(f"{PROG}: judged without the fleet: {one_line(str(exc))}", file=sys.stderr,
              flush=True)
        return None
    finally:
        link.close()
    silent_after = spec.silent_after
    return lambda s: judge_with_fleet(s, snap, silent_after=silent_after)


def _fleet_of(args: argparse.Namespace) -> tuple[Config, FleetSpec]:
    cfg = load_config(args)
    if cfg.fleet is None:
        raise CliError(f"{cfg.path or 'the configuration'} has no [fleet] table "
                       "(docs/fleet.md: dsn = \"postgresql://...\")", EXIT_USAGE)
    return cfg, cfg.fleet


def cmd_list_fleet(args: argparse.Namespace, out: Out) -> int:
    """``list --fleet``: every trusted host's published locks, each with ``host`` (its
    publisher), sorted by host and path; JSON: a list of verdict objects with
    ``host_published``, ``host_silent`` and ``heartbeat_age_s``. The whole read ends within
    the fleet's deadline. A host left out (its rows not written by its bound role, more than
    the cap, or not valid: :mod:`core.fleet.listing`) is one line on stderr; the output is
    always valid JSON.

    Raises:
        CliError: no ``[fleet]`` (exit 2); the database failed or did not answer in time
            (exit 3).
    """
    from core.fleet.link import Link
    from core.fleet.listing import LockRows, read_lock_rows, read_locks_json, write_listing
    from core.fleet.store import FleetError

    _cfg, spec = _fleet_of(args)
    link = Link(spec, name="lockwarden-fleet-list")
    table = LockRows()
    try:
        if out.json:  # built by the database from pre-encoded verdicts: raw bytes out
            listing = link.run("list", lambda conn: read_locks_json(
                conn, silent_after=spec.silent_after))
            problems = listing.problems
        else:
            table = link.run("list", lambda conn: read_lock_rows(
                conn, silent_after=spec.silent_after))
            problems = table.problems
    except FleetError as exc:
        raise CliError(str(exc)) from None
    finally:
        link.close()
    for problem in problems:
        print(f"{PROG}: fleet: {one_line(problem)}", file=sys.stderr, flush=True)
    if out.json:
        sys.stdout.flush()
        write_listing(listing, sys.stdout.buffer)
        return EXIT_OK
    if out.quiet:
        return EXIT_OK
    if not table.rows:
        print(f"(no locks published; {table.hosts} host(s) in the fleet)", flush=True)
    else:
        print(fleet_table(table.rows, table.seen_by), flush=True)
    return EXIT_OK


def fleet_table(rows: Sequence[tuple[str, bool, str, int | None, str, str | None, str]],
                seen_by: Mapping[tuple[str, str], tuple[str, ...]] | None = None) -> str:
    """The table of ``list --fleet``: HOST (``(silent)`` after a silent one; ``(seen by A,
    B)`` after the host whose verdict a lock several hosts publish shows), STATE, PID,
    LIVENESS, HOLDER, PATH, from :func:`core.fleet.listing.read_lock_rows` (``seen_by``: its
    :attr:`~core.fleet.listing.LockRows.seen_by`); laid out as
    :func:`core.cli.output.render_table` does (cells escaped by :func:`core.text.printable`,
    two spaces between columns), a column at a time: 50,000 rows in tens of ms."""
    from core.text import printable

    columns: list[list[str]] = [
        ["HOST", *(host + " (silent)" if silent else host for host, silent, *_ in rows)],
        ["STATE", *(r[2] for r in rows)],
        ["PID", *(str(r[3] or "-") for r in rows)],
        ["LIVENESS", *(r[4] for r in rows)],
        ["HOLDER", *(r[5] or "-" for r in rows)],
        ["PATH", *(r[6] for r in rows)]]
    if seen_by:  # a lock several hosts publish: the host whose verdict it is, and all
        for i, r in enumerate(rows, start=1):
            hosts = seen_by.get((r[0], r[6]))
            if hosts:
                columns[0][i] += f" (seen by {', '.join(hosts)})"
    for i, column in enumerate(columns):
        # str.isprintable() is False for every character printable() escapes (controls,
        # separators, surrogates, format characters): one C-speed pass per column
        if not " ".join(column).isprintable():
            columns[i] = [printable(c) for c in column]
    widths = [max(map(len, column)) for column in columns[:-1]]
    line = "  ".join(f"{{:<{w}}}" for w in widths) + "  {}"
    return "\n".join(line.format(*cells).rstrip() for cells in zip(*columns, strict=True))


def cmd_agent(args: argparse.Namespace, out: Out) -> int:
    """``agent``: publish this host's watched locks until SIGINT/SIGTERM (see the module
    docstring): after each change set of the watcher and at every heartbeat interval, each
    publication within the fleet's deadline. A failing database is said on stderr when it
    starts failing (again only when the kind of failure changes:
    :class:`core.fleet.store.FleetError`) and when it is back; nothing is lost meanwhile (the
    next publication after a reconnect sends every row). A signal stops it within a second
    whatever the database does: the publication under way is cut
    (:meth:`core.fleet.store.Publisher.abort`).

    Returns:
        0 when stopped by a signal.

    Raises:
        CliError: no ``[fleet]`` (exit 2).
    """
    from core.config.servers import redact_url
    from core.fleet.store import FleetError, Publisher
    from core.watch.watcher import Watcher

    cfg, spec = _fleet_of(args)
    stopping = [False]  # set by the handler (no lock: a handler may interrupt a wait's lock)
    changed = threading.Event()
    publisher = Publisher(spec)

    def on_signal(signum: int, frame: object) -> None:
        stopping[0] = True
        publisher.abort()  # a publication under way ends at once

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    watcher = Watcher(cfg.all_watches(), lambda _changes: changed.set())
    problem: str | None = None
    try:
        watcher.start()
        out.note(f"publishing {len(cfg.all_watches())} watched directories as host "
                 f"{spec.host} to {redact_url(spec.dsn)} every {spec.interval:g} s")
        while not stopping[0]:
            try:
                publisher.publish(watcher.snapshot())
                if problem is not None:
                    out.note(f"fleet database {redact_url(spec.dsn)} is back: published")
                problem = None
            except FleetError as exc:
                if stopping[0]:
                    break
                # once when it starts failing, again only when the kind changes (a connection
                # cut mid-publication, then refused, is one outage: one line)
                if exc.kind != problem:
                    print(f"{PROG}: {one_line(str(exc))}; retrying every {spec.interval:g} s",
                          file=sys.stderr, flush=True)
                problem = exc.kind
            end = time.monotonic() + spec.interval
            while not stopping[0] and not changed.is_set() and time.monotonic() < end:
                changed.wait(min(_STEP_S, max(0.0, end - time.monotonic())))
            changed.clear()
    finally:
        watcher.close()
        publisher.close()
        for s, handler in old.items():
            signal.signal(s, handler)
    return EXIT_OK


def cmd_fleet_init(args: argparse.Namespace, out: Out) -> int:
    """``fleet init``: as the database's owner, create or migrate the fleet's tables, grant
    the publishing roles (``--bind HOST=ROLE``) and the viewers (``--viewer ROLE``), and bind
    each host name to the one role that may publish it (:func:`core.fleet.setup.init`;
    docs/fleet.md, "Set-up"), within the fleet's deadline.

    Returns:
        0 when done.

    Raises:
        CliError: no database named, a password in ``--dsn`` (exit 2); the database refused
            or failed (exit 3).
    """
    from core.config.model import FleetSpec
    from core.config.servers import check_url, redact_url
    from core.fleet.link import Link
    from core.fleet.setup import init
    from core.fleet.store import FleetError

    cfg = load_config(args) if getattr(args, "config", None) or not args.dsn else None
    base = cfg.fleet if cfg is not None else None
    dsn = args.dsn or (base.dsn if base is not None else None)
    if not dsn:
        raise CliError("fleet init: name the database: --dsn postgresql://OWNER@HOST/DB, or "
                       "a configuration with [fleet] dsn (--config)", EXIT_USAGE)
    why = check_url("postgres", dsn)
    if why:
        raise CliError(f"fleet init: --dsn {why}", EXIT_USAGE)
    spec = FleetSpec(dsn, password_env=base.password_env if base else None,
                     keyring=base.keyring if base else False,
                     deadline=base.deadline if base else FleetSpec(dsn).deadline)
    binds = dict(args.bind)
    link = Link(spec, name="lockwarden-fleet-init")
    try:
        result = link.run("init", lambda conn: init(conn, bind=binds, unbind=args.unbind,
                                                    viewers=args.viewer))
    except FleetError as exc:
        raise CliError(f"fleet init: {exc}") from None
    finally:
        link.close()
    if out.json:
        out.data(result.to_dict())
        return EXIT_OK
    for warning in result.warnings:
        out.note(warning)
    if not out.quiet:
        lines = [f"fleet tables at version {result.version} in {redact_url(dsn)}, owned by "
                 f"{result.owner} (row-level security forced)"]
        lines += [f"bound: {host} -> {role}" for host, role in result.bindings.items()]
        if not result.bindings:
            lines.append("no host name is bound to a role yet: --bind HOST=ROLE")
        if result.viewers:
            lines.append(f"viewers granted: {', '.join(result.viewers)}")
        from core.text import printable

        print("\n".join(printable(line) for line in lines), flush=True)
    return EXIT_OK
