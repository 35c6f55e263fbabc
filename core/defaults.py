"""The named defaults of the stale policy, in one place (seconds).

Imported by :mod:`core.verdicts.judge` (which carries them in
:class:`~core.stale_policy.StalePolicy`), by
:mod:`core.record` and by the configuration; nowhere else is a stale limit written as a number.
"""

from __future__ import annotations

DEFAULT_STALE_AFTER = 3600.0
"""Seconds after which a lock whose holder is not alive is stale (the specs' default:
``docs/specs/sema.txt``, "Stale Detection"; copied to ``docs/verdicts.md``)."""

MAX_TTL = 365 * 24 * 3600.0
"""The longest lease Lockwarden writes, in seconds (one year): every expiry it computes stays a
valid date, and the CLI's ``--ttl`` has the same bound (:data:`core.cli.args.TTL`)."""

MIN_REFRESH_INTERVAL = 0.25
"""Seconds: a lease is renewed at 75 % of its TTL, but never more often than this (a TTL of
0.0001 s would otherwise mean thousands of fsynced rewrites a second)."""

MAX_TAG_BYTES = 4096
"""Longest tag Lockwarden writes, in bytes of UTF-8 (4 KiB): every format's file then stays far
below the 64 KiB a reader reads (:data:`core.fsutil.MAX_LOCK_BYTES`), so the engine can always
read back what it wrote. Longer tags written by other tools are still read."""

DEFAULT_WRITING_GRACE = 2.0
"""Seconds an empty or partial lock file is given to be completed by its writer."""

FORMAT_STALE_AFTER: dict[str, float] = {"af-ledger": 30.0, "git-lock": 10.0,
                                        "git-gc": 12 * 3600.0}
"""Per-format stale limits that replace :data:`DEFAULT_STALE_AFTER` by default: af holds its
``ledger.lock`` for milliseconds around one ledger write, so a dead holder's ledger lock older
than 30 s is left by a crash (``docs/formats.md``, "af"); a git lock with no git process in
its repository is stale after 10 s, and git ignores a ``gc.pid`` older than 12 h
(``docs/specs/devtool-locks.md`` §2.1; the watcher re-judges a lock when its age reaches the
limit)."""
