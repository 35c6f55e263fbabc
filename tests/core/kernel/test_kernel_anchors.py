"""Kernel-lock anchors (core.kernel.anchors; docs/specs/devtool-locks.md §0, §1 rows dpkg/apt,
cargo, uv, Gradle): an empty anchor file is ``held`` while a real process holds a kernel lock on it
and ``free`` (``kernel_anchor_free``), read-only, never stale, once it has gone; no release, reclaim
or clean ever removes it. Real holders: portalocker (flock), fasteners (POSIX ``lockf``) and
util-linux ``flock(1)``, each in its own process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.codes import Code, ReadOnlyKind
from core.config.platform_defaults import default_anchor_watches, default_watches
from core.engine import operations
from core.engine.reclaiming import reclaim
from core.errors import LockError, ReadOnlyLock
from core.kernel.anchors import anchor_tool
from core.record import LockStatus, State
from core.tools import safe_action
from core.verdicts.inspect import inspect
from tests.support.cli import lw, one_line

linux = pytest.mark.skipif(not os.path.exists("/proc/locks"), reason="needs Linux /proc/locks")

PORTALOCKER = r"""
import sys, portalocker
with portalocker.Lock(sys.argv[1], flags=portalocker.LOCK_EX):
    print("ready", flush=True)
    sys.stdin.read()
"""

FASTENERS = r"""
import sys, fasteners
lock = fasteners.InterProcessLock(sys.argv[1])
assert lock.acquire()
print("ready", flush=True)
sys.stdin.read()
lock.release()
"""


def _command(holder: str, path: Path) -> list[str]:
    if holder == "portalocker":
        return [sys.executable, "-c", PORTALOCKER, str(path)]
    if holder == "fasteners":
        return [sys.executable, "-c", FASTENERS, str(path)]
    if shutil.which("flock") is None:
        pytest.skip("flock(1) (util-linux) is needed")
    return ["flock", str(path), "sh", "-c", "echo ready; exec cat"]


class Holder:
    """A process holding a kernel lock on ``path`` until :meth:`end` (its stdin closes)."""

    def __init__(self, holder: str, path: Path) -> None:
        self.proc = subprocess.Popen(_command(holder, path), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline() == "ready\n"
        self.pid = self.proc.pid

    def end(self) -> None:
        """Let the holder exit and wait for it: its lock is gone when this returns."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == 0

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def holders() -> Iterator[list[Holder]]:
    made: list[Holder] = []
    yield made
    for h in made:
        h.kill()


def _codes(st: LockStatus) -> list[Code]:
    return [r.code for r in st.reasons]


