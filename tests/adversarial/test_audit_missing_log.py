"""``lockwarden audit --verify`` where there is no log says so and exits 1 instead of calling an
absent log "intact"; a log its writer appended to and that is now gone is reported as removed
(core.audit.verify, ``VerifyResult.missing``). Through the real CLI process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core import audit
from core.fsutil import AUDIT_LOG_NAME
from tests.support.cli import lw

pytestmark = pytest.mark.usefixtures("private_state")  # this process and the CLI's


@pytest.mark.slow
def test_verify_without_a_log_says_so_and_exits_1(lockdir: Path) -> None:
    log = lockdir / AUDIT_LOG_NAME
    res = audit.verify(str(lockdir))
    assert (res.missing, res.ok, res.entries, res.log_path) == (True, True, 0, str(log))
    assert res.reason == f"no audit log at {log}"
    for extra in ([], ["--json"]):
        for target in (lockdir, lockdir / "build.lock", log):
            r = lw("audit", str(target), "--verify", *extra)
            assert r.returncode == 1, (target, extra, r)
            assert r.stderr.strip() == f"lockwarden: no audit log at {log}"
            assert r.stdout == ""
    assert not log.exists()  # verifying never creates it


def test_removed_log_is_reported_to_the_user_who_wrote_it(lockdir: Path) -> None:
    assert lw("try", str(lockdir / "a.lock"), "-q").returncode == 0
    r = lw("audit", str(lockdir), "--verify", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["ok"] is True
    (lockdir / AUDIT_LOG_NAME).unlink()
    res = audit.verify(str(lockdir))
    assert (res.missing, res.ok, res.head_checked) == (True, False, True)
    assert res.reason is not None and "removed or renamed" in res.reason
    r = lw("audit", str(lockdir), "--verify")
    assert r.returncode == 1 and "no audit log at" in r.stderr


def test_verify_of_an_interrupted_write_exits_0_and_says_so(lockdir: Path) -> None:
    assert lw("try", str(lockdir / "a.lock"), "-q").returncode == 0
    with open(lockdir / AUDIT_LOG_NAME, "ab") as f:
        f.write(b'{"timestamp":"20')
    r = lw("audit", str(lockdir), "--verify")
    assert r.returncode == 0
    assert "chain intact" in r.stdout and "interrupted write" in r.stdout
    r = lw("audit", str(lockdir), "--verify", "--json")
    out = json.loads(r.stdout)
    assert r.returncode == 0 and out["ok"] is True and out["torn_tail"] is True
