"""The stale policy object: every rule's limit in one value, carried from the configuration
(:mod:`core.config`, per watched directory and per format) and the CLI's flags to
:func:`core.verdicts.judge.judge`, the lock operations, the watcher and the GUI's dialogs. Each
:class:`~core.record.LockStatus` carries the policy it was judged under.

Imports only :mod:`core.defaults`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from core.defaults import DEFAULT_STALE_AFTER, DEFAULT_WRITING_GRACE, FORMAT_STALE_AFTER


@dataclass(frozen=True, slots=True)
class StalePolicy:
    """How verdicts are made, per watched directory (docs/DESIGN.md, "Default stale policy"),
    carried from the configuration (:mod:`core.config`) and the CLI's ``--stale-after`` to every
    place that judges.

    Attributes:
        stale_after: seconds; a lock of another tool whose holder is not alive becomes stale
            when older than this (default :data:`core.defaults.DEFAULT_STALE_AFTER`, 3600 s,
            as in the specs). Also the age at which an empty lock file (a writer that crashed
            between create and write) becomes stale.
        writing_grace: seconds an empty or partial file is shown as ``writing``.
        allow_higher_privilege: Task MCP's HIGHER_PRIVILEGE reclaim (environment ``ci`` >
            ``cloud`` > ``local``), used by :func:`taskmcp_decision`. Off by default: the
            environment is self-declared.
        allow_emergency: Task MCP's EMERGENCY_OVERRIDE reclaim (purpose ``emergency``), used
            by :func:`taskmcp_decision`. Off by default: the purpose is self-declared.
        format_stale_after: per-format stale limits (format name, seconds) that replace
            ``stale_after`` for that format (default: af's ledger lock, 30 s;
            :data:`core.defaults.FORMAT_STALE_AFTER`).
        readable_lock_files: lock files Lockwarden writes keep their format's mode (0644:
            every user who can enter the directory reads who holds them, and can open them to
            take a shared ``flock``); off by default: 0600, the owner only (docs/engine.md,
            "The holder's pin", "Who can read a lock file"). A directory policy
            (``readable_lock_files`` in a ``[[watch]]`` table).

    Raises:
        ValueError: a limit that is not a finite number > 0 (or a negative grace).
    """

    stale_after: float = DEFAULT_STALE_AFTER
    writing_grace: float = DEFAULT_WRITING_GRACE
    allow_higher_privilege: bool = False
    allow_emergency: bool = False
    format_stale_after: tuple[tuple[str, float], ...] = tuple(sorted(FORMAT_STALE_AFTER.items()))
    readable_lock_files: bool = False

    def __post_init__(self) -> None:
        for name, value in (("stale_after", self.stale_after),
                            *((f"stale_after for {f}", v) for f, v in self.format_stale_after)):
            if not _positive(value):
                raise ValueError(f"{name} must be a finite number of seconds > 0, not {value!r}")
        if not (_positive(self.writing_grace) or self.writing_grace == 0):
            raise ValueError(f"writing_grace must be a finite number of seconds >= 0, "
                             f"not {self.writing_grace!r}")

    def file_mode(self, mode: int) -> int:
        """The permission bits to create a lock file of a format whose own mode is ``mode``
        with: ``mode`` itself when :attr:`readable_lock_files`, else only its owner's bits
        (``mode & 0o600``; docs/engine.md, "Who can read a lock file")."""
        return mode if self.readable_lock_files else mode & 0o600

    def limit_for(self, fmt: str | None) -> float:
        """The stale limit (seconds) for locks of format ``fmt``."""
        for name, seconds in self.format_stale_after:
            if name == fmt:
                return seconds
        return self.stale_after


def _positive(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value > 0)


DEFAULT_POLICY = StalePolicy()
"""The policy used where none is configured."""
