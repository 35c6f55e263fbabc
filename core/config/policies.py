"""Which configured directory governs a path, and its whole policy: the one resolver the
command line, the app and the watcher ask (docs/cli.md, "One verdict: the configured
directory's policy"; docs/watching.md, "Projects").

A path is governed by the first configured directory (``[[watch]]`` tables, then
``[[projects]]``) whose scope holds the path's directory (:func:`core.config.scope.dir_in_scope`:
the directory itself, and for a recursive one its sub-directories the walk does not skip);
file-name patterns aside, so a lock made by hand in a watched directory is judged as the
watcher would judge it. An af ledger lock, claim lock or replayed claim is governed by the
directory holding its proof directory. The policy is the spec's own, every field of it
(:attr:`core.config.model.WatchSpec.policy`): stale limits, Task MCP flags, per-format limits
and ``readable_lock_files``.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from core.config.model import WatchSpec, expand_path
from core.config.scope import CLAIMS_DIR, LEDGER_DIR, dir_in_scope, split_claim_path
from core.stale_policy import StalePolicy

__all__ = ["PolicyResolver"]


class PolicyResolver:
    """Answers, for any path, which of ``specs`` governs it and under which policy.

    Args:
        specs: the configured directories in the order of the file (``[[watch]]`` first, then
            the ``[[projects]]`` roots' specs). Their paths are expanded once (``~``, ``$VAR``).
    """

    def __init__(self, specs: Sequence[WatchSpec]) -> None:
        self.specs = list(specs)
        self._roots = [expand_path(s.path) for s in self.specs]

    def spec_for(self, path: str) -> WatchSpec | None:
        """The configured directory governing ``path`` (absolute, or relative to the working
        directory; a virtual af claim path ``<proof>/ledger#<node>`` too), or None."""
        absolute = path if split_claim_path(path) else os.path.normpath(os.path.abspath(path))
        claim = split_claim_path(absolute)
        dirs = [claim[0]] if claim is not None else [os.path.dirname(absolute)]
        if claim is None and os.path.basename(dirs[0]) in (LEDGER_DIR, CLAIMS_DIR):
            dirs.append(os.path.dirname(dirs[0]))  # an af proof's ledger or claim lock
        for spec, root in zip(self.specs, self._roots, strict=True):
            if any(dir_in_scope(spec, root, d) for d in dirs):
                return spec
        return None

    def policy_for(self, path: str) -> StalePolicy | None:
        """The whole policy of the directory governing ``path`` (:meth:`spec_for`), or None
        when none does (the caller then uses :data:`core.stale_policy.DEFAULT_POLICY`).

        Raises:
            ValueError: a limit of a spec made by hand is not a finite number of seconds > 0
                (:func:`core.config.load` validates the file's).
        """
        spec = self.spec_for(path)
        return spec.policy if spec is not None else None

    def writer_policy(self, path: str, limits: StalePolicy) -> StalePolicy:
        """The policy of a verb that writes a lock file at ``path`` (``try``, ``acquire``,
        ``reclaim``, ``run``): the stale limits it was given (``--stale-after`` or the
        defaults: docs/cli.md, "Options"), with the governing directory's file mode rule,
        ``readable_lock_files`` (docs/engine.md, "Who can read a lock file"), which is no
        verdict rule and so holds whatever ``--stale-after`` says."""
        spec = self.spec_for(path)
        if spec is None or spec.readable_lock_files == limits.readable_lock_files:
            return limits
        return dataclasses.replace(limits, readable_lock_files=spec.readable_lock_files)
