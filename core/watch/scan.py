"""Inventory: every lock in the watched directories, with its verdict.

:func:`scan` / :func:`scan_dir` list the directories of :class:`core.config.WatchSpec` entries
(optionally recursively, never following a symlink) with :func:`core.watch.walk.list_dir`,
read each matching file with :func:`core.fsutil.read_lock_file` and judge it with
:func:`core.verdicts.inspect.inspect_bytes` under the directory's
:class:`core.stale_policy.StalePolicy`, with one :func:`core.verdicts.liveness.snapshot` per
scan; ``af`` proof directories (:func:`is_proof_dir`) add their ledger lock, claim locks and
claims replayed from the ledger.

Rules (base-name patterns; an unreadable match is an entry, never skipped; the engine's own
files are never entries; af claims and their deduplication): docs/watching.md, "Inventory
(``core.watch.scan``)"; docs/DESIGN.md, "Formats" (the real af tool).
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Container, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from core.codes import UnreadableKind
from core.config import WatchSpec
from core.errors import UnreadableError
from core.fsutil import file_info, os_kind, os_reason, read_lock_stat
from core.record import FileInfo, LockRecord, LockStatus
from core.watch.walk import (
    CLAIM_SEPARATOR,
    CLAIMS_DIR,
    LEDGER_DIR,
    LEDGER_LOCK,
    Listing,
    claim_path,
    covers,
    dir_in_scope,
    is_event_file,
    is_proof_dir,
    ledger_signature,
    list_dir,
    name_matcher,
    policy_for,
    split_claim_path,
)

if TYPE_CHECKING:
    from core.kernel.openfiles import KernelView
    from core.stale_policy import StalePolicy
    from core.verdicts.liveness import ProcessSnapshot

__all__ = [
    "CLAIMS_DIR", "CLAIM_SEPARATOR", "LEDGER_DIR", "LEDGER_LOCK", "FileRead", "Listing",
    "claim_node", "claim_path", "covers", "dedupe_claims", "dir_in_scope", "gc_paused",
    "is_event_file", "is_proof_dir", "judge_claim", "judge_paths", "judge_read",
    "ledger_signature", "list_dir", "name_matcher", "policy_for", "process_snapshot",
    "read_entry", "read_with_stat", "replay_claims", "scan", "scan_dir", "split_claim_path",
]


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


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for the ``with`` block (if it was enabled),
    then enabled again: a scan that keeps each verdict (the watcher's inventory) would have
    every collection of the older generations walk all the entries kept so far, ~20 µs per
    lock at 100,000 (docs/performance.md, "Listing and watching 100,000 locks"). Reference
    counting still frees what the block drops; only cycles wait for the next collection.
    A pause inside another leaves the collector paused until the outer one ends."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_entry(path: str, *, regular: bool = False) -> FileRead | None:
    """Read a candidate lock path safely (:func:`core.fsutil.read_lock_file`; ``regular``: the
    directory listing says it is a regular file, so no ``lstat`` comes first).

    Returns ``None`` when there is no file (it vanished), else a :class:`FileRead`. Never
    raises for what is at the path."""
    return read_with_stat(path, regular=regular)[0]


def read_with_stat(path: str, *, regular: bool = False
                   ) -> tuple[FileRead | None, os.stat_result | None]:
    """:func:`read_entry` and the file's stat result: the opened file's ``fstat`` for a file
    read (the same identity an ``lstat`` would give: no second call), an ``lstat`` for one that
    could not be read, ``None`` when there is none (vanished, or ``lstat`` failed too). Never
    raises for what is at the path."""
    try:
        data, st = read_lock_stat(path, regular=regular)
    except FileNotFoundError:
        return None, None
    except UnreadableError as exc:
        tool = _read_tool_lock(path, exc.kind)
        if tool is not None:
            return tool
        return FileRead(path, error=exc.reason, kind=exc.kind), _lstat(path)
    except OSError as exc:
        return FileRead(path, error=os_reason(exc), kind=os_kind(exc)), _lstat(path)
    return FileRead(path, data=data, file=file_info(st)), st


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _read_tool_lock(path: str, kind: UnreadableKind) -> tuple[FileRead, os.stat_result] | None:
    """Developer tools' locks a generic lock read refuses: an Emacs ``.#name`` symlink (its
    target is the lock text, read with ``readlink``, never followed) and a Vim swap file over
    64 KiB (only its block 0 matters). ``None`` for anything else (docs/formats.md,
    "Developer tools' marker locks (read-only)"), with its ``lstat``."""
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
    return FileRead(path, data=data, file=file_info(st)), st


def judge_read(
    read: FileRead, *, policy: StalePolicy, procs: ProcessSnapshot | None, now: datetime,
    kernel: KernelView | None = None,
) -> LockStatus:
    """The verdict on a :class:`FileRead` (:func:`core.verdicts.inspect.inspect_bytes`, or an
    ``unreadable`` verdict from :func:`core.verdicts.judge.judge` with the read error).
    ``kernel``: the kernel's locks and open files for the whole batch of reads
    (:class:`core.kernel.openfiles.KernelView`), so that a directory of empty files costs one
    read of ``/proc/locks`` and one walk of the open descriptors, not one per file."""
    if read.error is not None or read.data is None:
        from core.verdicts.judge import judge_unreadable

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
    return judge_paths(listing.files, listing.proofs, policy_for(spec), procs, now,
                       regular=listing.regular)


def judge_paths(
    files: Iterable[str], proofs: Iterable[str], policy: StalePolicy,
    procs: ProcessSnapshot | None, now: datetime, *, regular: Container[str] = (),
    kernel: KernelView | None = None,
) -> list[LockStatus]:
    """The verdict on every file of ``files`` and every claim replayed from the ``af`` proof
    directories ``proofs`` under ``policy`` at ``now``, with one process snapshot ``procs``,
    sorted by path; a file that vanished since it was listed is left out (as :func:`scan`
    judges, for the CLI's own walk too). ``regular``: the paths the directory listing called
    regular files (read without an ``lstat`` first). One
    :class:`core.kernel.openfiles.KernelView` (``kernel``, default a new one) serves every
    file. Never raises for what is on disk."""
    from core.kernel.openfiles import KernelView

    out: list[LockStatus] = []
    view = kernel if kernel is not None else KernelView()
    for path in files:
        read = read_entry(path, regular=path in regular)
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
