"""core.audit fallback and hostile logs: a directory the writer cannot write sends the entry to
the per-user log (platformdirs) and says so; a symlink, FIFO or hard link at the log's name is
never written through; when both logs fail, append returns the error instead of raising
(docs/DESIGN.md "Audit log")."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import platformdirs
import pytest

from core import audit
from core.fsutil import AUDIT_LOG_NAME

NOBODY = 65534


def test_fallback_path_is_platformdirs(private_state: Path) -> None:
    expected = os.path.join(platformdirs.user_log_dir("lockwarden"), "audit.log")
    assert audit.fallback_log_path() == expected
    assert expected.startswith(str(private_state))


def test_symlinked_log_is_never_written_through(private_state: Path, lockdir: Path,
                                                tmp_path: Path) -> None:
    target = tmp_path / "victim.txt"
    target.write_bytes(b"precious\n")
    (lockdir / AUDIT_LOG_NAME).symlink_to(target)
    w = audit.append(str(lockdir / "a.lock"), "acquire", details={"k": 1})
    assert w.fallback is True and w.error is None
    assert w.log_path == audit.fallback_log_path()
    assert w.reason is not None and "symbolic link" in w.reason
    assert target.read_bytes() == b"precious\n"
    assert (lockdir / AUDIT_LOG_NAME).is_symlink()
    (e,) = audit.read(w.log_path)
    assert e.lock_path == str(lockdir / "a.lock") and e.details == {"k": 1}
    assert e.prev == audit.ZERO_HASH


def test_dangling_symlink_does_not_create_its_target(
    private_state: Path, lockdir: Path, tmp_path: Path
) -> None:
    target = tmp_path / "created-by-attacker-choice"
    (lockdir / AUDIT_LOG_NAME).symlink_to(target)
    w = audit.append(str(lockdir / "a.lock"), "acquire")
    assert w.fallback and w.error is None
    assert not target.exists()


def test_hard_linked_log_is_refused(private_state: Path, lockdir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"")
    os.link(outside, lockdir / AUDIT_LOG_NAME)
    w = audit.append(str(lockdir / "a.lock"), "acquire")
    assert w.fallback and w.reason is not None and "hard link" in w.reason
    assert outside.read_bytes() == b""


@pytest.mark.timeout(30)
def test_fifo_log_neither_hangs_nor_is_written(private_state: Path, lockdir: Path) -> None:
    os.mkfifo(lockdir / AUDIT_LOG_NAME)
    w = audit.append(str(lockdir / "a.lock"), "acquire")
    assert w.fallback and w.error is None
    assert w.reason is not None and "FIFO" in w.reason
    assert stat.S_ISFIFO(os.lstat(lockdir / AUDIT_LOG_NAME).st_mode)


def test_missing_directory_goes_to_fallback(private_state: Path, tmp_path: Path) -> None:
    w = audit.append(str(tmp_path / "gone" / "a.lock"), "release", result="lost")
    assert w.fallback and w.error is None
    assert not (tmp_path / "gone").exists()


def test_fallback_log_keeps_its_own_chain(private_state: Path, tmp_path: Path) -> None:
    for k in range(3):
        d = tmp_path / f"d{k}"
        d.mkdir()
        (d / AUDIT_LOG_NAME).symlink_to(tmp_path / "nowhere")
        assert audit.append(str(d / "x.lock"), "acquire").fallback
    res = audit.verify(audit.fallback_log_path())
    assert (res.ok, res.entries) == (True, 3)
    assert stat.S_IMODE(os.stat(os.path.dirname(audit.fallback_log_path())).st_mode) == 0o700


def test_both_logs_fail_returns_error(
    lockdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("HOME", str(blocker))
    monkeypatch.setenv("XDG_STATE_HOME", str(blocker / "state"))
    (lockdir / AUDIT_LOG_NAME).symlink_to(tmp_path / "nowhere")
    w = audit.append(str(lockdir / "a.lock"), "acquire")
    assert (w.log_path, w.fallback) == ("", True)
    assert w.error is not None
    assert str(lockdir / AUDIT_LOG_NAME) in w.error and "not a directory" in w.error


# ----------------------------------------------------------------- as an unprivileged user

UNPRIV_SCRIPT = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
from core import audit
out = {}
for name in sys.argv[2:]:
    w = audit.append(os.path.join(name, "job.lock"), "acquire", details={"dir": name})
    out[name] = {"log_path": w.log_path, "fallback": w.fallback, "error": w.error,
                 "reason": w.reason}
out["fallback_path"] = audit.fallback_log_path()
v = audit.verify(audit.fallback_log_path())
out["verify"] = [v.ok, v.entries, v.reason]
print(json.dumps(out))
"""


def _setpriv_prefix() -> list[str]:
    return [
        "setpriv",
        f"--reuid={NOBODY}",
        f"--regid={NOBODY}",
        "--clear-groups",
    ]


