"""Inventory: every lock in the watched directories, with its verdict (docs/watching.md).

:func:`scan` / :func:`scan_dir` list the directories of :class:`core.config.WatchSpec` entries
(optionally recursively) with :func:`os.scandir`, keep the names that match the spec's patterns
(fnmatch on the **base name**), read each with :func:`core.fsutil.read_lock_file` (never follows
a symlink, never opens a FIFO, reads at most 64 KiB) and judge it with
:func:`core.verdicts.inspect.inspect_bytes` under the directory's
:class:`core.stale_policy.StalePolicy`.

- A matching name that is not a readable regular file (FIFO, symlink, directory, device,
  socket, too large, permission denied) is an ``unreadable`` entry with the reason; it is never
  skipped silently. A file that vanishes between listing and reading is simply absent.
- The engine's own files (the audit log ``.lock_audit.log``, temp files
  ``.<name>.<token>.tmp|swap|rel``) are never entries (:func:`core.fsutil.is_engine_file`).
- ``af`` proof directories (see :func:`is_proof_dir`) add the ledger lock
  ``<proof>/ledger/ledger.lock``, the claim locks ``<proof>/locks/*.lock`` and the claims
  replayed from the ledger events (:func:`core.formats.af.replay_ledger`) as read-only
  virtual entries with path ``"<proof>/ledger#<node_id>"`` (docs/DESIGN.md, "Formats": af facts).
  An expired claim is shown ``expired`` (af keeps it until it reaps it).
- **Deduplication of af claims**: a claim replayed from the ledger is left out when a claim
  lock file ``<proof>/locks/*.lock`` for the same node with the same owner exists (the file is
  the more concrete entry: raw content, file identity, age). When the owners differ both are
  shown: the disagreement is worth seeing.
- One :func:`core.verdicts.liveness.snapshot` per scan (not per file).

Symlinked directories are never followed (so a symlink loop cannot hang the walk).
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from core.config import WatchSpec, expand_path
from core.errors import UnreadableError
from core.fsutil import is_engine_file, os_kind, os_reason, read_lock_file
from core.reasons import UnreadableKind
from core.record import FileInfo, LockRecord, LockStatus
from core.watch.scope import dir_matcher, skips_dir, walkable, wanted_file

if TYPE_CHECKING:
    from core.kernel.openfiles import KernelView
    from core.stale_policy import StalePolicy
    from core.verdicts.liveness import ProcessSnapshot

LEDGER_DIR = "ledger"
LEDGER_LOCK = "ledger.lock"
CLAIMS_DIR = "locks"
_EVENT_RE = re.compile(r"^(?:event-)?[0-9]{1,18}\.json$")
CLAIM_SEPARATOR = "#"
"""Separator between the ledger directory and the node id in a replayed claim's path."""


# --------------------------------------------------------------------------------------------
# names and patterns
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _compile(patterns: tuple[str, ...]) -> Callable[[str], bool]:
    if not patterns:
        return lambda name: False
    rx = re.compile("|".join(f"(?:{fnmatch.translate(os.path.normcase(p))})" for p in patterns))
    if os.path.normcase("A") == "a":  # case-insensitive file system names (Windows)
        return lambda name: rx.match(os.path.normcase(name)) is not None
    return lambda name: rx.match(name) is not None


def name_matcher(patterns: Iterable[str]) -> Callable[[str], bool]:
    """A predicate on a file's **base name** for fnmatch ``patterns`` (``*.lock``).

    Never matches against the whole path (watchdog 7 matches its patterns against absolute
    paths, so ``*.lock`` there would not match ``/tmp/x.lock``: docs/DESIGN.md, "Watching"). The
    engine's own files never match (:func:`core.fsutil.is_engine_file`)."""
    rx = _compile(tuple(patterns))
    return lambda name: rx(name) and not is_engine_file(name)


