"""A neighbour on a shared mount (a tmpfs of mode 1777, as ``/tmp`` or ``/run/lock``) cannot
take the files a forced release keeps, nor what Undo puts back (docs/engine.md, "Whose trash";
core/engine/trashdirs.py). The second real account makes ``$mount/.Trash-$UID`` (or
``$mount/.Trash/$UID``) first -- a symbolic link to a directory of its own, or a directory it
owns: the kept file goes to the quarantine folder in this user's data directory instead, and
the neighbour's directory stays empty. Undo puts back only the very file put away: not a file
the neighbour swapped in (another owner, another inode, other content), never over a lock taken
since. Needs root (to mount, and to run as the second account)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core import audit
from core.engine.operations import force_release_kept
from core.engine.trash import Kept, restore
from core.errors import LockError, LockHeld
from tests.support.second_user import second_user

UID = os.geteuid()


@pytest.fixture
def shared_mount() -> Iterator[Path]:
    """A tmpfs of mode 1777 mounted at a fresh directory the second account can reach
    (another file system than the home's), unmounted and removed after the test."""
    if os.geteuid() != 0:
        pytest.skip("needs root: to mount a tmpfs and run as a second account")
    base = Path(tempfile.mkdtemp(prefix="lockwarden-trash-"))
    base.chmod(0o755)
    top = base / "mnt"
    top.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=1777", "tmpfs", str(top)],
                      capture_output=True).returncode != 0:
        shutil.rmtree(base)
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield top
    finally:
        audit.close_logs()
        subprocess.run(["umount", "-l", str(top)], check=True)
        shutil.rmtree(base, ignore_errors=True)


def as_neighbour(*cmd: str) -> None:
    """Run ``cmd`` as the second real account."""
    uid, gid = second_user()
    subprocess.run(list(cmd), user=uid, group=gid, extra_groups=[], check=True, timeout=60,
                   cwd="/")


def foreign_pidfile(top: Path) -> tuple[Path, bytes]:
    """A pidfile lock in a shared directory on the mount, of a process that exited."""
    locks = top / "run"
    locks.mkdir(mode=0o1777, exist_ok=True)
    locks.chmod(0o1777)
    lock = locks / "daemon.pid"
    data = b"4194000\n"
    lock.write_bytes(data)
    return lock, data


def quarantined(kept: Kept, data: bytes) -> None:
    """``kept`` is in this user's quarantine folder, the very file, this user's."""
    assert kept.method == "quarantine", kept
    q = Path(os.environ["XDG_DATA_HOME"]) / "lockwarden" / "quarantine"
    path = Path(kept.path)
    assert path.parent == q and path.read_bytes() == data
    st = path.stat()
    assert st.st_uid == UID and (st.st_dev, st.st_ino) == (kept.dev, kept.ino)
    assert kept.sha256 == hashlib.sha256(data).hexdigest()


def test_a_trash_link_planted_by_a_neighbour_is_never_followed(shared_mount: Path) -> None:
    evil = shared_mount / "evil"
    as_neighbour("mkdir", "-m", "0777", str(evil))
    as_neighbour("ln", "-s", str(evil), str(shared_mount / f".Trash-{UID}"))
    lock, data = foreign_pidfile(shared_mount)
    done = force_release_kept(lock, reason="daemon gone")
    assert not lock.exists() and done.kept is not None
    quarantined(done.kept, data)
    assert list(evil.rglob("*")) == []  # nothing reached the neighbour's directory
    assert os.readlink(shared_mount / f".Trash-{UID}") == str(evil)  # and its link stays
    entry = [e for e in audit.read(str(lock.parent)) if e.operation == "force_release"][-1]
    assert entry.details["kept"]["method"] == "quarantine"
    assert entry.details["kept"]["sha256"] == hashlib.sha256(data).hexdigest()


def test_a_trash_directory_a_neighbour_owns_is_never_used(shared_mount: Path) -> None:
    theirs = shared_mount / f".Trash-{UID}"
    as_neighbour("mkdir", "-m", "0777", str(theirs))
    as_neighbour("mkdir", "-m", "0777", str(theirs / "files"), str(theirs / "info"))
    lock, data = foreign_pidfile(shared_mount)
    done = force_release_kept(lock, reason="daemon gone")
    assert done.kept is not None
    quarantined(done.kept, data)
    assert list(theirs.rglob("*.pid*")) == []


