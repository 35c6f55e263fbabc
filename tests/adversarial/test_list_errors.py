"""``lockwarden list -r`` lists every lock it can reach and names each directory it could not
list, instead of printing nothing (docs/cli.md, "``list``: what could not be listed"). The
directory that cannot be listed is a real 0700 directory of root, listed by the real second
account."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from tests.support.second_user import (
    lw_as,
    second_user,
    second_user_python,
    site_for_second_user,
)

pytestmark = pytest.mark.slow  # a second account with its own copy of the code


@pytest.fixture
def tree() -> Iterator[Path]:
    """A directory the second account can enter (pytest's own temp root is 0700), removed
    afterwards with whatever the test made unlistable in it."""
    base = Path(tempfile.mkdtemp(prefix="lockwarden-list-"))
    base.chmod(0o755)
    yield base
    for d, _subdirs, _files in os.walk(base):
        os.chmod(d, 0o755)
    shutil.rmtree(base, ignore_errors=True)


def test_list_r_reports_each_unlistable_directory_and_lists_the_rest(tree: Path) -> None:
    uid, gid = second_user()
    python = second_user_python(uid, gid)
    site = site_for_second_user(tree, ["platformdirs", "psutil"])
    root = tree / "locks"
    for sub in ("a", "b", "secret", "z"):
        (root / sub).mkdir(parents=True)
    for sub in ("a", "z"):
        (root / sub / "job.lock").write_text("pid=1\ntimestamp=1700000000\n")
    (root / "secret" / "hidden.lock").write_text("pid=1\ntimestamp=1700000000\n")
    for d in [root, *root.iterdir()]:
        d.chmod(0o755)
    (root / "secret").chmod(0o700)  # root's: the second account cannot list it

    lw = partial(lw_as, uid, gid, python, site, tree)  # the command line as the second account
    out = lw("list", "-r", str(root))
    assert out.returncode == 0, out.stderr
    assert str(root / "a" / "job.lock") in out.stdout and str(root / "z" / "job.lock") in \
        out.stdout
    assert out.stderr.strip().splitlines() == [
        f"lockwarden: {root / 'secret'}: cannot be listed: Permission denied"]
    js = json.loads(lw("list", "-r", str(root), "--json").stdout)
    errors = [x for x in js if x.get("kind") == "error"]
    assert errors == [{"kind": "error", "path": str(root / "secret"), "errno": "EACCES",
                       "error": "Permission denied"}]
    assert sorted(x["path"] for x in js if x.get("kind") != "error") == [
        str(root / "a" / "job.lock"), str(root / "z" / "job.lock")]
    # a DIR named on the command line that cannot be listed: exit 3
    assert lw("list", str(root / "secret")).returncode == 3
    os.chmod(root / "secret", 0o755)