def is_event_file(name: str) -> bool:
    """True for an af ledger event file name: ``NNNNNN.json`` or ``event-NNNNNN.json``."""
    return _EVENT_RE.match(name) is not None


def is_proof_dir(path: str) -> bool:
    """True when ``path`` is an ``af`` proof directory: it has a ``ledger/`` directory holding
    ``ledger.lock`` or event files (``NNNNNN.json``, ``event-NNNNNN.json``), or it has a
    ``locks/`` directory next to a ``meta.json`` (docs/specs/af.txt §5 "File
    Paths"). Never raises."""
    ledger = os.path.join(path, LEDGER_DIR)
    try:
        with os.scandir(ledger) as it:
            for e in it:
                if e.name == LEDGER_LOCK or is_event_file(e.name):
                    return True
    except OSError:
        pass
    return os.path.isdir(os.path.join(path, CLAIMS_DIR)) and os.path.lexists(
        os.path.join(path, "meta.json")
    )


def claim_path(proof_dir: str, node_id: str) -> str:
    """Virtual path of a claim replayed from ``proof_dir``'s ledger:
    ``"<proof>/ledger#<node_id>"``."""
    return os.path.join(proof_dir, LEDGER_DIR) + CLAIM_SEPARATOR + node_id


def split_claim_path(path: str) -> tuple[str, str] | None:
    """``(proof_dir, node_id)`` for a virtual claim path, else ``None``."""
    head, sep, node = path.rpartition(CLAIM_SEPARATOR)
    if not sep or os.path.basename(head) != LEDGER_DIR or os.sep in node:
        return None
    return os.path.dirname(head), node


def policy_for(spec: WatchSpec) -> StalePolicy:
    """The :class:`core.stale_policy.StalePolicy` of a watched directory: ``spec.policy``
    (its ``stale_after``, Task MCP flags and per-format limits)."""
    return spec.policy


# --------------------------------------------------------------------------------------------
# listing
# --------------------------------------------------------------------------------------------


@dataclass
class Listing:
    """What a walk of one watched directory found.

    Attributes:
        files: candidate lock paths (names matching the patterns, plus af ledger and claim
            locks) -> their ``lstat`` result, or ``None`` when ``lstat`` failed.
        proofs: af proof directories found (the root itself, or any directory walked).
        problems: sub-directories that could not be listed, with the reason.
        dirs: every directory walked (the root first), skipped ones left out
            (:mod:`core.watch.scope`): a project tree watches each on its own.
    """

    files: dict[str, os.stat_result | None] = field(default_factory=dict)
    proofs: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def ledger_signature(proof_dir: str) -> tuple[int, int, int] | None:
    """``(inode, mtime_ns, ctime_ns)`` of ``<proof>/ledger`` (changes when an event file is
    added, removed or renamed), or ``None`` when there is no such directory."""
    st = _lstat(os.path.join(proof_dir, LEDGER_DIR))
    if st is None or not stat.S_ISDIR(st.st_mode):
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns)


def list_dir(spec: WatchSpec, *, with_stat: bool = True) -> Listing:
    """Walk ``spec``'s directory (recursively if ``spec.recursive``) without following symlinks.

    Directories the spec skips (its ``skip`` patterns; a git directory's object store, logs
    and hooks) are never entered, and a project tree lists only developer tools' locks
    (:func:`core.watch.scope.wanted_file`).

    Args:
        spec: the watched directory.
        with_stat: ``lstat`` each candidate (the watcher compares them between rescans).

    Raises:
        OSError: the root directory itself cannot be listed (``FileNotFoundError`` when it
            does not exist, ``NotADirectoryError``, ``PermissionError``). Sub-directories that
            cannot be listed are reported in :attr:`Listing.problems` instead.
    """
    root = expand_path(spec.path)
    match = name_matcher(spec.patterns)
    skip = dir_matcher(spec.skip)
    project = spec.project
    out = Listing()
    stack = [root]
    first = True
    while stack:
        d = stack.pop()
        try:
            it = os.scandir(d)
        except OSError as exc:
            if first:
                raise
            if not isinstance(exc, FileNotFoundError):
                out.problems.append(f"{d}: cannot be listed ({exc.strerror or exc})")
            continue
        first = False
        out.dirs.append(d)
        has_ledger = has_locks = False
        with it:
            for e in it:
                name = e.name
                try:
                    is_dir = e.is_dir(follow_symlinks=False)
                except OSError:
                    is_dir = False
                if wanted_file(project, match, d, name):
                    out.files[e.path] = _lstat(e.path) if with_stat else None
                if is_dir:
                    if name == LEDGER_DIR:
                        has_ledger = True
                    elif name == CLAIMS_DIR:
                        has_locks = True
                    if spec.recursive and not skips_dir(skip, d, name):
                        stack.append(e.path)
        if (has_ledger or has_locks) and is_proof_dir(d):
            _add_proof(d, out, with_stat)
    return out


