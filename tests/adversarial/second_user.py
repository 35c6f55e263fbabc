"""A second real account for tests where permissions matter (``lwtest2``, created with
useradd when missing; CI runs as root). Tests that need it skip elsewhere, with the reason."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess

import pytest

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
