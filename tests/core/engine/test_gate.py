"""One gate for every takeover (docs/engine.md, "The gate"): every public entry point of the
engine, every CLI verb that writes and every lock command of the app
(:class:`app.bridges.lock_actions.LockActions`) is run against every protected kind of file
(tests/support/protected.py: a crashed Vim's swap with unsaved changes, an Emacs lock with an
auto-save file, an empty ``__init__.py`` and ``.gitkeep``, a text file, an af claim file, a
claim in an af ledger, the empty file filelock leaves). Each must ask the gate
(:func:`core.engine.gate.listening` sees the question) and leave the file as the gate's rules
say: untouched, taken and put back empty as it was after the release, removed (an empty file
a person force-releases), or kept in the trash (a foreign lock a person force-releases).
A public entry point, verb or app command that this table does not know fails the test, so
a new one must be added here -- and to the gate.

Real files and real editors' files, the CLI in-process (``core.cli.main.main``: the gate's
listener is in this process), the app's command object with a real QApplication.
"""

from __future__ import annotations

import dataclasses
import inspect as pyinspect
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import core
from core.engine import cleanup, gate, lock, operations, reclaiming, trash, waiting
from core.engine.operations import force_release_kept
from core.errors import LockError
from core.tempfiles import parse_temp, temp_path
from tests.support.protected import EMPTY_KINDS, KINDS, OLD, Snapshot, ledger_files, make

Runner = Callable[[Path, "Ctx"], object]


@dataclasses.dataclass
class Ctx:
    """What a runner needs: the app's command object (made on demand, needs a QApplication)
    and the leftover path a ``clean`` case planted."""

    actions: Any = None
    leftover: Path | None = None


def cli(*args: str) -> int:
    """``lockwarden ARGS`` in this process (the gate's listener sees its questions)."""
    from core.cli.main import main

    return main([*args, "-q"])


def swallow(fn: Callable[[], object]) -> object:
    """Run ``fn``; an engine refusal (or the app's message of one) is an answer too."""
    from app.bridges.lock_actions import ActionError

    try:
        return fn()
    except (LockError, ActionError, OSError):
        return None


# -- the entry points ------------------------------------------------------------------------

def _api_acquire(p: Path, c: Ctx) -> None:
    lk = swallow(lambda: core.Lock(p).acquire(blocking=False))
    if isinstance(lk, lock.Lock):
        lk.refresh()
        lk.release()


def _api_acquire_wait(p: Path, c: Ctx) -> None:
    lk = swallow(lambda: core.Lock(p, tag="waited").acquire(timeout=0.2))
    if isinstance(lk, lock.Lock):
        lk.release()


def _api_context(p: Path, c: Ctx) -> None:
    def body() -> None:
        with core.Lock(p).acquire(blocking=False):
            pass
    swallow(body)


def _api_reclaim(p: Path, c: Ctx, force: bool = False) -> None:
    lk = swallow(lambda: core.reclaim(p, force=force, reason="gate test"))
    if isinstance(lk, lock.Lock):
        lk.release()


def _restore(p: Path, c: Ctx, via_app: bool = False) -> None:
    """Undo of a force release whose file was removed from ``p``, while ``p`` holds the
    protected kind: refused (the path is taken)."""
    sibling = p.parent / "sibling.lock"
    sibling.write_text("pid=1234567\ntimestamp=1700000000\ntag=removed earlier\n")
    kept = force_release_kept(sibling, reason="gate test").kept
    assert kept is not None
    kept = dataclasses.replace(kept, original=str(p))
    if via_app:
        swallow(lambda: c.actions.restore(kept))
    else:
        swallow(lambda: trash.restore(kept))


def _leftover(p: Path, c: Ctx) -> Path:
    """The protected kind's bytes under a leftover engine temp name beside it, its writer
    gone (what a forced removal interrupted would leave)."""
    left = Path(temp_path(str(p.parent / "victim.lock"), kind="rel", pid=_dead_pid()))
    if p.exists():
        left.write_bytes(p.read_bytes())
        left.chmod(p.stat().st_mode & 0o7777)
    os.utime(left, (OLD, OLD))
    c.leftover = left
    return left


_dead: list[int] = []


def _dead_pid() -> int:
    """A PID whose process exited (and was reaped): a leftover's gone writer."""
    if not _dead:
        p = subprocess.Popen([sys.executable, "-c", "pass"])
        p.wait()
        _dead.append(p.pid)
    return _dead[0]


def _api_clean(p: Path, c: Ctx) -> None:
    cleanup.remove_leftover(str(_leftover(p, c)))


def _cli_take(verb: list[str]) -> Runner:
    def run(p: Path, c: Ctx) -> None:
        if cli(*verb, str(p)) == 0:
            assert cli("release", str(p)) == 0
    return run


def _cli_run(p: Path, c: Ctx) -> None:
    cli("run", str(p), "--timeout", "0", "--", "true")


def _cli_clean(p: Path, c: Ctx) -> None:
    _leftover(p, c)
    cli("clean", str(p.parent))