def _add_proof(proof: str, out: Listing, with_stat: bool) -> None:
    out.proofs.append(proof)
    ledger_lock = os.path.join(proof, LEDGER_DIR, LEDGER_LOCK)
    if ledger_lock not in out.files and os.path.lexists(ledger_lock):
        out.files[ledger_lock] = _lstat(ledger_lock) if with_stat else None
    locks = os.path.join(proof, CLAIMS_DIR)
    try:
        with os.scandir(locks) as it:
            for e in it:
                if e.name.endswith(".lock") and not is_engine_file(e.name) \
                        and e.path not in out.files:
                    out.files[e.path] = _lstat(e.path) if with_stat else None
    except OSError:
        pass


def covers(spec: WatchSpec, path: str, root: str | None = None) -> bool:
    """True when ``path`` (a file path or virtual claim path) is in ``spec``'s scope: its
    directory is the spec's directory (or below it, for a recursive spec) and its name matches
    the patterns; or it is an af ledger lock / claim lock / replayed claim of a proof directory
    in scope."""
    root = root if root is not None else expand_path(spec.path)
    claim = split_claim_path(path)
    if claim is not None:
        return dir_in_scope(spec, root, claim[0])
    parent, name = os.path.split(path)
    if dir_in_scope(spec, root, parent) and wanted_file(
            spec.project, name_matcher(spec.patterns), parent, name):
        return True
    pp = os.path.dirname(parent)
    base = os.path.basename(parent)
    if (base == LEDGER_DIR and name == LEDGER_LOCK) or (
        base == CLAIMS_DIR and name.endswith(".lock") and not is_engine_file(name)
    ):
        return dir_in_scope(spec, root, pp)
    return False


def dir_in_scope(spec: WatchSpec, root: str, d: str) -> bool:
    """True when files directly in directory ``d`` are in the scope of ``spec`` (whose
    expanded directory is ``root``): ``d`` is the root, or below it for a recursive spec and
    not inside a directory the walk skips (:func:`core.watch.scope.walkable`)."""
    if d == root:
        return True
    if not spec.recursive:
        return False
    return walkable(dir_matcher(spec.skip), root, d)


# --------------------------------------------------------------------------------------------
# reading and judging
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FileRead:
    """One read of a candidate lock path: the bytes and identity, or why it is unreadable.

    ``data``/``file`` are set for a readable regular file; ``error`` for an unreadable one."""

    path: str
    data: bytes | None = None
    file: FileInfo | None = None
    error: str | None = None
    kind: UnreadableKind = UnreadableKind.OS_ERROR


def read_entry(path: str) -> FileRead | None:
    """Read a candidate lock path safely (:func:`core.fsutil.read_lock_file`).

    Returns ``None`` when there is no file (it vanished), else a :class:`FileRead`. Never
    raises for what is at the path."""
    try:
        data, info = read_lock_file(path)
    except FileNotFoundError:
        return None
    except UnreadableError as exc:
        tool = _read_tool_lock(path, exc.kind)
        if tool is not None:
            return tool
        return FileRead(path, error=exc.reason, kind=exc.kind)
    except OSError as exc:
        return FileRead(path, error=os_reason(exc), kind=os_kind(exc))
    return FileRead(path, data=data, file=info)


