"""``lockwarden list DIR... [-r] [--pattern GLOB] [--json]``: every lock file with its verdict,
and every directory that could not be listed (docs/cli.md, "``list``: what could not be
listed").

The walk is the command line's own; the reading and judging are the scanner's
(:func:`core.watch.scan.read_entry`, :func:`core.watch.scan.judge_read`, the ``af`` ledger helpers),
so a lock is judged exactly as the GUI judges it. Why not :func:`core.watch.scan.scan` itself:

- a directory whose listing fails *while it is read* (``/proc/PID/net`` of a process that
  exits: ``EINVAL`` from ``getdents``) makes :func:`core.watch.scan.scan_dir` return nothing for
  the whole tree, so ``list -r /`` printed an empty table;
- the directories it skips are reported as text, and the CLI never parses text; here each
  error keeps its ``errno``;
- a :class:`core.config.WatchSpec` path is expanded (``~``, ``$VAR``), so ``list 'd$HOME'``
  listed another directory than the one named.

Rules of the walk (those of :func:`core.watch.scan.list_dir`): names are matched against the
patterns by base name, the engine's own files never match, symbolic links are never followed
(a link to a directory is not descended into; a link whose name matches is an ``unreadable``
entry), nothing is opened but directories. A directory that vanishes during the walk
(``ENOENT``, ``ESRCH`` for a process's ``/proc`` entry, ``ENOTDIR``) is not an error; one that
cannot be listed (``EACCES``, ``EINVAL``...) is a :class:`ListError`, and the entries read
before a failure mid-listing are kept.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, NamedTuple

from core.cli.common import (
    EXIT_IO,
    EXIT_OK,
    PROG,
    CliPolicies,
    Out,
    PolicyChoice,
    check_dir,
    cli_policies,
    one_line,
)

if TYPE_CHECKING:
    from core.record import LockStatus

_VANISHED = frozenset({errno.ENOENT, errno.ESRCH, errno.ENOTDIR})
"""errno values meaning a sub-directory is gone (not an error worth a line)."""


class ListError(NamedTuple):
    """A directory that could not be listed (completely, or past some entries).

    Attributes:
        path: the directory.
        errno: the ``OSError``'s errno (an int), or None when it had none.
        reason: the system's words for it (``strerror``: ``"Permission denied"``).
        given: True for a ``DIR`` named on the command line (exit 3), False for a
            sub-directory met during ``-r``.
    """

    path: str
    errno: int | None
    reason: str
    given: bool

    @classmethod
    def of(cls, path: str, exc: OSError, *, given: bool) -> ListError:
        """The error ``exc`` raised while listing ``path``."""
        return cls(path, exc.errno, exc.strerror or type(exc).__name__, given)

    def to_dict(self) -> dict[str, object]:
        """The ``list --json`` item: ``{"kind": "error", "path", "errno", "error"}`` with
        ``errno`` as its symbolic name (``"EACCES"``; null when unknown)."""
        name = errno.errorcode.get(self.errno) if self.errno is not None else None
        return {"kind": "error", "path": self.path, "errno": name, "error": self.reason}

    def text(self) -> str:
        """The stderr line (without the program name): ``PATH: cannot be listed: reason``."""
        return f"{self.path}: cannot be listed: {self.reason}"


class Found(NamedTuple):
    """What a walk found: candidate lock paths (in walk order), ``af`` proof directories,
    and the directories that could not be listed."""

    files: dict[str, None]
    proofs: list[str]
    errors: list[ListError]


def walk(roots: list[str], *, recursive: bool, match: Callable[[str], bool],
         skip: Callable[[str], bool] | None = None, project: bool = False) -> Found:
    """Walk ``roots`` (absolute, literal paths: never expanded), descending into
    sub-directories when ``recursive``, never through a symbolic link, nor into the
    directories the walk skips (:func:`core.watch.scope.skips_dir`: ``skip``, and a git directory's
    object store, logs and hooks).

    Args:
        roots: the directories named on the command line.
        recursive: ``-r``.
        match: the name predicate (:func:`core.watch.scan.name_matcher`).
        skip: a predicate on directory names never entered (:func:`core.watch.scope.dir_matcher`);
            default none.
        project: ``--project``: git's lock names count only inside a git directory
            (:func:`core.watch.scope.wanted_file`).

    Returns:
        :class:`Found`. Never raises for what is on disk: every directory that cannot be
        listed becomes a :class:`ListError` and the walk goes on.
    """
    from core.watch.scan import CLAIMS_DIR, LEDGER_DIR, is_proof_dir
    from core.watch.scope import dir_matcher, skips_dir, wanted_file

    skip = skip or dir_matcher(())
    found = Found({}, [], [])
    reported: set[str] = set()

    def fail(path: str, exc: OSError, given: bool) -> None:
        if path not in reported:
            reported.add(path)
            found.errors.append(ListError.of(path, exc, given=given))

    for root in roots:
        stack = [root]
        while stack:
            d = stack.pop()
            given = d == root
            subdirs: list[str] = []
            has_ledger = has_locks = False
            try:
                with os.scandir(d) as it:
                    for e in it:
                        if wanted_file(project, match, d, e.name):
                            found.files.setdefault(e.path, None)
                        try:
                            is_dir = e.is_dir(follow_symlinks=False)
                        except OSError:
                            is_dir = False
                        if is_dir:
                            has_ledger = has_ledger or e.name == LEDGER_DIR
                            has_locks = has_locks or e.name == CLAIMS_DIR
                            if not skips_dir(skip, d, e.name):
                                subdirs.append(e.path)
            except OSError as exc:  # opening the directory, or reading it part-way
                if given or exc.errno not in _VANISHED:
                    fail(d, exc, given)
            if recursive:
                stack.extend(reversed(subdirs))
            if (has_ledger or has_locks) and is_proof_dir(d):
                _add_proof(d, found, fail)
    return found


def _add_proof(proof: str, found: Found, fail: Callable[[str, OSError, bool], None]) -> None:
    """An ``af`` proof directory's ledger lock and claim locks (as
    :func:`core.watch.scan.list_dir`), and the proof itself for its replayed claims."""
    from core.fsutil import is_engine_file
    from core.watch.scan import CLAIMS_DIR, LEDGER_DIR, LEDGER_LOCK

    found.proofs.append(proof)
    ledger_lock = os.path.join(proof, LEDGER_DIR, LEDGER_LOCK)
    if os.path.lexists(ledger_lock):
        found.files.setdefault(ledger_lock, None)
    locks = os.path.join(proof, CLAIMS_DIR)
    try:
        with os.scandir(locks) as it:
            for e in it:
                if e.name.endswith(".lock") and not is_engine_file(e.name):
                    found.files.setdefault(e.path, None)
    except OSError as exc:
        if exc.errno not in _VANISHED:
            fail(locks, exc, False)


def judge(found: Found, policies: CliPolicies) -> list[tuple[LockStatus, PolicyChoice]]:
    """The verdict on every file and replayed ``af`` claim of ``found``, each under the
    policy of the configured directory it is in (:meth:`CliPolicies.for_path`; an ``af`` proof
    directory's claims under the proof directory's), with the choice made, sorted by path;
    one process snapshot for all. A file that vanished since the walk is left out. Never
    raises for what is on disk."""
    from core.watch.scan import judge_paths, process_snapshot

    groups: dict[PolicyChoice, tuple[list[str], list[str]]] = {}
    for path in found.files:
        groups.setdefault(policies.for_path(path), ([], []))[0].append(path)
    for proof in found.proofs:
        groups.setdefault(policies.for_dir(proof), ([], []))[1].append(proof)
    procs, now = process_snapshot(), datetime.now(UTC)
    out = [(st, choice) for choice, (files, proofs) in groups.items()
           for st in judge_paths(files, proofs, choice.policy, procs, now)]
    out.sort(key=lambda pair: pair[0].path)
    return out


def cmd_list(args: argparse.Namespace, out: Out) -> int:
    """``list DIR... [--recursive] [--pattern GLOB] [--project] [--json] [--config PATH]``:
    every lock file with its verdict under the policy of the configured directory it is in
    (:func:`core.cli.common.cli_policies`; a note on stderr for each ``DIR`` judged with the
    defaults; a lock recorded on another host judged by that host's report when the
    configuration has ``[fleet]``: :func:`core.cli.fleet.fleet_judged`), unreadable files
    listed with their reason, then one stderr line per directory
    that could not be listed (``lockwarden: PATH: cannot be listed: reason``; printed even
    with ``-q``, as every error). ``--json`` prints one array: the locks
    (``LockStatus.to_dict()`` plus ``policy``: :meth:`PolicyChoice.to_dict`), then those
    errors (:meth:`ListError.to_dict`, told apart by ``"kind": "error"``).

    Returns:
        0; 3 when a ``DIR`` named on the command line could not be listed (the rest is still
        listed). A sub-directory that cannot be listed does not change the exit code.

    Raises:
        CliError: a ``DIR`` is missing or not a directory (exit 3, before anything is listed).
    """
    from core.config import DEFAULT_PATTERNS
    from core.config.model import DEVTOOL_PATTERNS, PROJECT_SKIP_DIRS
    from core.record import Liveness
    from core.watch.scan import name_matcher
    from core.watch.scope import dir_matcher

    dirs: list[str] = list(args.dirs)
    for d in dirs:
        check_dir(d)
    roots = list(dict.fromkeys(os.path.normpath(os.path.abspath(d)) for d in dirs))
    project = bool(getattr(args, "project", False))
    default = DEVTOOL_PATTERNS if project else DEFAULT_PATTERNS
    patterns = list(args.pattern) if args.pattern else list(default)
    found = walk(roots, recursive=bool(args.recursive) or project, match=name_matcher(patterns),
                 skip=dir_matcher(PROJECT_SKIP_DIRS if project else ()), project=project)
    policies = cli_policies(args)
    for root in roots:
        choice = policies.for_dir(root)
        if choice.needs_note:
            out.note(choice.note(root))
    judged = judge(found, policies)
    if any(s.liveness is Liveness.REMOTE for s, _c in judged):  # other hosts' reports
        from core.cli.fleet import fleet_judged

        judged = list(zip(fleet_judged([s for s, _c in judged], args),
                          [c for _s, c in judged], strict=True))
    if out.json:
        out.data([*({**s.to_dict(), "policy": c.to_dict()} for s, c in judged),
                  *(e.to_dict() for e in found.errors)])
    elif not out.quiet:
        from core.cli.output import table

        print(table([s for s, _c in judged]), flush=True)
    for e in found.errors:
        print(f"{PROG}: {one_line(e.text())}", file=sys.stderr, flush=True)
    return EXIT_IO if any(e.given for e in found.errors) else EXIT_OK
