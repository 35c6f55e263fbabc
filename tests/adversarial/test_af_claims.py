"""af claim files (docs/engine.md, "af claims"), on a copy of the claim af itself wrote
(tests/data/fixtures): ``release --force`` removes it, says whose it was and audits that;
``reclaim --force`` is refused with a clear line (exit 1), audited as ``reclaim_refused``,
and leaves af's file as it was."""

from __future__ import annotations

import json
from pathlib import Path

from core import audit
from tests.test_cli import lw, one_line


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