def _read_tool_lock(path: str, kind: UnreadableKind) -> FileRead | None:
    """Developer tools' locks a generic lock read refuses: an Emacs ``.#name`` symlink (its
    target is the lock text, read with ``readlink``, never followed) and a Vim swap file over
    64 KiB (only its block 0 matters). ``None`` for anything else (docs/formats.md,
    "Developer tools' marker locks (read-only)")."""
    from core.formats import emacs, vimswap

    name = os.path.basename(path)
    try:
        if kind is UnreadableKind.SYMLINK and emacs.is_lock_name(name):
            data, _link = emacs.read_lock(path)
        elif kind is UnreadableKind.TOO_LARGE and vimswap.is_swap_name(name):
            data = vimswap.read_block0(path)
        else:
            return None
        st = os.lstat(path)
    except (OSError, ValueError):
        return None
    return FileRead(path, data=data, file=FileInfo(ino=st.st_ino, dev=st.st_dev,
                                                   size=st.st_size, mtime_ns=st.st_mtime_ns))


def judge_read(
    read: FileRead, *, policy: StalePolicy, procs: ProcessSnapshot | None, now: datetime,
    kernel: KernelView | None = None,
) -> LockStatus:
    """The verdict on a :class:`FileRead` (:func:`core.verdicts.inspect.inspect_bytes`, or an
    ``unreadable`` verdict from :func:`core.verdicts.policy.judge` with the read error).
    ``kernel``: the kernel's locks and open files for the whole batch of reads
    (:class:`core.kernel.openfiles.KernelView`), so that a directory of empty files costs one
    read of ``/proc/locks`` and one walk of the open descriptors, not one per file."""
    if read.error is not None or read.data is None:
        from core.verdicts.policy import judge_unreadable

        return judge_unreadable(read.path, kind=read.kind, detail=read.error or "could not be read",
                                policy=policy, now=now)
    from core.verdicts.inspect import inspect_bytes

    mtime = read.file.mtime_ns / 1e9 if read.file is not None else None
    return inspect_bytes(read.path, read.data, read.file, policy=policy, procs=procs, now=now,
                         mtime=mtime, kernel=kernel)


def replay_claims(proof_dir: str) -> list[LockRecord]:
    """Claims held in ``proof_dir``'s ledger (:func:`core.formats.af.replay_ledger`), with
    their virtual paths ``"<proof>/ledger#<node_id>"``. Never raises."""
    from core.formats import af

    try:
        return list(af.replay_ledger(os.path.join(proof_dir, LEDGER_DIR)))
    except Exception:  # a bug in a parser must not stop the inventory
        return []


def judge_claim(
    record: LockRecord, *, policy: StalePolicy, procs: ProcessSnapshot | None, now: datetime
) -> LockStatus:
    """The verdict on a claim replayed from a ledger: read-only, never a file."""
    import dataclasses

    from core.verdicts.inspect import judge_record

    st = judge_record(record.path, record, policy=policy, procs=procs, now=now)
    return st if st.read_only else dataclasses.replace(st, read_only=True)


def claim_node(status: LockStatus) -> str | None:
    """Node id of an af claim entry (claim lock file or replayed claim), else ``None``."""
    rec = status.record
    if rec is None or rec.format != "af-claim":
        return None
    node = rec.metadata.get("node_id") if isinstance(rec.metadata, dict) else None
    return node if isinstance(node, str) else rec.tag


