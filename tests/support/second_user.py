"""A second real account for tests where permissions matter (``lwtest2``, created with
useradd when missing; CI runs as root), and code run as ``nobody``. Tests that need them skip
elsewhere, with the reason."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import ROOT

USER2 = "lwtest2"


def second_user() -> tuple[int, int]:
    """uid and gid of the test account :data:`USER2`, created with useradd when missing.
    Skips unless root on POSIX with useradd."""
    if os.name != "posix" or os.geteuid() != 0:
        pytest.skip("needs root: to create a second account and run a process as it")
    try:
        pw = pwd.getpwnam(USER2)
    except KeyError:
        useradd = shutil.which("useradd")
        if useradd is None:
            pytest.skip("useradd is not installed: cannot create the second account")
        subprocess.run(
            [useradd, "--system", "--user-group", "--no-create-home",
             "--shell", "/usr/sbin/nologin", USER2],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        pw = pwd.getpwnam(USER2)
    return pw.pw_uid, pw.pw_gid


def site_for_second_user(base: Path, packages: list[str]) -> Path:
    """A world-readable copy of ``core`` and the named installed packages under ``base/site``
    (the venv lives under /root, which the second account cannot read); returns the directory
    to put first on its ``sys.path``."""
    import importlib

    site = base / "site"
    ignore = shutil.ignore_patterns("__pycache__")
    for name in ["core", *packages]:
        mod = importlib.import_module(name)
        assert mod.__file__ is not None
        shutil.copytree(Path(mod.__file__).parent, site / name, ignore=ignore)
    for p in [site, *site.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return site


def second_user_python(uid: int, gid: int) -> str:
    """A Python >= 3.11 the second account can run (the system's); skips when there is none."""
    for exe in ("/usr/bin/python3", shutil.which("python3") or ""):
        if exe and subprocess.run(
            [exe, "-I", "-c", "import sys; assert sys.version_info >= (3, 11)"],
            user=uid, group=gid, extra_groups=[], capture_output=True, timeout=60, cwd="/",
        ).returncode == 0:
            return exe
    pytest.skip(f"no Python >= 3.11 that {USER2} can run (the venv's lives under /root)")


def run_unprivileged(code: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run Python ``code`` as user/group 65534 (nobody) with setpriv, this checkout on its
    path; skip when impossible (not root, no setpriv). ``timeout`` in seconds."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("needs root to switch to an unprivileged user")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed")
    env = dict(os.environ, PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(
        [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=str(ROOT),
    )


RUN_CLI = ("import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); sys.argv[0] = 'lockwarden'; "
           "runpy.run_module('core', run_name='__main__')")
"""``python -I -c RUN_CLI SITE ARGS``: the command line from the copy at SITE
(:func:`site_for_second_user`), with nothing of this venv."""


def lw_as(uid: int, gid: int, python: str, site: Path, home: Path, *args: str
          ) -> subprocess.CompletedProcess[str]:
    """``lockwarden ARGS`` run to its end as ``uid``/``gid`` (no other group) with ``python``
    (:func:`second_user_python`) and the copy at ``site``, in ``/`` with a minimal
    environment whose ``HOME`` is ``home``; output captured as text, 60 s cap."""
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(home)}
    return subprocess.run([python, "-I", "-c", RUN_CLI, str(site), *args], user=uid, group=gid,
                          extra_groups=[], capture_output=True, text=True, timeout=60, cwd="/",
                          env=env)
