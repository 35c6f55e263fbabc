"""A stale lock of another user in a sticky directory (``/tmp``'s ``t`` bit): only its owner
or root may remove or replace it, and ``reclaim``/``release --force`` say so, naming the owner
(core/cli/main.py ``_os_error_text``, core/fsutil.py ``sticky_owner``) -- they said only
"Operation not permitted". Run as the second real account against a lock owned by ``nobody``."""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

import pytest

from tests.support.second_user import second_user, second_user_python, site_for_second_user

RUN = "import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); sys.argv[0] = 'lockwarden'; " \
      "runpy.run_module('core', run_name='__main__')"


@pytest.mark.parametrize("verb", [["reclaim"], ["release", "--force", "--reason", "test"]])
def test_a_foreign_lock_in_a_sticky_directory_names_its_owner(shared_tmp: Path,
                                                              verb: list[str]) -> None:
    tmp_path = shared_tmp
    uid, gid = second_user()
    python = second_user_python(uid, gid)
    site = site_for_second_user(tmp_path, ["platformdirs", "psutil"])
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    lock = sticky / "a.lock"
    lock.write_text("pid=999999\ntimestamp=1000\ntag=left by nobody\n")
    nobody = pwd.getpwnam("nobody")
    os.chown(lock, nobody.pw_uid, nobody.pw_gid)
    os.utime(lock, (1000, 1000))
    out = subprocess.run([python, "-I", "-c", RUN, str(site), *verb[:1], str(lock), *verb[1:]],
                         user=uid, group=gid, extra_groups=[], capture_output=True, text=True,
                         timeout=60, cwd="/", env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
                                                   "HOME": str(tmp_path)})
    assert out.returncode == 3, out.stderr
    assert f"owned by nobody: in the sticky directory {sticky} only nobody or root" in out.stderr
    assert "Operation not permitted" not in out.stderr
    assert lock.read_text().startswith("pid=999999")  # untouched
