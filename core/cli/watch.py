"""``lockwarden watch DIR... [--recursive] [--json] [--no-history]``: a headless monitor.

Prints the initial inventory, then one line per change delivered by
:class:`core.watch.watcher.Watcher`, until SIGINT or SIGTERM (exit 0); :class:`Printer` writes
the lines. Every change is also recorded in the history unless ``--no-history`` or
``[history] enabled = false``; a paused history is one note on stderr and the monitor goes on.

Rules (the events of ``--json``: ``initial``, ``ready``, ``added``/``changed``/``removed``,
``dir``, ``fleet``): docs/cli.md, "``watch``: a headless monitor"; docs/history.md.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING

from core.cli.common import (
    EXIT_OK,
    Out,
    cli_policies,
    json_text,
    load_config,
    silence_stdout,
    watch_specs,
)
from core.config.servers import redact_url
from core.text import printable

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from core.cli.watch_fleet import FleetFollower
    from core.config import WatchSpec
    from core.config.model import FleetSpec
    from core.history.recorder import Recorder
    from core.record import LockStatus
    from core.watch.watcher import ChangeSet, DirStatus


class Printer:
    """Serialises ``watch``'s output from the watcher's thread and the main thread; a reader
    that went away (``| head -1``) sets :attr:`broken` and ``stop``. Used by ``watch URL``
    too (:func:`core.cli.remote.cmd_remote_watch`)."""

    def __init__(self, out: Out, stop: threading.Event,
                 policy_of: Callable[[str], dict[str, object]] | None = None) -> None:
        self.out = out
        self.stop = stop
        self.policy_of = policy_of
        self.lock = threading.Lock()
        self.dir_modes: dict[str, tuple[str, str]] = {}
        self.broken = False

    def _write(self, line: str) -> None:
        if self.broken:
            return
        try:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):  # the reader went away (`| head -1`)
            self.broken = True
            self.stop.set()

    def status(self, event: str, status: LockStatus) -> None:
        """One lock's line: JSON, or text with the path and holder escaped."""
        if self.out.json:
            extra = ({"policy": self.policy_of(status.path)}
                     if self.policy_of is not None else {})
            self._write(json_text({"event": event, **status.to_dict(), **extra}))
        else:
            from core.holder import describe_holder

            stamp = time.strftime("%H:%M:%S")
            self._write(printable(redact_url(
                f"{stamp}  {event:<8} {status.path}  {describe_holder(status)}")))

    def obj(self, obj: dict[str, object], text: str) -> None:
        """A line that is not a lock's: ``obj`` as JSON, or ``text`` escaped, a server URL's
        password hidden (:func:`core.config.servers.redact_url`; the caller redacts ``obj``)."""
        if self.out.json:
            self._write(json_text(obj))
        elif not self.out.quiet:
            self._write(printable(redact_url(text)))

    def on_change(self, changes: ChangeSet) -> None:
        with self.lock:
            for s in changes.added:
                self.status("added", s)
            for s in changes.changed:
                self.status("changed", s)
            for s in changes.removed:
                self.status("removed", s)

    def on_dirs(self, dirs: list[DirStatus]) -> None:
        with self.lock:
            for d in dirs:
                key = (d.mode, d.message)
                if self.dir_modes.get(d.path) == key:
                    continue
                self.dir_modes[d.path] = key
                msg = f" ({d.message})" if d.message else ""
                self.obj({"event": "dir", "path": d.path, "mode": d.mode, "message": d.message},
                         f"{time.strftime('%H:%M:%S')}  dir      {d.path}  {d.mode}{msg}")


