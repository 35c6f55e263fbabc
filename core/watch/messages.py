"""The messages :class:`core.watch.watcher.Watcher`'s worker thread takes from its queue
(docs/watching.md, "Live updates"): a hint from watchdog's threads, a holder's exit from the
reader's, and the requests of the watcher's public methods. Values only.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

from core.config import WatchSpec
from core.watch.watched_dir import WatchedDir


class Hint(NamedTuple):  # from watchdog's threads: something happened at path
    d: WatchedDir
    path: str
    is_dir: bool
    done: bool  # the file is final for now (closed after writing, deleted, moved): no debounce


class Refresh(NamedTuple):  # Watcher.refresh
    paths: list[str]


class Specs(NamedTuple):  # Watcher.set_specs
    specs: list[WatchSpec]


class Rescan(NamedTuple):  # Watcher.rescan; ``done`` is set when it is over
    done: threading.Event


class Exited(NamedTuple):  # from the reader: a followed holder process may have exited
    pid: int
    handle: int


class Wake(NamedTuple):  # close, or a rescan from a callback: just wake the worker up
    why: str


Message = Hint | Refresh | Specs | Rescan | Exited | Wake
"""What the worker takes from its queue."""