def _anchor(root: Path, rel: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


def _days_old(path: Path, days: float = 2) -> None:
    t = time.time() - days * 86400
    os.utime(path, (t, t))


def _assert_free_anchor(st: LockStatus, tool: str) -> None:
    assert st.state is State.FREE and _codes(st) == [Code.KERNEL_ANCHOR_FREE], st
    assert st.reasons[0].get("tool") == tool and st.reasons[0].get("file") == st.path
    assert st.read_only and st.present and not st.locked and not st.kernel_held
    assert (st.tool, st.kind, st.anchor_tool) == (tool, "kernel", tool)
    assert safe_action(st).startswith("none: only the kernel knows; never delete")


# -- the recogniser -------------------------------------------------------------------------


@pytest.mark.parametrize(("path", "tool"), [
    ("/var/lib/dpkg/lock", "dpkg"),
    ("/var/lib/dpkg/lock-frontend", "dpkg"),
    ("/srv/chroot/var/lib/dpkg/lock-frontend", "dpkg"),
    ("/var/cache/apt/archives/lock", "apt"),
    ("/var/lib/apt/lists/lock", "apt"),
    ("/home/u/src/x/target/debug/.cargo-lock", "cargo"),
    ("/home/u/.cargo/.package-cache", "cargo"),
    ("/opt/cargo/.package-cache-mutate", "cargo"),
    ("/x/target/debug/incremental/foo-1abc/s-h2k3-9xy.lock", "cargo"),
    ("/home/u/.cache/uv/.lock", "uv"),
    ("/home/u/.gradle/caches/8.5/fileHashes/fileHashes.lock", "gradle"),
    ("/p/app/.gradle/8.5/checksums/checksums.lock", "gradle"),
])
def test_known_anchor_paths_name_their_tool(path: str, tool: str) -> None:
    assert anchor_tool(path) == tool


@pytest.mark.parametrize("path", [
    "/tmp/x.lock", "/tmp/.lock", "/run/lock/LCK..ttyS0", "/var/lib/dpkg/status",
    "/var/lib/dpkg/updates/0001", "/var/lib/apt/lock", "/var/lib/dpkg/lock.old",
    "/home/u/.cache/pip/.lock", "/x/target/debug/s-abc.lock", "/repo/.git/index.lock",
    "/home/u/.gradle/gradle.properties", "/home/u/cargo.lock", "lock", "",
])
def test_other_lock_files_are_not_anchors(path: str) -> None:
    assert anchor_tool(path) is None


# -- real holders on anchor paths -----------------------------------------------------------


@linux
@pytest.mark.parametrize(("holder", "rel", "tool"), [
    ("fasteners", "var/lib/dpkg/lock-frontend", "dpkg"),
    ("flock", ".cargo/.package-cache", "cargo"),
    ("portalocker", "cache/uv/.lock", "uv"),
])
def test_anchor_held_by_a_real_process_then_free_never_stale(
    tmp_path: Path, holders: list[Holder], holder: str, rel: str, tool: str
) -> None:
    path = _anchor(tmp_path, rel)
    h = Holder(holder, path)
    holders.append(h)
    st = inspect(str(path))
    assert st.state is State.HELD and _codes(st) == [Code.KERNEL_LOCK_HELD]
    assert st.kernel_pid == h.pid and st.evidence.pid == h.pid
    assert st.reasons[0].get("tool") == tool and (st.tool, st.kind) == (tool, "kernel")
    assert st.read_only
    h.end()
    _assert_free_anchor(inspect(str(path)), tool)
    _days_old(path)  # an old unheld anchor: still free, never "left by a crash"
    _assert_free_anchor(inspect(str(path)), tool)
    assert path.stat().st_size == 0


@linux
@pytest.mark.parametrize("holder", ["portalocker", "fasteners"])
def test_plain_files_locked_by_libraries_are_kernel_locks_then_gone(
    tmp_path: Path, holders: list[Holder], holder: str
) -> None:
    path = _anchor(tmp_path, "jobs/build.lock")
    h = Holder(holder, path)
    holders.append(h)
    st = inspect(str(path))
    assert st.state is State.HELD and st.kernel_pid == h.pid
    assert (st.tool, st.kind) == ("kernel", "kernel") and not st.read_only
    assert st.reasons[0].get("tool") is None
    h.end()
    _days_old(path)
    gone = inspect(str(path))
    assert not gone.kernel_held and gone.tool == "" and not gone.anchor_tool
    # what the library leaves behind is free: nobody holds it or has it open (DESIGN.md)
    assert gone.state is State.FREE and _codes(gone) == [Code.EMPTY_FREE] and gone.present


@pytest.mark.slow
@linux
def test_no_action_removes_a_free_anchor(tmp_path: Path, holders: list[Holder]) -> None:
    path = _anchor(tmp_path, "var/lib/dpkg/lock")
    h = Holder("fasteners", path)
    holders.append(h)
    h.end()
    _days_old(path)
    for attempt in (lambda: operations.force_release(str(path), reason="looks stale"),
                    lambda: operations.release_path(str(path), pid=h.pid, force=True),
                    lambda: reclaim(str(path), force=True, reason="looks stale"),
                    lambda: reclaim(str(path))):
        with pytest.raises(ReadOnlyLock) as err:
            attempt()
        assert err.value.kind is ReadOnlyKind.KERNEL_LOCK
        assert path.exists()
    with pytest.raises(LockError):  # not a lock to release on anyone's behalf
        operations.release_path(str(path), pid=h.pid)
    for args in (("release", "--force", "--reason", "stale?", str(path)),
                 ("reclaim", "--force", "--reason", "stale?", str(path)),
                 ("reclaim", str(path))):
        out = lw(*args)
        assert out.returncode != 0 and "dpkg's kernel-lock anchor" in one_line(out.stderr)
        assert path.exists()
    out = lw("clean", str(path.parent))
    assert out.returncode == 0 and path.exists() and path.stat().st_size == 0


@linux
def test_held_anchor_is_never_forced(tmp_path: Path, holders: list[Holder]) -> None:
    path = _anchor(tmp_path, "cache/uv/.lock")
    h = Holder("portalocker", path)
    holders.append(h)
    for attempt in (lambda: operations.force_release(str(path)),
                    lambda: reclaim(str(path), force=True, reason="hung")):
        with pytest.raises(ReadOnlyLock) as err:
            attempt()
        assert err.value.kind is ReadOnlyKind.KERNEL_LOCK
    assert path.exists() and inspect(str(path)).kernel_pid == h.pid


@linux
def test_list_and_status_json_name_the_free_anchor(tmp_path: Path) -> None:
    uv = tmp_path / "cache" / "uv"
    path = _anchor(tmp_path, "cache/uv/.lock")
    rows = json.loads(lw("list", str(uv), "--json").stdout)
    assert [r["path"] for r in rows] == [str(path)]
    (row,) = rows
    assert (row["state"], row["tool"], row["kind"], row["locked"]) == ("free", "uv", "kernel",
                                                                        False)
    assert [r["code"] for r in row["reasons"]] == ["kernel_anchor_free"]
    text = lw("status", str(path)).stdout
    assert "tool: uv" in text and "safe action: none: only the kernel knows" in text


def test_non_empty_file_at_an_anchor_path_is_judged_as_before(tmp_path: Path) -> None:
    path = _anchor(tmp_path, "var/lib/dpkg/lock")
    path.write_bytes(b"4242\n")  # a pidfile's content: read as what it says
    st = inspect(str(path))
    assert Code.KERNEL_ANCHOR_FREE not in _codes(st) and not st.anchor_tool
    assert st.record is not None and st.record.format == "pidfile"


def test_gradle_lock_with_its_information_region_is_an_anchor(
    tmp_path: Path, holders: list[Holder]
) -> None:
    """Gradle writes a binary information region (protocol byte, port, lock id, pid,
    operation) into its lock files: no format reads it, yet it is Gradle's anchor -- held while
    a real POSIX holder (fasteners) has it, free after, never 'unreadable', never deleted."""
    path = _anchor(tmp_path, ".gradle/caches/journal-1/journal-1.lock")
    path.write_bytes(b"\x03\x00\x00\xa4\x1f" + b"\x00" * 8 + b"\x00\x0512345\x00\x05build")
    h = Holder("fasteners", path)
    holders.append(h)
    st = inspect(str(path))
    assert st.state is State.HELD and st.kernel_pid == h.pid and st.tool == "gradle"
    h.end()
    st = inspect(str(path))
    assert st.state is State.FREE and _codes(st) == [Code.KERNEL_ANCHOR_FREE] and st.read_only
    with pytest.raises(ReadOnlyLock):
        operations.force_release(str(path), reason="looks stale")
    assert path.exists()


# -- default watches ------------------------------------------------------------------------


def test_default_watches_add_the_anchor_dirs_that_exist(tmp_path: Path) -> None:
    cargo = tmp_path / "cargo-home"
    uv = tmp_path / "caches" / "uv"
    cargo.mkdir()
    uv.mkdir(parents=True)
    env = {"HOME": str(tmp_path / "home"), "CARGO_HOME": str(cargo), "UV_CACHE_DIR": str(uv)}
    got = {w.path: w.patterns for w in default_anchor_watches(environ=env)}
    want: dict[str, list[str]] = {}
    for d, pats in (("/var/lib/dpkg", ["lock", "lock-frontend"]),
                    ("/var/cache/apt/archives", ["lock"]), ("/var/lib/apt/lists", ["lock"])):
        if sys.platform.startswith("linux") and os.path.isdir(d):
            want[d] = pats
    want[str(cargo)] = [".package-cache", ".package-cache-mutate"]
    want[str(uv)] = [".lock"]
    assert got == want
    assert all(not w.recursive for w in default_anchor_watches(environ=env))
    # every pattern names a file the recogniser knows: no unheld anchor is ever "stale"
    for d, pats in got.items():
        assert all(anchor_tool(os.path.join(d, p)) for p in pats)
    # HOME's ~/.cargo and ~/.cache/uv, only when they exist
    home = tmp_path / "home"
    assert [w.path for w in default_anchor_watches(environ={"HOME": str(home)})] == list(
        {d: 0 for d in want if d.startswith("/var/")})
    (home / ".cargo").mkdir(parents=True)
    (home / ".cache" / "uv").mkdir(parents=True)
    paths = [w.path for w in default_anchor_watches(environ={"HOME": str(home)})]
    assert paths[-2:] == [str(home / ".cargo"), str(home / ".cache" / "uv")]
    # a uv cache not named "uv" is not watched: its .lock would not be known as uv's
    other = tmp_path / "uvcache"
    other.mkdir()
    assert str(other) not in [w.path for w in default_anchor_watches(
        environ={"HOME": str(home), "UV_CACHE_DIR": str(other)})]
    # the whole default list: the lock directories first, then the anchors
    all_paths = [w.path for w in default_watches(environ=env)]
    assert all_paths[-len(got):] == list(got)


def test_default_anchor_watches_per_platform() -> None:
    env = {"HOME": "/home/u"}
    linux_paths = [w.path for w in default_anchor_watches(system="linux", environ=env)]
    assert linux_paths == ["/var/lib/dpkg", "/var/cache/apt/archives", "/var/lib/apt/lists",
                           "/home/u/.cargo", "/home/u/.cache/uv"]
    assert [w.path for w in default_anchor_watches(system="darwin", environ=env)] == [
        "/home/u/.cargo", "/home/u/.cache/uv"]
    assert default_anchor_watches(system="win32", environ={"USERPROFILE": r"C:\u"}) == []
    xdg = {"HOME": "/home/u", "XDG_CACHE_HOME": "/var/cache/u"}
    assert default_anchor_watches(system="linux", environ=xdg)[-1].path == "/var/cache/u/uv"


# -- the GUI --------------------------------------------------------------------------------


@linux
def test_gui_shows_a_free_anchor_as_free_with_no_destructive_action(
    make_app: Any, tmp_path: Path, holders: list[Holder], qtbot: Any
) -> None:
    from app.table.columns import Col
    from app.table.lockinfo import forceable, reclaimable

    uv = tmp_path / "cache" / "uv"
    path = _anchor(tmp_path, "cache/uv/.lock")
    h = Holder("portalocker", path)
    holders.append(h)
    lw_app = make_app([uv], tray=False)
    lw_app.start(show_window=True)
    m = lw_app.model
    qtbot.waitUntil(lambda: (st := m.status_of(str(path))) is not None and st.kernel_held,
                    timeout=10_000)
    h.end()  # the watcher's liveness pass sees the holder exit: the row turns free, stays
    qtbot.waitUntil(lambda: (st := m.status_of(str(path))) is not None
                    and st.state is State.FREE, timeout=10_000)
    st = m.status_of(str(path))
    assert st is not None
    _assert_free_anchor(st, "uv")
    row = m.row_of(str(path))
    assert row is not None
    assert m.data(m.index(row, Col.STATE)) == "free"
    assert m.data(m.index(row, Col.TOOL)) == "uv"
    assert m.data(m.index(row, Col.KIND)) == "kernel"
    assert not m.data(m.index(row, Col.AGE))  # no lock is held: the file's mtime is no age
    assert not reclaimable(st) and not forceable(st)
    counts = m.counts()
    assert counts[State.STALE] == counts[State.UNREADABLE] == counts[State.EXPIRED] == 0
    w = lw_app.window
    assert w.select_path(str(path))
    assert not w.act_force.isEnabled() and not w.act_reclaim.isEnabled()
    assert not w.act_release.isEnabled() and not w.act_end_holder.isEnabled()
    assert w.detail.values["Tool"].text() == "uv"
    assert w.detail.values["Kind"].text().startswith("kernel lock")
    assert w.detail.values["Safe action"].text().startswith("none: only the kernel knows")
    assert "kernel-lock anchor" in w.detail.values["State"].text()
    w.release_key()  # Del: says why not, never offers Force release for a kernel lock's file
    assert "never deletes it" in w.statusBar().currentMessage()
    assert path.exists()


@linux
def test_watcher_sees_a_free_anchor_taken_at_the_next_rescan(
    tmp_path: Path, holders: list[Holder]
) -> None:
    """Taking a kernel lock changes nothing of the file (no event, same lstat identity): the
    rescans re-read anchors, so the watcher sees the free anchor turn held, and its liveness
    pass sees it free again when the holder exits."""
    import threading

    from core.config.model import WatchSpec
    from core.watch.watcher import ChangeSet, Watcher

    uv = tmp_path / "cache" / "uv"
    path = _anchor(tmp_path, "cache/uv/.lock")
    seen: list[LockStatus] = []
    changed = threading.Condition()

    def on_change(cs: ChangeSet) -> None:
        with changed:
            seen.extend([*cs.added, *cs.changed])
            changed.notify_all()

    def wait_for(state: State) -> LockStatus:
        with changed:
            assert changed.wait_for(lambda: any(s.state is state for s in seen), timeout=15)
            return next(s for s in reversed(seen) if s.state is state)

    w = Watcher([WatchSpec(str(uv))], on_change=on_change, rescan_interval=0.2)
    w.start()
    try:
        (first,) = w.snapshot()
        _assert_free_anchor(first, "uv")
        h = Holder("flock", path)
        holders.append(h)
        held = wait_for(State.HELD)
        assert held.kernel_pid == h.pid and held.tool == "uv"
        seen.clear()
        h.end()
        _assert_free_anchor(wait_for(State.FREE), "uv")
    finally:
        w.close()
    assert path.exists()


def test_settings_round_trip_the_default_watches(qtbot: Any, tmp_path: Path) -> None:
    """Settings opened on the default configuration, every directory visited and OK'ed
    unchanged, gives the same configuration (so nothing is saved); saved, it loads back the
    same watches with their narrow patterns."""
    from dataclasses import replace

    from app.dialogs.settings import SettingsDialog
    from core import config as cfgmod
    from core.config.platform_defaults import default_config

    (tmp_path / ".cargo").mkdir()
    (tmp_path / ".cache" / "uv").mkdir(parents=True)
    watches = default_watches(environ={"HOME": str(tmp_path)})
    assert [w.patterns for w in watches[-2:]] == [[".package-cache", ".package-cache-mutate"],
                                                  [".lock"]]
    cfg = replace(default_config(), watches=watches, path=str(tmp_path / "config.toml"))
    dlg = SettingsDialog(cfg, autostart=False)
    qtbot.addWidget(dlg)
    for row in range(dlg.list.count()):
        dlg.list.setCurrentRow(row)
    assert replace(dlg.result_config(), warnings=[]) == replace(cfg, warnings=[])
    cfgmod.save(cfg, cfg.path)
    assert cfgmod.load(cfg.path).watches == cfg.watches


def test_liveness_pass_sees_a_kernel_lock_taken_without_any_rescan(
    tmp_path: Path, holders: list[Holder]
) -> None:
    """With rescans an hour apart, the liveness tick's one look at the kernel's locks sees a
    free anchor, and an old empty file judged free, turn held when a real process locks
    them (no event: the files do not change)."""
    import threading

    from core.config.model import WatchSpec
    from core.watch.watcher import ChangeSet, Watcher

    cargo = tmp_path / ".cargo"
    anchor = _anchor(tmp_path, ".cargo/.package-cache")
    plain = _anchor(tmp_path, ".cargo/job.lock")
    old = time.time() - 2 * 86400
    os.utime(plain, (old, old))
    model: dict[str, LockStatus] = {}
    changed = threading.Condition()

    def on_change(cs: ChangeSet) -> None:
        with changed:
            model.update({s.path: s for s in (*cs.added, *cs.changed)})
            changed.notify_all()

    def until(path: Path, state: State) -> LockStatus:
        with changed:
            assert changed.wait_for(lambda: str(path) in model
                                    and model[str(path)].state is state, timeout=15)
            return model[str(path)]

    w = Watcher([WatchSpec(str(cargo), patterns=[".package-cache", "*.lock"])],
                on_change=on_change, rescan_interval=3600, liveness_interval=0.2)
    w.start()
    try:
        model.update({s.path: s for s in w.snapshot()})
        assert model[str(anchor)].state is State.FREE
        assert model[str(plain)].state is State.FREE  # an old empty file nobody locks
        a, b = Holder("portalocker", anchor), Holder("flock", plain)
        holders.extend([a, b])
        assert until(anchor, State.HELD).kernel_pid == a.pid
        assert until(plain, State.HELD).kernel_pid == b.pid
    finally:
        w.close()
    assert anchor.exists() and plain.exists()


NO_PROC = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from core.verdicts.inspect import inspect
print(json.dumps([inspect(p).to_dict() for p in sys.argv[2:]]))
"""


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0,
                    reason="needs unshare(1) as root (a mount namespace without /proc)")
def test_without_proc_locks_a_flock_anchor_is_unchecked_never_free(
    tmp_path: Path, holders: list[Holder]
) -> None:
    """In a mount namespace whose /proc is an empty tmpfs, F_GETLK is all there is: it sees
    fasteners' POSIX lock (held, with its PID), but cannot see cargo's flock, so that anchor is
    'unchecked' (held, liveness unknown), never 'free'."""
    flocked = _anchor(tmp_path, ".cargo/.package-cache")
    posix = _anchor(tmp_path, "var/lib/dpkg/lock-frontend")
    a, b = Holder("flock", flocked), Holder("fasteners", posix)
    holders.extend([a, b])
    out = subprocess.run(
        ["unshare", "--mount", "sh", "-c", 'mount -t tmpfs none /proc && exec "$0" "$@"',
         sys.executable, "-c", NO_PROC, str(Path(__file__).resolve().parents[3]),
         str(flocked), str(posix)],
        capture_output=True, text=True, timeout=60)
    if out.returncode != 0 and "mount" in out.stderr:
        pytest.skip(f"cannot mount here: {out.stderr.strip()}")
    assert out.returncode == 0, out.stderr
    cargo, dpkg = json.loads(out.stdout)
    assert cargo["state"] == "held" and cargo["liveness"] == "unknown"
    assert [r["code"] for r in cargo["reasons"]] == ["kernel_anchor_unchecked"]
    assert dpkg["state"] == "held" and dpkg["reasons"][0]["code"] == "kernel_lock_held"
    assert dpkg["reasons"][0]["pid"] == b.pid and dpkg["tool"] == "dpkg"