def _app_take(how: str) -> Runner:
    def run(p: Path, c: Ctx) -> None:
        if how == "acquire":
            taken = swallow(lambda: c.actions.acquire(str(p)))
        else:
            taken = swallow(lambda: c.actions.reclaim(str(p), force=how == "force",
                                                      reason="gate test"))
        if taken is not None:
            c.actions.release(str(p))
    return run


TAKE = "take"  # takes the lock (if it may) and gives it back
FORCE = "force"  # removes whatever lock is there
OWN = "own"  # releases the caller's own lock: none of these is
UNDO = "undo"  # puts a kept file back
CLEAN = "clean"  # removes an engine leftover holding the kind's bytes

ENTRIES: dict[str, tuple[str, Runner]] = {
    # the Python API (core and core.engine's public modules)
    "Lock.acquire+refresh+release": (TAKE, _api_acquire),
    "Lock.acquire(timeout)": (TAKE, _api_acquire_wait),
    "with Lock": (TAKE, _api_context),
    "reclaim": (TAKE, _api_reclaim),
    "reclaim(force)": (TAKE, lambda p, c: _api_reclaim(p, c, force=True)),
    "force_release": (FORCE, lambda p, c: swallow(lambda: core.force_release(p))),
    "force_release_kept": (FORCE, lambda p, c: swallow(lambda: core.force_release_kept(p))),
    "release_path": (OWN, lambda p, c: swallow(lambda: core.release_path(p, pid=os.getpid()))),
    "release_path_kept(force)": (FORCE, lambda p, c: swallow(
        lambda: operations.release_path_kept(p, pid=os.getpid(), force=True))),
    "Lock.release(force)": (FORCE, lambda p, c: swallow(
        lambda: core.Lock(p).release(force=True))),
    "trash.restore": (UNDO, _restore),
    "cleanup.remove_leftover": (CLEAN, _api_clean),
    # the CLI verbs that write
    "cli try": (TAKE, _cli_take(["try"])),
    "cli acquire": (TAKE, _cli_take(["acquire", "--timeout", "0.2"])),
    "cli reclaim": (TAKE, _cli_take(["reclaim"])),
    "cli reclaim --force": (TAKE, _cli_take(["reclaim", "--force"])),
    "cli run": (TAKE, _cli_run),
    "cli release": (OWN, lambda p, c: cli("release", str(p))),
    "cli release --force": (FORCE, lambda p, c: cli("release", "--force", str(p))),
    "cli clean": (CLEAN, _cli_clean),
    # the app's lock commands
    "app Acquire": (TAKE, _app_take("acquire")),
    "app Reclaim": (TAKE, _app_take("reclaim")),
    "app Reclaim (forced)": (TAKE, _app_take("force")),
    "app Force release / Remove": (FORCE, lambda p, c: swallow(
        lambda: c.actions.force_release(str(p)))),
    "app Undo": (UNDO, lambda p, c: _restore(p, c, via_app=True)),
}


def expected(group: str, kind: str) -> str:
    """What must be at the path afterwards: ``same`` (untouched, or taken and put back as it
    was), ``gone`` (an empty file a person removed), ``trashed`` (a foreign lock a person
    removed: in the trash)."""
    if group == FORCE:
        if kind in EMPTY_KINDS:
            return "gone"
        return "trashed" if kind == "afclaim" else "same"
    if group == CLEAN:  # an af claim moved out by a forced removal that was interrupted
        return "gone" if kind in EMPTY_KINDS else "trashed" if kind == "afclaim" else "same"
    return "same"


@pytest.fixture
def ctx(qapp: Any) -> Iterator[Ctx]:
    from app.bridges.lock_actions import LockActions

    actions = LockActions()
    yield Ctx(actions=actions)
    actions.release_all()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("entry", list(ENTRIES))
def test_every_entry_point_asks_the_gate_and_keeps_what_it_protects(
        tmp_path: Path, entry: str, kind: str, ctx: Ctx) -> None:
    group, run = ENTRIES[entry]
    if kind == "ledger" and group == CLEAN:
        pytest.skip("a claim in a ledger has no file to leave behind")
    d = tmp_path / "d"
    d.mkdir()
    path = make(kind, d)
    before = Snapshot.of(path)
    ledger = ledger_files(path) if kind == "ledger" else None
    with gate.listening() as asked:
        run(path, ctx)
    target = ctx.leftover if group == CLEAN else path
    assert target is not None
    assert any(p == str(target) for p, _i, _a in asked), (entry, kind, asked)
    after = Snapshot.of(target)
    want = expected(group, kind)
    if group == CLEAN:
        before = Snapshot(before.data, before.mode, OLD * 10**9)
    if want == "same":
        assert after == before, (entry, kind, before, after)
    else:
        assert after.data is None, (entry, kind, after)
    if want == "trashed":
        name = path.name if group != CLEAN else "victim.lock"
        kept = [f for f in Path(os.environ["XDG_DATA_HOME"]).rglob(f"*{name}")
                if f.is_file() and f.read_bytes() == before.data]
        assert kept, f"{entry}: the removed af claim is in neither the trash nor quarantine"
    if ledger is not None:
        assert ledger_files(path) == ledger and not os.path.lexists(path)
    left = [n for n in os.listdir(path.parent) if parse_temp(n) is not None
            and (group != CLEAN or n != os.path.basename(str(target)))]
    assert left == [], f"{entry} left engine temp files: {left}"


