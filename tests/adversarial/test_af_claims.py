"""af claim files (docs/engine.md, "af claims"), on a copy of the claim af itself wrote
(tests/data/fixtures): ``release --force`` removes it, says whose it was and audits that;
``reclaim --force`` is refused with a clear line (exit 1), audited as ``reclaim_refused``,
and leaves af's file as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import audit
from tests.support.cli import lw, one_line


def _claim(fixtures_dir: Path) -> Path:
    claim = fixtures_dir / "af" / "proof" / "locks" / "1.2.3.lock"
    assert json.loads(claim.read_bytes())["node_id"] == "1.2.3"
    return claim


def test_force_release_of_an_af_claim_removes_and_audits_it(fixtures_dir: Path) -> None:
    claim = _claim(fixtures_dir)
    out = lw("release", str(claim), "--force", "--reason", "agent gone")
    assert out.returncode == 0, out.stderr
    assert "agent-uuid-1234" in out.stdout and "gone" not in out.stdout
    assert not claim.exists()
    [entry] = audit.read(str(claim.parent))
    assert (entry.operation, entry.result) == ("force_release", "ok")
    assert entry.details["displaced"]["holder"] == "agent-uuid-1234"
    assert entry.details["displaced"]["format"] == "af-claim"


def test_reclaim_of_an_af_claim_is_refused_and_audited(fixtures_dir: Path) -> None:
    claim = _claim(fixtures_dir)
    before = claim.read_bytes()
    for extra in ([], ["--force", "--reason", "take it"]):
        out = lw("reclaim", str(claim), *extra)
        assert out.returncode == 1, out.stderr
        assert "af claim" in one_line(out.stderr)
    assert claim.read_bytes() == before
    ops = [(e.operation, e.result) for e in audit.read(str(claim.parent))]
    assert ops == [("reclaim_refused", "refused")] * 2


def test_a_stale_git_lock_is_released_never_reclaimed(tmp_path: Path) -> None:
    """A git ``index.lock`` left by a crash: replacing it with a Lockwarden lock would make
    git wait for ever on a file it takes for its own; it is refused (exit 1, audited) and the
    lock can be force-released (git's own advice: remove the file)."""
    import os
    import shutil
    import subprocess

    git = shutil.which("git")
    if git is None:
        import pytest

        pytest.skip("git is not installed (CI installs it)")
    repo = tmp_path / "repo"
    subprocess.run([git, "init", "-q", str(repo)], check=True, timeout=60)
    lock = repo / ".git" / "index.lock"
    lock.write_bytes(b"")
    os.utime(lock, (1_700_000_000, 1_700_000_000))
    out = lw("reclaim", str(lock), "--force", "--reason", "crashed commit")
    assert out.returncode == 1 and "git-lock lock" in one_line(out.stderr), out.stderr
    assert lock.read_bytes() == b""
    assert lw("release", str(lock), "--force", "--reason", "crashed commit").returncode == 0
    assert not lock.exists()


@pytest.mark.slow
def test_a_claim_in_an_af_ledger_is_refused_truthfully(fixtures_dir: Path) -> None:
    """``release`` (forced or not) of a claim replayed from af's ledger: not "not held by PID
    …" and a ``free`` audit result, but the truth -- only af changes its ledger, with af's
    command -- exit 1, audited ``release_refused`` with result ``refused``, like ``reclaim``;
    the ledger is left as it was. The Python API refuses it too."""
    import pytest

    import core
    from core.codes import ReadOnlyKind
    from core.errors import ReadOnlyLock

    proof = fixtures_dir / "af" / "proof"
    claim = f"{proof}/ledger#1.1"
    before = {p.name: p.read_bytes() for p in (proof / "ledger").iterdir()}
    for args in (["--force", "--reason", "agent gone"], []):
        out = lw("release", claim, *args)
        assert out.returncode == 1, out.stderr
        line = one_line(out.stderr)
        assert "only af changes its ledger: `af release 1.1`" in line, line
        assert "not held by PID" not in line
    out = lw("reclaim", claim, "--force", "--reason", "take it")
    assert out.returncode == 1 and "`af release 1.1`" in one_line(out.stderr)
    with pytest.raises(ReadOnlyLock) as refused:
        core.force_release(claim, reason="api")
    assert refused.value.kind is ReadOnlyKind.LEDGER_CLAIM
    ops = [(e.operation, e.result) for e in audit.read(str(proof))]
    assert ops == [("release_refused", "refused")] * 2 + [("reclaim_refused", "refused"),
                                                         ("release_refused", "refused")]
    assert {p.name: p.read_bytes() for p in (proof / "ledger").iterdir()} == before