def dedupe_claims(
    claims: list[LockStatus], files: Iterable[LockStatus], proof_dir: str
) -> list[LockStatus]:
    """Drop replayed ``claims`` of ``proof_dir`` that a claim lock file in ``<proof>/locks/``
    already shows (same node id and same owner). See the module docstring."""
    locks_dir = os.path.join(proof_dir, CLAIMS_DIR)
    shown: set[tuple[str, str | None]] = set()
    for st in files:
        if os.path.dirname(st.path) != locks_dir:
            continue
        node = claim_node(st)
        if node is not None and st.record is not None:
            shown.add((node, st.record.holder))
    out = []
    for st in claims:
        node = claim_node(st)
        holder = st.record.holder if st.record is not None else None
        if node is not None and (node, holder) in shown:
            continue
        out.append(st)
    return out


# --------------------------------------------------------------------------------------------
# the public scans
# --------------------------------------------------------------------------------------------


def process_snapshot() -> ProcessSnapshot | None:
    """:func:`core.verdicts.liveness.snapshot`, or None where psutil cannot list processes (then
    each PID is looked up by itself)."""
    from core.verdicts.liveness import snapshot

    try:
        return snapshot()
    except Exception:  # psutil unusable (no /proc): inspect looks PIDs up one by one
        return None


def scan_dir(
    spec: WatchSpec,
    *,
    procs: ProcessSnapshot | None = None,
    now: datetime | None = None,
) -> list[LockStatus]:
    """Every lock in one watched directory, with its verdict, sorted by path.

    Args:
        spec: the directory, recursion, patterns and stale policy.
        procs: a :func:`core.verdicts.liveness.snapshot`; default: one is taken for this scan.
        now: the moment of the verdicts (aware UTC); default now.

    Returns:
        One :class:`LockStatus` per candidate file (unreadable ones included, with the reason)
        and per replayed af claim. Empty when the directory does not exist or cannot be listed
        (the watcher reports that as a :class:`core.watch.watcher.DirStatus`). Never raises for the
        directory's content.
    """
    now = now or datetime.now(UTC)
    if procs is None:
        procs = process_snapshot()
    try:
        listing = list_dir(spec, with_stat=False)
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return []
    return judge_paths(listing.files, listing.proofs, policy_for(spec), procs, now)


def judge_paths(
    files: Iterable[str], proofs: Iterable[str], policy: StalePolicy,
    procs: ProcessSnapshot | None, now: datetime,
) -> list[LockStatus]:
    """The verdict on every file of ``files`` and every claim replayed from the ``af`` proof
    directories ``proofs`` under ``policy`` at ``now``, with one process snapshot ``procs``,
    sorted by path; a file that vanished since it was listed is left out (as :func:`scan`
    judges, for the CLI's own walk too). One :class:`core.kernel.openfiles.KernelView` serves
    every file. Never raises for what is on disk."""
    from core.kernel.openfiles import KernelView

    out: list[LockStatus] = []
    view = KernelView()
    for path in files:
        read = read_entry(path)
        if read is not None:
            out.append(judge_read(read, policy=policy, procs=procs, now=now, kernel=view))
    for proof in proofs:
        claims = [judge_claim(r, policy=policy, procs=procs, now=now)
                  for r in replay_claims(proof)]
        out.extend(dedupe_claims(claims, out, proof))
    out.sort(key=lambda s: s.path)
    return out


def scan(
    specs: list[WatchSpec],
    *,
    procs: ProcessSnapshot | None = None,
    now: datetime | None = None,
) -> list[LockStatus]:
    """Every lock in all watched directories (see :func:`scan_dir`), sorted by path.

    One :func:`core.verdicts.liveness.snapshot` serves the whole scan. A path covered by several
    specs (overlapping directories) appears once, judged by the first spec that covers it."""
    now = now or datetime.now(UTC)
    if procs is None:
        procs = process_snapshot()
    seen: set[str] = set()
    out: list[LockStatus] = []
    for spec in specs:
        for st in scan_dir(spec, procs=procs, now=now):
            if st.path not in seen:
                seen.add(st.path)
                out.append(st)
    out.sort(key=lambda s: s.path)
    return out