def test_the_shared_trash_is_used_only_where_this_users_own_part_is_ours(
        shared_mount: Path) -> None:
    """``$mount/.Trash`` (sticky, not a link) with ``$UID`` in it made by the neighbour: that
    one is not ours, so the mount's ``.Trash-$UID`` -- made now, ours -- takes the file."""
    shared = shared_mount / ".Trash"
    as_neighbour("mkdir", "-m", "1777", str(shared))
    as_neighbour("mkdir", "-m", "0777", str(shared / str(UID)))
    lock, data = foreign_pidfile(shared_mount)
    done = force_release_kept(lock, reason="daemon gone")
    kept = done.kept
    assert kept is not None and kept.method == "trash"
    ours = shared_mount / f".Trash-{UID}"
    assert Path(kept.path) == ours / "files" / "daemon.pid"
    assert Path(kept.path).read_bytes() == data
    for d in (ours, ours / "files", ours / "info"):
        st = d.lstat()
        assert st.st_uid == UID and oct(st.st_mode & 0o777) == "0o700"
    assert list((shared / str(UID)).iterdir()) == []
    restored = restore(kept, reason="undo")  # the very file: back where it was
    assert lock.read_bytes() == data and restored.path == str(lock)


def _swap(kept: Kept, data: bytes, *, owner: tuple[int, int] | None = None) -> None:
    """Replace the kept file by another one with ``data``, owned by ``owner``."""
    other = Path(kept.path).with_name("planted")
    other.write_bytes(data)
    if owner is not None:
        os.chown(other, *owner)
    os.replace(other, kept.path)


@pytest.mark.parametrize("planted", ["neighbours", "other_content", "same_content_new_file"])
def test_undo_puts_back_only_the_very_file_put_away(shared_mount: Path, planted: str) -> None:
    lock, data = foreign_pidfile(shared_mount)
    kept = force_release_kept(lock, reason="daemon gone").kept
    assert kept is not None
    if planted == "neighbours":  # what a neighbour controlling the trash would put there
        _swap(kept, b"1\n", owner=second_user())
    elif planted == "other_content":
        _swap(kept, b"1\n")
    else:
        _swap(kept, data)  # the same bytes, another file
    with pytest.raises(LockError, match=r"not this user's file|not the file that was put away"):
        restore(kept, reason="undo")
    assert not lock.exists()  # nothing was linked into the lock directory


def test_undo_never_goes_over_a_lock_taken_since(shared_mount: Path) -> None:
    lock, data = foreign_pidfile(shared_mount)
    kept = force_release_kept(lock, reason="daemon gone").kept
    assert kept is not None
    lock.write_bytes(b"4194001\n")  # the daemon started again
    with pytest.raises(LockHeld, match="taken again"):
        restore(kept, reason="undo")
    assert lock.read_bytes() == b"4194001\n" and Path(kept.path).read_bytes() == data


def test_undo_without_the_files_identity_puts_nothing_back(shared_mount: Path) -> None:
    lock, _data = foreign_pidfile(shared_mount)
    kept = force_release_kept(lock, reason="daemon gone").kept
    assert kept is not None
    with pytest.raises(LockError, match="not known"):
        restore(dataclasses.replace(kept, sha256=None))
    assert not lock.exists()


def test_the_apps_undo_refuses_a_planted_file(shared_mount: Path, qapp: Any) -> None:
    from app.bridges.lock_actions import ActionError, LockActions

    lock, _data = foreign_pidfile(shared_mount)
    actions = LockActions()
    seen: list[Kept] = []
    actions.kept.connect(seen.append)  # what the app's Undo puts back (app/actions/commands.py)
    actions.force_release(str(lock), reason="daemon gone")
    assert seen
    _swap(seen[-1], b"1\n", owner=second_user())
    with pytest.raises(ActionError):
        actions.restore(seen[-1], reason="undo")
    assert not lock.exists()