# Long: one loop owns the watcher's start, its signals and its orderly stop.
def watch(specs: list[WatchSpec], out: Out,
          policy_of: Callable[[str], dict[str, object]] | None = None,
          recorder: Recorder | None = None, *, tree_watch_limit: int | None = None,
          fleet: FleetSpec | None = None) -> int:
    """Run the monitor until SIGINT/SIGTERM and return 0; 141 (as a process killed by
    SIGPIPE) when the reader of stdout went away. With ``policy_of`` (a lock's path to the
    ``policy`` field), each ``--json`` line of a lock carries the policy it was judged
    under. ``recorder``: also record every change in the history (docs/history.md,
    "Recording"); it runs on its own thread and never holds the monitor up.
    ``tree_watch_limit``: the most directories of project trees watched with inotify
    (:class:`core.watch.watcher.Watcher`). ``fleet``: the ``[fleet]`` table; locks of other
    hosts are then judged by their hosts' reports (:mod:`core.cli.watch_fleet`)."""
    from core.watch.watcher import Watcher

    stop = threading.Event()
    printer = Printer(out, stop, policy_of)
    follower: FleetFollower | None = None

    def on_signal(signum: int, frame: object) -> None:
        stop.set()
        if follower is not None:
            follower.abort()  # a fleet read under way ends at once (docs/fleet.md, "Deadline")

    def emit(changes: ChangeSet) -> None:
        if recorder is not None:
            recorder.on_change(changes)
        printer.on_change(changes)

    def on_change(changes: ChangeSet) -> None:
        if follower is not None:
            follower.on_change(changes)  # re-judged, then emit()
        else:
            emit(changes)

    def fleet_note(state: str, message: str) -> None:
        with printer.lock:
            printer.obj({"event": "fleet", "state": state, "message": message},
                        f"{time.strftime('%H:%M:%S')}  fleet    {message}")

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    watcher = Watcher(specs, on_change, on_dirs=printer.on_dirs,
                      tree_watch_limit=tree_watch_limit)
    if fleet is not None:
        from core.cli.watch_fleet import FleetFollower

        follower = FleetFollower(fleet, watcher.snapshot, emit, fleet_note)
        follower.prime()
    try:
        if not stop.is_set():  # not stopped while the fleet was first asked
            with printer.lock:  # changes wait until the inventory is out
                watcher.start()
                initial = watcher.snapshot()
                if follower is not None:
                    initial = follower.initial(initial)
                if recorder is not None:
                    recorder.start(initial, [s.expanded_path for s in specs])
                if out.json:
                    for s in initial:
                        printer.status("initial", s)
                elif not out.quiet:
                    from core.cli.output import table

                    printer._write(table(initial))
                printer.obj({"event": "ready", "dirs": [s.path for s in specs]},
                            f"watching {', '.join(s.path for s in specs)} (Ctrl-C to stop)")
            if follower is not None:
                follower.start()
            while not stop.wait(1.0):
                pass
    finally:
        if follower is not None:
            follower.close()
        watcher.close()
        if recorder is not None:
            recorder.close()
        for signum, handler in old.items():
            signal.signal(signum, handler)
    if printer.broken:
        silence_stdout()
        return 141
    return EXIT_OK


def cmd_watch(args: argparse.Namespace, out: Out) -> int:
    """``watch DIR... [--recursive] [--pattern GLOB] [--json] [--config PATH]``: see the
    module; each directory is judged under the policy of the configured directory it is in
    (:func:`core.cli.common.cli_policies`: a sub-directory keeps its ``DIR``'s policy), else
    ``--stale-after`` or the defaults (a note on stderr says so).

    Returns:
        0 after SIGINT/SIGTERM; 141 when the reader of stdout went away.

    Raises:
        CliError: a directory is missing or not a directory (exit 3).
    """
    policies = cli_policies(args)
    specs = watch_specs(args, policies)
    choices = [(spec.path, policies.for_dir(spec.path)) for spec in specs]
    for root, choice in choices:
        if choice.needs_note:
            out.note(choice.note(root))

    def policy_of(path: str) -> dict[str, object]:
        for root, choice in choices:  # the first DIR holding it judges it (as the watcher)
            if path == root or path.startswith(root.rstrip(os.sep) + os.sep):
                return choice.to_dict()
        return choices[0][1].to_dict()

    from core.cli.history import start_recorder

    limit = getattr(args, "max_watches", None)
    return watch(specs, out, policy_of, start_recorder(out, disabled=args.no_history,
                                                  config_path=getattr(args, "config", None)),
                 tree_watch_limit=max(1, limit) if limit is not None else None,
                 fleet=_fleet_spec(policies.config_path or getattr(args, "config", None)))


def _fleet_spec(config_path: str | None) -> FleetSpec | None:
    """The ``[fleet]`` table of the configuration ``watch`` reads (``--config``, else the
    per-user file; docs/fleet.md, "Watching"), or None (no file, no table)."""
    if config_path is None or not os.path.isfile(os.path.expanduser(config_path)):
        return None
    return load_config(os.path.expanduser(config_path)).fleet
