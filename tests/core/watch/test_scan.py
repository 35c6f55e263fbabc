"""core.watch.scan: inventory of watched directories, af proof directories, hostile entries."""

from __future__ import annotations

import json
import os
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from core.config import WatchSpec
from core.fsutil import AUDIT_LOG_NAME
from core.reasons import texts
from core.record import State
from core.tempfiles import temp_path
from core.watch.scan import (
    covers,
    is_proof_dir,
    name_matcher,
    scan,
    scan_dir,
    split_claim_path,
)
from tests.support.second_user import run_unprivileged
from tests.support.watch import OLD, make_hostile


def _sema(pid: int, tag: str = "t") -> str:
    return f"pid={pid}\ntimestamp={int(time.time())}\ntag={tag}\n"


def by_path(statuses: list) -> dict:
    return {s.path: s for s in statuses}


# -- names ----------------------------------------------------------------------------------


def test_patterns_match_base_names_not_absolute_paths() -> None:
    m = name_matcher(["*.lock", "*.pid", "*-lock"])
    assert m("x.lock") and m(".X0-lock") and m("daemon.pid")
    assert not m("x.lock.txt") and not m("lock") and not m("x.lockfile")
    # the engine's own files never match, whatever the patterns
    every = name_matcher(["*"])
    assert not every(AUDIT_LOG_NAME)
    assert not every(os.path.basename(temp_path("/d/x.lock", "ab" * 16)))
    assert every("anything")


def test_covers_scope() -> None:
    flat = WatchSpec("/w")
    deep = WatchSpec("/w", recursive=True)
    assert covers(flat, "/w/a.lock") and not covers(flat, "/w/sub/a.lock")
    assert covers(deep, "/w/sub/a.lock") and not covers(deep, "/wx/a.lock")
    assert not covers(deep, "/w/sub/a.txt")
    # af parts of a proof that is the watched directory itself
    assert covers(flat, "/w/ledger/ledger.lock") and covers(flat, "/w/locks/1.2.lock")
    assert covers(flat, "/w/ledger#1.2") and not covers(flat, "/w/sub/ledger#1.2")
    assert covers(deep, "/w/sub/ledger#1.2")
    assert split_claim_path("/w/p/ledger#1.2.3") == ("/w/p", "1.2.3")
    assert split_claim_path("/w/p/ledger/x.lock") is None


# -- af proofs --------------------------------------------------------------------------------


def test_af_proof_inventory(fixtures_dir: Path) -> None:
    proof = fixtures_dir / "af" / "proof"
    assert is_proof_dir(str(proof))
    assert not is_proof_dir(str(fixtures_dir / "sema"))
    statuses = by_path(scan_dir(WatchSpec(str(proof))))
    ledger_lock = str(proof / "ledger" / "ledger.lock")
    claim_file = str(proof / "locks" / "1.2.3.lock")
    c11, c12 = str(proof / "ledger") + "#1.1", str(proof / "ledger") + "#1.2"
    assert set(statuses) == {ledger_lock, claim_file, c11, c12}
    assert statuses[ledger_lock].record.format == "af-ledger"
    assert statuses[claim_file].record.format == "af-claim"
    for c in (c11, c12):
        st = statuses[c]
        assert st.read_only, c
        assert st.record is not None and st.record.format == "af-claim"
        # the fixture's claims are long past
        assert st.state is State.EXPIRED, (c, texts(st.reasons))
    assert statuses[c11].record.holder == "prover-7"  # refreshed, node 1 released
    assert statuses[c12].record.holder == "verifier-2"  # event-NNNNNN.json name accepted
    assert not statuses[ledger_lock].read_only and not statuses[claim_file].read_only


def test_af_proof_found_in_recursive_scan(fixtures_dir: Path) -> None:
    statuses = by_path(scan([WatchSpec(str(fixtures_dir), recursive=True)]))
    proof = fixtures_dir / "af" / "proof"
    assert str(proof / "ledger") + "#1.1" in statuses
    assert str(proof / "locks" / "1.2.3.lock") in statuses
    assert str(fixtures_dir / "sema" / "tagged.lock") in statuses
    # event files and meta.json are not locks
    assert not [p for p in statuses if p.endswith(".json")]


def test_af_claim_dedupe(fixtures_dir: Path) -> None:
    proof = fixtures_dir / "af" / "proof"
    ledger = str(proof / "ledger")
    same = {"node_id": "1.1", "owner": "prover-7", "acquired_at": "2026-11-21T09:10:00Z",
            "expires_at": "2026-11-21T10:40:00Z"}
    (proof / "locks" / "1.1.lock").write_text(json.dumps(same))
    other = dict(same, node_id="1.2", owner="someone-else")
    (proof / "locks" / "1.2.lock").write_text(json.dumps(other))
    statuses = by_path(scan_dir(WatchSpec(str(proof))))
    # same node, same owner: the claim file is shown, the ledger claim is not
    assert str(proof / "locks" / "1.1.lock") in statuses
    assert ledger + "#1.1" not in statuses
    # same node, different owners: both are shown
    assert str(proof / "locks" / "1.2.lock") in statuses and ledger + "#1.2" in statuses


