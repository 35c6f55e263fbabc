"""``lockwarden list DIR... [-r] [--pattern GLOB] [--json]``: every lock file with its verdict,
and every directory that could not be listed (docs/cli.md, "``list``: what could not be
listed").

The walk (:func:`walk`) is the command line's own, so that a directory that fails while it is
read hides nothing else, each error keeps its ``errno`` (:class:`ListError`), and a path is
never expanded; its rules are those of :func:`core.watch.scan.list_dir` (docs/watching.md,
"Inventory (``core.watch.scan``)"). The reading and judging are the scanner's
(:func:`core.watch.scan.read_entry`, :func:`core.watch.scan.judge_read`, the ``af`` ledger
helpers) under each directory's policy (:class:`Judge`), so a lock is judged exactly as the GUI
judges it.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable, Iterator
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


class Batch(NamedTuple):
    """What the walk found in one directory, judged together and printed at once.

    Attributes:
        directory: the directory listed.
        files: candidate lock paths in it, plus, for an ``af`` proof directory, its ledger
            lock and claim locks not yet listed.
        regular: the candidates the directory listing calls regular files (read without an
            ``lstat`` first: :func:`core.fsutil.read_lock_file`, ``regular``).
        proof: True when ``directory`` is an ``af`` proof directory (its ledger's claims are
            replayed too).
    """

    directory: str
    files: list[str]
    regular: set[str]
    proof: bool


def walk(roots: list[str], *, recursive: bool, match: Callable[[str], bool],
         errors: list[ListError], skip: Callable[[str], bool] | None = None,
         project: bool = False) -> Iterator[Batch]:
    """Walk ``roots`` (absolute, literal paths: never expanded) in order of path, descending
    into sub-directories (in order of name) when ``recursive``, never through a symbolic link,
    nor into the directories the walk skips (:func:`core.config.scope.skips_dir`: ``skip``, and
    a git directory's object store, logs and hooks), yielding one :class:`Batch` per directory
    as soon as it is read: nothing of the whole tree is held (docs/cli.md, "``list``: what
    could not be listed"). A directory two roots reach is walked once.

    Args:
        roots: the directories named on the command line.
        recursive: ``-r``.
        match: the name predicate (:func:`core.watch.scan.name_matcher`).
        errors: where each directory that cannot be listed is added (a :class:`ListError`),
            as the walk meets it.
        skip: a predicate on directory names never entered (:func:`core.config.scope.dir_matcher`);
            default none.
        project: ``--project``: git's lock names count only inside a git directory
            (:func:`core.config.scope.wanted_file`).

    Never raises for what is on disk: the walk goes on past every directory that cannot be
    listed.
    """
    from core.config.scope import dir_matcher, skips_dir, wanted_file
    from core.watch.scan import CLAIMS_DIR, LEDGER_DIR, is_proof_dir

    skip = skip or dir_matcher(())
    reported: set[str] = set()
    walked: set[str] = set()
    extras: set[str] = set()  # a proof's ledger and claim locks, listed with the proof

    def fail(path: str, exc: OSError, given: bool) -> None:
        if path not in reported:
            reported.add(path)
            errors.append(ListError.of(path, exc, given=given))

    for root in sorted(roots):
        stack = [root]
        while stack:
            d = stack.pop()
            if d in walked:
                continue
            walked.add(d)
            given = d == root
            subdirs: list[str] = []
            files: list[str] = []
            regular: set[str] = set()
            has_ledger = has_locks = False
            try:
                with os.scandir(d) as it:
                    for e in it:
                        try:
                            is_dir = e.is_dir(follow_symlinks=False)
                        except OSError:
                            is_dir = False
                        if wanted_file(project, match, d, e.name):
                            path = e.path
                            if path not in extras:
                                files.append(path)
                                if not is_dir and _is_regular(e):
                                    regular.add(path)
                        if is_dir:
                            has_ledger = has_ledger or e.name == LEDGER_DIR
                            has_locks = has_locks or e.name == CLAIMS_DIR
                            if not skips_dir(skip, d, e.name):
                                subdirs.append(e.path)
            except OSError as exc:  # opening the directory, or reading it part-way
                if given or exc.errno not in _VANISHED:
                    fail(d, exc, given)
            if recursive:
                subdirs.sort(reverse=True)
                stack.extend(subdirs)
            proof = (has_ledger or has_locks) and is_proof_dir(d)
            if proof:
                _add_proof(d, files, extras, fail)
            files.sort()
            yield Batch(d, files, regular, proof)


def _is_regular(e: os.DirEntry[str]) -> bool:
    """True when the directory listing calls ``e`` a regular file. Never raises."""
    try:
        return e.is_file(follow_symlinks=False)
    except OSError:
        return False


def _add_proof(proof: str, files: list[str], extras: set[str],
               fail: Callable[[str, OSError, bool], None]) -> None:
    """An ``af`` proof directory's ledger lock and claim locks (as
    :func:`core.watch.scan.list_dir`), added to ``files`` and remembered in ``extras`` (the
    walk does not list them again in ``ledger/`` and ``locks/``)."""
    from core.fsutil import is_engine_file
    from core.watch.scan import CLAIMS_DIR, LEDGER_DIR, LEDGER_LOCK

    ledger_lock = os.path.join(proof, LEDGER_DIR, LEDGER_LOCK)
    if ledger_lock not in extras and os.path.lexists(ledger_lock):
        extras.add(ledger_lock)
        files.append(ledger_lock)
    locks = os.path.join(proof, CLAIMS_DIR)
    try:
        with os.scandir(locks) as it:
            for e in it:
                if e.name.endswith(".lock") and not is_engine_file(e.name) \
                        and e.path not in extras:
                    extras.add(e.path)
                    files.append(e.path)
    except OSError as exc:
        if exc.errno not in _VANISHED:
            fail(locks, exc, False)


class Judge:
    """Verdicts on the batches of a walk (:func:`walk`), each file under the policy of the
    configured directory it is in (:meth:`CliPolicies.for_path`, asked once per directory; an
    ``af`` proof directory's claims under the proof directory's), sorted by path within its
    batch; one process snapshot, one moment and one
    :class:`core.kernel.openfiles.KernelView` for the whole listing. A file that vanished
    since the walk is left out. Never raises for what is on disk.

    Args:
        policies: the command's policies.
        fleet: re-judge a lock recorded on another host (:func:`core.cli.fleet.fleet_judge`,
            asked at the first such lock), or None not to.
        now: the moment of every verdict (aware UTC); default the current time.
    """

    def __init__(self, policies: CliPolicies,
                 fleet: Callable[[], Callable[[LockStatus], LockStatus] | None] | None, *,
                 now: datetime | None = None) -> None:
        from core.kernel.openfiles import KernelView
        from core.watch.scan import process_snapshot

        self._policies = policies
        self._choices: dict[str, PolicyChoice] = {}
        self._fleet = fleet
        self._fleet_judge: Callable[[LockStatus], LockStatus] | None = None
        self._procs, self._now = process_snapshot(), now or datetime.now(UTC)
        self._view = KernelView()

    def choice(self, directory: str) -> PolicyChoice:
        """The policy choice for the locks directly in ``directory`` (memoized)."""
        choice = self._choices.get(directory)
        if choice is None:
            choice = self._choices[directory] = self._policies.for_dir(directory)
        return choice

    def batch(self, batch: Batch, *, fleet: bool = True) -> list[tuple[LockStatus, PolicyChoice]]:
        """The verdicts on ``batch``'s files and, for a proof directory, its replayed claims
        (:func:`core.watch.scan.dedupe_claims`), sorted by path; with ``fleet`` False, a lock
        recorded on another host is left as judged here (``remote``), the fleet not asked."""
        from core.record import Liveness
        from core.watch.scan import (
            dedupe_claims,
            judge_claim,
            judge_read,
            read_entry,
            replay_claims,
        )

        procs, now, view = self._procs, self._now, self._view
        out: list[tuple[LockStatus, PolicyChoice]] = []
        regular = batch.regular
        for path in batch.files:
            read = read_entry(path, regular=path in regular)
            if read is not None:
                c = self.choice(os.path.dirname(path))
                out.append((judge_read(read, policy=c.policy, procs=procs, now=now,
                                       kernel=view), c))
        if batch.proof:
            c = self.choice(batch.directory)
            claims = [judge_claim(r, policy=c.policy, procs=procs, now=now)
                      for r in replay_claims(batch.directory)]
            out.extend((st, c) for st in dedupe_claims(claims, [s for s, _c in out],
                                                       batch.directory))
            out.sort(key=lambda pair: pair[0].path)
        if fleet and self._fleet is not None \
                and any(s.liveness is Liveness.REMOTE for s, _c in out):
            if self._fleet_judge is None:
                self._fleet_judge = self._fleet()
                self._fleet = None if self._fleet_judge is None else self._fleet
            judge = self._fleet_judge
            if judge is not None:
                out = [(judge(s), c) for s, c in out]
        return out


def cmd_list(args: argparse.Namespace, out: Out) -> int:
    """``list DIR... [--recursive] [--pattern GLOB] [--project] [--json] [--config PATH]``:
    every lock file with its verdict under the policy of the configured directory it is in
    (:func:`core.cli.common.cli_policies`; a note on stderr for each ``DIR`` judged with the
    defaults; a lock recorded on another host judged by that host's report when the
    configuration has ``[fleet]``: :func:`core.cli.fleet.fleet_judge`), unreadable files
    listed with their reason, then one stderr line per directory
    that could not be listed (``lockwarden: PATH: cannot be listed: reason``; printed even
    with ``-q``, as every error). ``--json`` prints one array: the locks
    (``LockStatus.to_dict()`` plus ``policy``: :meth:`PolicyChoice.to_dict`), then those
    errors (:meth:`ListError.to_dict`, told apart by ``"kind": "error"``).

    Streams: each directory is judged and printed as soon as it is read, its locks sorted by
    path, directories in the order of the walk (:func:`walk`); the JSON array is written
    item by item (the same text as one ``json.dumps`` of the whole list), the table aligned as
    it goes (:class:`core.cli.output.TableWriter`). Nothing holds every row. Past
    2,000 files the directories are judged by worker processes, printed in the same order
    (:func:`core.cli.list_workers.judged`).

    Returns:
        0; 3 when a ``DIR`` named on the command line could not be listed (the rest is still
        listed). A sub-directory that cannot be listed does not change the exit code.

    Raises:
        CliError: a ``DIR`` is missing or not a directory (exit 3, before anything is listed).
    """
    from core.config import DEFAULT_PATTERNS
    from core.config.model import DEVTOOL_PATTERNS, PROJECT_SKIP_DIRS
    from core.config.scope import dir_matcher
    from core.watch.scan import name_matcher

    dirs: list[str] = list(args.dirs)
    for d in dirs:
        check_dir(d)
    roots = list(dict.fromkeys(os.path.normpath(os.path.abspath(d)) for d in dirs))
    project = bool(getattr(args, "project", False))
    default = DEVTOOL_PATTERNS if project else DEFAULT_PATTERNS
    patterns = list(args.pattern) if args.pattern else list(default)
    policies = cli_policies(args)
    for root in roots:
        choice = policies.for_dir(root)
        if choice.needs_note:
            out.note(choice.note(root))

    def fleet() -> Callable[[LockStatus], LockStatus] | None:
        from core.cli.fleet import fleet_judge

        return fleet_judge(args)

    judge = Judge(policies, fleet)
    errors: list[ListError] = []
    batches = walk(roots, recursive=bool(args.recursive) or project,
                   match=name_matcher(patterns), errors=errors,
                   skip=dir_matcher(PROJECT_SKIP_DIRS if project else ()), project=project)
    if out.json:
        _write_json(batches, judge, errors)
    else:
        _write_table(batches, judge, out)
    for e in errors:
        print(f"{PROG}: {one_line(e.text())}", file=sys.stderr, flush=True)
    return EXIT_IO if any(e.given for e in errors) else EXIT_OK


def _write_json(batches: Iterator[Batch], judge: Judge, errors: list[ListError]) -> None:
    """``list --json``: one array written item by item as the directories are judged, then
    the listing errors (``errors`` is filled by the walk as ``batches`` is read)."""
    from core.cli.common import json_text
    from core.cli.list_workers import JsonItems, judged

    write = sys.stdout.write
    sep = "["
    for text in judged(batches, judge, JsonItems()):
        if text:
            write(f"{sep}{text}")
            sep = ", "
    for e in errors:
        write(f"{sep}{json_text(e.to_dict())}")
        sep = ", "
    write("[]\n" if sep == "[" else "]\n")
    sys.stdout.flush()


def _write_table(batches: Iterator[Batch], judge: Judge, out: Out) -> None:
    """``list``: the table, aligned as it goes (nothing with ``-q``, the directories are still
    judged)."""
    from core.cli.list_workers import judged, no_cells, table_cells
    from core.cli.output import TableWriter

    table = TableWriter(sys.stdout.write) if not out.quiet else None
    for cells in judged(batches, judge, table_cells if table is not None else no_cells):
        if table is not None:
            table.cells(cells)
    if table is not None:
        table.close()
    sys.stdout.flush()