# -- nothing bypasses it: every public entry point is in the table ------------------------

NOT_WRITING = {
    # read, judge, wait or name things; never create over, replace, move or remove a file
    "inspect", "wait", "StalePolicy", "describe", "state_phrase", "on_this_host",
    "resolve_policy", "HolderCache", "ReclaimJudge", "Removal", "audit_lost_race", "Kept",
    "quarantine_dir", "QUARANTINE_DIR", "leftovers", "Cleaned", "local_holder_pid",
    "wait_until", "Waiter", "next_wake",
    "Disposal",  # the last step of a removal the gate allowed
    "LockRecord", "LockStatus", "Liveness", "State", "ConfigError",
    "put_aside",  # moves a file already out of the lock path (into the trash)
}
"""Public names that do not change a file at a lock's path."""

COVERED = {
    "Lock": ["Lock.acquire+refresh+release", "with Lock", "Lock.release(force)"],
    "reclaim": ["reclaim", "reclaim(force)"],
    "force_release": ["force_release"], "force_release_kept": ["force_release_kept"],
    "release_path": ["release_path"], "release_path_kept": ["release_path_kept(force)"],
    "restore": ["trash.restore"], "remove_leftover": ["cleanup.remove_leftover"],
}


def _public(module: Any) -> set[str]:
    """The public functions and classes ``module`` defines or exports (``__all__``)."""
    exported = getattr(module, "__all__", None)
    names = exported or [n for n in vars(module) if n[:1] != "_" and getattr(
        getattr(module, n), "__module__", None) == module.__name__]
    return {n for n in names if n[:1] != "_"
            and (pyinspect.isfunction(getattr(module, n)) or pyinspect.isclass(getattr(module, n)))
            and getattr(getattr(module, n), "__module__", "").startswith("core.")
            and not issubclass_safe(getattr(module, n), BaseException)}


def issubclass_safe(obj: Any, cls: type) -> bool:
    return pyinspect.isclass(obj) and issubclass(obj, cls)


ENDS_PROCESSES = {"end_holder", "wait_for_exit", "holder_process", "holders",
                  "open_pidfd_or_gone"}
"""core.engine.end_holder: ends a process, never touches a file."""


def test_every_public_entry_point_of_the_engine_is_in_the_table() -> None:
    """A new public function or class of the engine that writes must be added to
    :data:`ENTRIES` (and ask the gate); one that does not, to :data:`NOT_WRITING`."""
    from core.engine import end_holder

    names = _public(core)
    for module in (lock, reclaiming, operations, trash, cleanup, waiting):
        names |= _public(module)
    names |= _public(end_holder) - ENDS_PROCESSES
    unknown = sorted(names - set(COVERED) - NOT_WRITING)
    assert unknown == [], f"entry points the gate table does not know: {unknown}"
    assert {e for es in COVERED.values() for e in es} <= set(ENTRIES)
    lock_methods = {n for n, _ in pyinspect.getmembers(lock.Lock, pyinspect.isfunction)
                    if not n.startswith("_")}
    assert lock_methods == {"acquire", "release", "refresh"}, lock_methods


WRITING_VERBS = {"try": ["cli try"], "acquire": ["cli acquire"], "reclaim":
                 ["cli reclaim", "cli reclaim --force"], "run": ["cli run"],
                 "release": ["cli release", "cli release --force"], "clean": ["cli clean"]}
OTHER_VERBS = {"status", "wait", "list", "audit", "kill-holder", "watch", "history", "stats",
               "agent"}
"""Verbs that change no file at a lock's path (``kill-holder`` ends a process)."""


def test_every_cli_verb_that_writes_is_in_the_table() -> None:
    from core.cli.verbs import BUILTIN_VERBS

    names = {v.name for v in BUILTIN_VERBS}
    assert names - set(WRITING_VERBS) - OTHER_VERBS == set(), "a new verb: add it here"
    assert {e for es in WRITING_VERBS.values() for e in es} <= set(ENTRIES)


APP_WRITING = {"acquire": ["app Acquire"], "reclaim": ["app Reclaim", "app Reclaim (forced)"],
               "force_release": ["app Force release / Remove"], "restore": ["app Undo"],
               "release": [], "release_all": []}  # release: a lock this app holds (own)
APP_OTHER = {"holds", "held_paths", "kept_paths", "save_kept", "restore_kept", "observe",
             "end_holder"}


def test_every_app_lock_command_is_in_the_table(qapp: Any) -> None:
    from app.bridges.lock_actions import LockActions

    methods = {n for n, v in vars(LockActions).items()
               if pyinspect.isfunction(v) and not n.startswith("_")}
    assert methods - set(APP_WRITING) - APP_OTHER == set(), "a new app command: add it here"
    assert {e for es in APP_WRITING.values() for e in es} <= set(ENTRIES)