# -- ordinary files and engine files ---------------------------------------------------------


def test_scan_formats_and_skips_engine_files(fixtures_dir: Path, lockdir: Path) -> None:
    for sub in ("sema", "semats", "task-mcp", "pidfile"):
        for f in (fixtures_dir / sub).iterdir():
            shutil.copy(f, lockdir / f.name)
    (lockdir / AUDIT_LOG_NAME).write_text('{"operation": "acquire"}\n')
    Path(temp_path(str(lockdir / "tagged.lock"), "0" * 32)).write_text("pid=1\ntimestamp=1\n")
    (lockdir / "notes.txt").write_text("not a lock")
    os.utime(lockdir / "notes.txt", (OLD, OLD))
    spec = WatchSpec(str(lockdir), patterns=["*"])
    statuses = by_path(scan([spec]))
    names = {os.path.basename(p) for p in statuses}
    assert AUDIT_LOG_NAME not in names
    assert not [n for n in names if n.endswith(".tmp")]
    assert {"tagged.lock", "daemon.pid", "enhanced-iso.lock", "notes.txt"} <= names
    assert statuses[str(lockdir / "tagged.lock")].record.format == "sema"
    assert statuses[str(lockdir / "enhanced-iso.lock")].record.format == "task-mcp"
    assert statuses[str(lockdir / "daemon.pid")].record.format == "pidfile"
    notes = statuses[str(lockdir / "notes.txt")]
    assert notes.state is State.UNREADABLE and notes.error  # garbage: shown, with the reason


def test_missing_directory_scans_empty(tmp_path: Path) -> None:
    assert scan_dir(WatchSpec(str(tmp_path / "nope"))) == []
    f = tmp_path / "file"
    f.write_text("x")
    assert scan_dir(WatchSpec(str(f))) == []


def test_overlapping_specs_list_each_path_once(lockdir: Path) -> None:
    (lockdir / "a.lock").write_text(_sema(os.getpid()))
    statuses = scan([WatchSpec(str(lockdir), stale_after=5), WatchSpec(str(lockdir))])
    assert [s.path for s in statuses] == [str(lockdir / "a.lock")]
    assert statuses[0].stale_after == 5  # the first spec's policy


# -- hostile and odd entries -----------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("recursive", [False, True])
def test_hostile_entries_never_hang_or_crash(lockdir: Path, recursive: bool) -> None:
    expected = make_hostile(lockdir)
    (lockdir / "good.lock").write_text(_sema(os.getpid()))
    statuses = by_path(scan([WatchSpec(str(lockdir), recursive=recursive)]))
    assert statuses[str(lockdir / "good.lock")].state is State.HELD
    for name, words in expected.items():
        st = statuses[str(lockdir / name)]
        assert st.state is State.UNREADABLE, (name, st)
        assert st.error and words in " ".join(texts(st.reasons)), (name, texts(st.reasons))
    # nothing was found through the directory symlink
    assert not [p for p in statuses if "loopdir" in p]


def test_unreadable_file_as_unprivileged_user(shared_tmp: Path) -> None:
    f = shared_tmp / "secret.lock"
    f.write_text(_sema(os.getpid()))
    f.chmod(0o000)
    ok = shared_tmp / "open.lock"
    ok.write_text(_sema(os.getpid()))
    ok.chmod(0o644)
    code = (
        "import json, sys\n"
        "from core.watch.scan import scan\n"
        "from core.config import WatchSpec\n"
        f"print(json.dumps([s.to_dict() for s in scan([WatchSpec({str(shared_tmp)!r})])]))\n"
    )
    proc = run_unprivileged(code)
    assert proc.returncode == 0, proc.stderr
    out = {d["path"]: d for d in json.loads(proc.stdout)}
    assert out[str(f)]["state"] == "unreadable"
    assert "permission denied" in out[str(f)]["error"]
    assert out[str(ok)]["state"] == "held"


def test_scan_uses_one_snapshot_and_given_time(lockdir: Path) -> None:
    from core.verdicts.liveness import snapshot

    (lockdir / "a.lock").write_text(_sema(os.getpid()))
    procs = snapshot()
    now = datetime.now(UTC)
    [st] = scan([WatchSpec(str(lockdir))], procs=procs, now=now)
    assert st.checked_at == now
    assert st.state is State.HELD and st.liveness.value == "alive"