def _unprivileged_python() -> str | None:
    """An interpreter (>= 3.11) that uid 65534 can run: the venv's may live under /root."""
    candidates = [sys.executable, getattr(sys, "_base_executable", ""), "/usr/bin/python3"]
    which = shutil.which("python3")
    if which:
        candidates.append(which)
    for exe in candidates:
        if not exe or not os.path.exists(exe):
            continue
        try:
            r = subprocess.run(
                [
                    *_setpriv_prefix(),
                    exe,
                    "-I",
                    "-c",
                    "import sys; assert sys.version_info >= (3, 11)",
                ],
                capture_output=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if r.returncode == 0:
            return exe
    return None


@pytest.fixture
def world_tmp() -> Iterator[Path]:
    """A tmp dir (under the system tmp dir) that uid 65534 can traverse; removed afterwards.
    pytest's own tmp_path lives under a 0700 directory of root."""
    d = Path(tempfile.mkdtemp(prefix="lockwarden-audit-"))
    try:
        d.chmod(0o755)
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.timeout(120)
def test_unwritable_directory_as_unprivileged_user(world_tmp: Path) -> None:
    if os.name != "posix" or os.geteuid() != 0:
        pytest.skip("needs root to drop to uid 65534 (root itself ignores permissions)")
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    exe = _unprivileged_python()
    if exe is None:
        pytest.skip("no Python >= 3.11 that uid 65534 can run")

    # the code under test, readable by the unprivileged user
    site = world_tmp / "site"
    site.mkdir()
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(Path(audit.__file__).parents[1], site / "core", ignore=ignore)  # all of core
    shutil.copytree(Path(platformdirs.__file__).parent, site / "platformdirs", ignore=ignore)
    for p in [site, *site.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)

    home = world_tmp / "home"
    (home / "state").mkdir(parents=True)
    for p in (home, home / "state"):
        os.chown(p, NOBODY, NOBODY)

    ro = world_tmp / "root-only"  # root's 0755 dir: nobody cannot create the log
    ro.mkdir(mode=0o755)
    ro.chmod(0o755)
    shared = world_tmp / "shared"  # sticky world-writable dir with root's 0644 log in it
    shared.mkdir()
    shared.chmod(0o1777)
    root_log = shared / AUDIT_LOG_NAME
    root_log.write_bytes(b"")
    root_log.chmod(0o644)
    free = world_tmp / "free"  # writable by everyone, no log yet
    free.mkdir()
    free.chmod(0o1777)

    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "XDG_STATE_HOME": str(home / "state"),
        "XDG_DATA_HOME": str(home / "data"),
        "LANG": "C.UTF-8",
    }
    r = subprocess.run(
        [
            *_setpriv_prefix(),
            exe,
            "-I",
            "-c",
            UNPRIV_SCRIPT,
            str(site),
            str(ro),
            str(shared),
            str(free),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=90,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    fallback = home / "state" / "lockwarden" / "log" / "audit.log"
    assert out["fallback_path"] == str(fallback)

    assert out[str(ro)]["fallback"] is True and out[str(ro)]["error"] is None
    assert out[str(ro)]["log_path"] == str(fallback)
    assert "permission denied" in out[str(ro)]["reason"]
    assert not (ro / AUDIT_LOG_NAME).exists()

    assert out[str(shared)]["fallback"] is True
    assert "permission denied" in out[str(shared)]["reason"]
    assert root_log.read_bytes() == b""

    assert out[str(free)] == {
        "log_path": str(free / AUDIT_LOG_NAME),
        "fallback": False,
        "error": None,
        "reason": None,
    }
    assert os.stat(free / AUDIT_LOG_NAME).st_uid == NOBODY

    assert out["verify"] == [True, 2, None]
    assert os.stat(fallback).st_uid == NOBODY
    entries = audit.read(str(fallback))
    assert [e.details["dir"] for e in entries] == [str(ro), str(shared)]
    try:
        expected_user = pwd.getpwuid(NOBODY).pw_name
    except KeyError:
        expected_user = str(NOBODY)
    assert {e.user for e in entries} == {expected_user}


def test_the_per_user_logs_folder_names_its_log(private_state: Path, lockdir: Path,
                                                tmp_path: Path) -> None:
    """``lockwarden audit DIR`` reads DIR's ``.lock_audit.log``; the per-user log's own folder
    has none, only ``audit.log``: given that folder, the command reads the per-user log (it
    found nothing before; only the file's path worked)."""
    (lockdir / AUDIT_LOG_NAME).symlink_to(tmp_path / "elsewhere")  # sends the entry there
    w = audit.append(str(lockdir / "a.lock"), "acquire", details={"k": 1})
    assert w.fallback and w.log_path == audit.fallback_log_path()
    folder = os.path.dirname(w.log_path)
    assert audit.resolve_log_path(folder) == w.log_path
    root = Path(__file__).resolve().parents[3]
    out = subprocess.run([sys.executable, "-m", "core", "audit", folder, "--json"],
                         capture_output=True, text=True, cwd=root, timeout=60, check=False,
                         env={**os.environ, "PYTHONPATH": str(root)})
    assert out.returncode == 0, out.stderr
    [entry] = json.loads(out.stdout)
    assert entry["lockPath"] == str(lockdir / "a.lock")
