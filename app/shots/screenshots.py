"""Render the README screenshots into ``resources/screenshots/`` (light and dark): the main
window with a realistic inventory (held, stale, expired, writing, unreadable, remote, read-only
ledger claim, a lock held by Lockwarden), the tray menu with a lock's submenu, the tray icons,
and the dialogs (acquire, force release, reclaim, settings, audit log).

Usage: ``python -m app.shots.screenshots [--out DIR]``. Without ``DISPLAY`` it starts its own Xvfb
and trayer (Debian packages ``xvfb``, ``trayer``) and runs itself inside them. The inventory is
fed through the same signal path the watcher uses
(:meth:`app.bridges.watch_bridge.WatchBridge.push`); the
audit log shown is a real one, written by real engine operations in a temporary directory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # Qt and core are imported where they are used (this runs before Xvfb)
    from PySide6.QtGui import QImage, QPixmap
    from PySide6.QtWidgets import QApplication

    from app.application import LockwardenApp
    from core.reasons import Reason
    from core.record import Liveness, LockRecord, LockStatus, State

OUT_DEFAULT = Path(__file__).resolve().parents[2] / "resources" / "screenshots"


def _run_in_xvfb(argv: list[str]) -> int:
    xvfb, trayer = shutil.which("Xvfb"), shutil.which("trayer")
    if not xvfb:
        print("screenshots: Xvfb is needed (Debian: xvfb)", file=sys.stderr)
        return 2
    n = next(n for n in range(150, 250) if not Path(f"/tmp/.X11-unix/X{n}").exists()
             and not Path(f"/tmp/.X{n}-lock").exists())
    display = f":{n}"
    procs = [subprocess.Popen([xvfb, display, "-screen", "0", "1440x900x24", "-nolisten", "tcp"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        deadline = time.monotonic() + 15
        while not Path(f"/tmp/.X11-unix/X{n}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        env = dict(os.environ, DISPLAY=display, QT_QPA_PLATFORM="xcb",
                   LOCKWARDEN_SHOTS_CHILD="1")
        if trayer:
            procs.append(subprocess.Popen(
                [trayer, "--edge", "top", "--align", "right", "--widthtype", "request",
                 "--height", "28", "--transparent", "false", "--tint", "0x303030"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        return subprocess.call([sys.executable, "-m", "app.shots.screenshots", *argv], env=env)
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()


class _Picture:
    """The helpers of :func:`inventory`: times ``s`` seconds before ``now``, records and
    statuses whose paths are under ``base``."""

    def __init__(self, base: str, now: datetime) -> None:
        self.base, self.now = base, now

    def ago(self, s: float) -> datetime:
        return (self.now - timedelta(seconds=s)).replace(microsecond=0)

    def rec(self, name: str, fmt: str, raw: str, **kw: Any) -> LockRecord:
        from core.record import LockRecord

        return LockRecord(path=f"{self.base}/{name}", format=fmt, raw=raw, **kw)

    def st(self, name: str, state: State, record: LockRecord | None, live: Liveness,
           reasons: list[Reason], **kw: Any) -> LockStatus:
        from core.record import LockStatus

        return LockStatus(path=f"{self.base}/{name}", state=state, liveness=live,
                          reasons=tuple(reasons),
                          record=record, checked_at=self.now, **kw)


def inventory(base: str, my_pid: int, my_host: str) -> list[LockStatus]:
    """A realistic set of :class:`LockStatus` under ``base`` (one of each state), checked now
    (UTC); ``my_pid``/``my_host`` stand for this process, so one lock reads as Lockwarden's."""
    pic = _Picture(base, datetime.now(UTC))
    return [*_app_locks(pic, my_pid, my_host), *_tool_locks(pic, my_host)]


def _app_locks(pic: _Picture, my_pid: int, my_host: str) -> list[LockStatus]:
    """The applications' lock files of :func:`inventory`: held, stale, expired, writing,
    unreadable, a read-only ledger claim, a lock held by Lockwarden, a remote host's."""
    from core.codes import Code as C
    from core.reasons import Reason
    from core.record import FileInfo, Liveness, State

    now, ago, rec, st = pic.now, pic.ago, pic.rec, pic.st
    nightly_at = ago(754)
    deploy_at = ago(8047)
    q_at = ago(431)
    mine_at = ago(95)
    return [
        st("build/nightly.lock", State.HELD,
           rec("build/nightly.lock", "sema",
               f"pid=48211\ntimestamp={int(nightly_at.timestamp())}\ntag=nightly build #1842\n",
               pid=48211, host=my_host, acquired_at=nightly_at, tag="nightly build #1842"),
           Liveness.ALIVE, [Reason.of(C.HOLDER_ALIVE, pid=48211, name="bash"),
                            Reason.of(C.HELD_FOR, age_s=754.0)]),
        st("deploy.lock", State.STALE,
           rec("deploy.lock", "sema",
               f"pid=39117\ntimestamp={int(deploy_at.timestamp())}\ntag=deploy web-3\n"
               f"host={my_host}\nstart=1763720000.51\ntoken=9f2c41d07be84a6e8d1c5f0a3b7e6d21\n",
               pid=39117, host=my_host, acquired_at=deploy_at, tag="deploy web-3",
               token="9f2c41d07be84a6e8d1c5f0a3b7e6d21", start=1763720000.51),
           Liveness.DEAD, [Reason.of(C.HOLDER_DEAD, pid=39117), Reason.of(C.OURS_HOLDER_DEAD)]),
        st("tasks/queue.lock", State.EXPIRED,
           rec("tasks/queue.lock", "task-mcp",
               '{"owner": "pid-7311@vm", "since": '
               f'{int(q_at.timestamp() * 1000)}, "ttl": 300, '
               '"metadata": {"task": "reindex", "process_id": 7311}}',
               holder="pid-7311@vm", pid=7311, acquired_at=q_at, ttl=300.0),
           Liveness.ALIVE, [Reason.of(C.HOLDER_ALIVE, pid=7311, name="node"),
                            Reason.of(C.EXPIRED, ago_s=131.0, ttl_s=300.0)]),
        st("incoming.lock", State.WRITING, None, Liveness.UNKNOWN,
           [Reason.of(C.WRITING, empty=True, age_s=0.8)],
           file=FileInfo(1, 1, 0, int((now.timestamp() - 0.8) * 1e9))),
        st("corrupt.lock", State.UNREADABLE, None, Liveness.UNKNOWN,
           [Reason.of(C.UNREADABLE, kind="parse", detail="binary data (NUL byte at offset 0)")],
           error="binary data (NUL byte at offset 0)",
           file=FileInfo(2, 1, 31, int((now.timestamp() - 3 * 86400) * 1e9))),
        st("proof/ledger/ledger.lock", State.HELD,
           rec("proof/ledger/ledger.lock", "af-ledger",
               '{"agent_id": "planner-agent", "acquired_at": "'
               f'{ago(42).isoformat().replace("+00:00", "Z")}"}}',
               holder="planner-agent", acquired_at=ago(42)),
           Liveness.UNKNOWN, [Reason.of(C.NO_PID),
                              Reason.of(C.YOUNGER_THAN_STALE_AFTER, age_s=42.0, limit_s=30.0,
                                   holder="unknown")]),
        st("proof/ledger#1.2.3", State.HELD,
           rec("proof/ledger#1.2.3", "af-claim", '{"type": "nodes_claimed", ...}',
               holder="prover-2", acquired_at=ago(300),
               expires_at=(now + timedelta(seconds=1260)).replace(microsecond=0)),
           Liveness.UNKNOWN, [Reason.of(C.NO_PID), Reason.of(C.EXPIRES_IN, left_s=1260.0),
                              Reason.of(C.AF_REAPS_CLAIMS)],
           read_only=True),
        st("maintenance.lock", State.HELD,
           rec("maintenance.lock", "sema",
               f"pid={my_pid}\ntimestamp={int(mine_at.timestamp())}\n"
               f"tag=manual maintenance\nhost={my_host}\nttl=600\n",
               pid=my_pid, host=my_host, acquired_at=mine_at, ttl=600.0,
               tag="manual maintenance", token="0c1d2e3f"),
           Liveness.ALIVE, [Reason.of(C.HOLDER_ALIVE, pid=my_pid, name="lockwarden"),
                            Reason.of(C.HELD_FOR, age_s=95.0),
                            Reason.of(C.EXPIRES_IN, left_s=505.0)]),
        st("daemon.pid", State.HELD,
           rec("daemon.pid", "pidfile", "812\n", pid=812),
           Liveness.ALIVE, [Reason.of(C.HOLDER_ALIVE, pid=812, name="syncd")],
           file=FileInfo(3, 1, 4, int((now.timestamp() - 3 * 86400 - 7200) * 1e9))),
        st("cache.lock", State.HELD,
           rec("cache.lock", "sema",
               f"pid=2231\ntimestamp={int(ago(180).timestamp())}\nhost=build-eu-2\n",
               pid=2231, host="build-eu-2", acquired_at=ago(180)),
           Liveness.REMOTE, [Reason.of(C.REMOTE_HOST, pid=2231, host="build-eu-2",
                                  this_host=my_host),
                             Reason.of(C.YOUNGER_THAN_STALE_AFTER, age_s=180.0, limit_s=3600.0,
                                  holder="unknown")]),
    ]


def _tool_locks(pic: _Picture, my_host: str) -> list[LockStatus]:
    """The developer tools' locks in a project folder, and kernel locks, of :func:`inventory`."""
    from core.codes import Code as C
    from core.reasons import Reason
    from core.record import FileInfo, Liveness, State

    base, now, ago, rec, st = pic.base, pic.now, pic.ago, pic.rec, pic.st
    return [
        st("src/shop/.git/index.lock", State.STALE,
           rec("src/shop/.git/index.lock", "git-lock", "DIRC...", acquired_at=ago(2600)),
           Liveness.DEAD, [Reason.of(C.NO_GIT_WORKER, repo=f"{base}/src/shop"),
                           Reason.of(C.GIT_REMOVE_LOCK)],
           file=FileInfo(4, 1, 1032, int((now.timestamp() - 2600) * 1e9))),
        st("src/shop/app/.views.py.swp", State.HELD,
           rec("src/shop/app/.views.py.swp", "vim-swap", "b0VIM 9.0", pid=52310,
               host=my_host, holder="dev", acquired_at=ago(1460),
               tag=f"{base}/src/shop/app/views.py"),
           Liveness.ALIVE, [Reason.of(C.HOLDER_ALIVE, pid=52310, name="vim"),
                            Reason.of(C.HELD_FOR, age_s=1460.0)],
           file=FileInfo(5, 1, 12288, int((now.timestamp() - 1460) * 1e9))),
        st("jobs/export.lock", State.HELD, None, Liveness.ALIVE,
           [Reason.of(C.KERNEL_LOCK_HELD, pid=61877, kind="FLOCK", access="WRITE",
                      file=f"{base}/jobs/export.lock")],
           file=FileInfo(6, 1, 0, int((now.timestamp() - 600) * 1e9))),
        st("cache/uv/.lock", State.FREE, None, Liveness.UNKNOWN,
           [Reason.of(C.KERNEL_ANCHOR_FREE, tool="uv", file=f"{base}/cache/uv/.lock")],
           file=FileInfo(7, 1, 0, int((now.timestamp() - 86400) * 1e9)), read_only=True),
    ]


def _save(pm: QPixmap | QImage, path: Path) -> None:
    """Save a QPixmap/QImage as a compact PNG (palette-quantised with Pillow when large)."""
    from PySide6.QtGui import QPixmap

    img = pm.toImage() if isinstance(pm, QPixmap) else pm
    # the stubs ask for bytes, the binding accepts only str here (PySide6 6.11)
    img.save(str(path), "PNG", 0)  # type: ignore[call-overload]
    if path.stat().st_size > 150_000:
        try:
            from PIL import Image

            with Image.open(path) as im:
                im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT,
                                           dither=Image.Dither.NONE).save(path, optimize=True)
        except ImportError:
            pass
    print(f"{path.name}: {path.stat().st_size // 1024} KiB")


def _spin(ms: int) -> None:
    """Run the Qt event loop for ``ms`` milliseconds."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    loop.exec()


def _real_audit_log(tmp: Path) -> Path:
    """A directory under ``tmp`` with a real audit log from real engine operations."""
    import core
    from core import audit

    audit.set_via("gui")
    real = tmp / "locks"
    real.mkdir()
    with core.Lock(str(real / "deploy.lock"), tag="deploy web-3"):
        pass
    lk = core.Lock(str(real / "nightly.lock"), tag="nightly build")
    lk.acquire()
    core.force_release(str(real / "nightly.lock"), reason="build agent hung since 02:00")
    with core.Lock(str(real / "maintenance.lock"), ttl=600):
        pass
    return real


def _app_with_inventory(qapp: QApplication, tmp: Path, base: str) -> LockwardenApp:
    """An app (with a tray) showing :func:`inventory` under ``base`` and three watched
    directories (events, polling, missing); nothing is really watched."""
    from app.application import LockwardenApp
    from core import config as cfgmod
    from core.watch.watcher import DirStatus

    cfg_path = tmp / "cfg" / "config.toml"
    watches = [cfgmod.WatchSpec(path=base, recursive=True),
               cfgmod.WatchSpec(path="/mnt/shared/locks", polling="on"),
               cfgmod.WatchSpec(path="/var/lock/lockwarden")]
    cfgmod.save(cfgmod.Config(watches=watches), str(cfg_path))
    lw = LockwardenApp(qapp, config_path=str(cfg_path), use_tray=True)
    statuses = inventory(base, os.getpid(), lw.model.my_host)
    # the lock "held by me" is one the app itself holds in the picture
    lw.inventory.push_initial(statuses)
    lw.inventory.push_dirs([DirStatus(base, "events"),
                            DirStatus("/mnt/shared/locks", "polling", "nfs4: no events"),
                            DirStatus("/var/lock/lockwarden", "missing")])
    lw.inventory.flush()
    return lw


def _shoot_tray_menu(lw: LockwardenApp, out: Path, theme: str) -> None:
    """The tray menu with the stale lock's submenu open, grabbed from the screen."""
    from PySide6.QtCore import QPoint
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QMenu

    if lw.tray is None:
        return
    w = lw.window
    w.hide()
    _spin(150)
    lw.tray.rebuild_menu()
    menu = lw.tray.menu
    menu.popup(QPoint(700, 40))
    _spin(300)
    sub_action = next(a for a in menu.actions()
                      if a.menu() is not None and "deploy.lock" in a.text())
    menu.setActiveAction(sub_action)
    sub = sub_action.menu()
    assert isinstance(sub, QMenu)
    sub.popup(menu.geometry().topRight() + QPoint(0, menu.actionGeometry(sub_action).top()))
    _spin(300)
    g = menu.geometry().united(sub.geometry()).adjusted(-8, -8, 8, 8)
    screen = QGuiApplication.primaryScreen()
    shot = screen.grabWindow(0, g.x(), g.y(), g.width(), g.height())
    _save(shot, out / f"tray-menu-{theme}.png")
    sub.hide()
    menu.hide()
    w.show()
    _spin(200)


def _shoot_dialogs(lw: LockwardenApp, base: str, real: Path, out: Path, theme: str) -> None:
    """Each dialog with realistic fields: acquire, force release, reclaim, settings, audit."""
    ops = lw.ops
    dialogs: list[tuple[str, Any]] = [
        ("acquire", lambda: ops.open_acquire(base)),
        ("force-release", lambda: ops.open_force_release(f"{base}/build/nightly.lock")),
        ("reclaim", lambda: ops.open_reclaim(f"{base}/deploy.lock")),
        ("settings", ops.open_settings),
        ("audit", ops.open_audit),
    ]
    for name, opener in dialogs:
        dlg = opener()
        if name == "acquire":
            dlg.name.setText("maintenance.lock")
            dlg.tag.setText("manual maintenance")
            dlg.ttl.setValue(600)
        if name == "force-release":
            dlg.reason.setText("job hung since 02:00, checked with the on-call")
        if name == "settings":
            dlg.projects.add_project("~/src")
        if name == "audit":
            dlg.sources = [str(real / ".lock_audit.log")]
            dlg.reload()
            while not dlg.ready:
                _spin(20)
            dlg.table.selectRow(2)  # the Entry pane shows one entry whole
        _spin(300)
        _save(dlg.grab(), out / f"dialog-{name}-{theme}.png")
        dlg.reject()
        _spin(50)


def _shoot_tray_icons(out: Path) -> None:
    """The tray icons per state (and stale with a badge), on a light and a dark panel."""
    from PySide6.QtGui import QColor, QPainter, QPixmap

    from app.style.icons import TRAY_STATES, tray_pixmap

    size, pad = 48, 12
    strip = QPixmap((size + pad) * 5 + pad, (size + pad) * 2 + pad)
    strip.fill(QColor(0, 0, 0, 0))
    p = QPainter(strip)
    for row, bg in enumerate(("#ececec", "#2b2b2b")):
        p.fillRect(0, row * (size + pad), strip.width(), size + 2 * pad, QColor(bg))
        states = [(s, 0) for s in TRAY_STATES] + [("stale", 3)]
        for i, (state, badge) in enumerate(states):
            p.drawPixmap(pad + i * (size + pad), pad + row * (size + pad),
                         tray_pixmap(state, badge, size))
    p.end()
    _save(strip, out / "tray-icons.png")


def shoot(out: Path) -> int:
    """Render every screenshot into ``out`` (inside an X server)."""
    from PySide6.QtWidgets import QApplication

    from app.style.theme import apply_theme

    os.environ.setdefault("LOCKWARDEN_NO_WATCH", "1")
    qapp = QApplication([sys.argv[0]])
    qapp.setApplicationName("Lockwarden")
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="lockwarden-shots-"))
    try:
        real = _real_audit_log(tmp)
        base = "/srv/ci/locks"
        lw = _app_with_inventory(qapp, tmp, base)
        w = lw.window
        w.resize(1180, 720)
        if lw.tray is not None:
            lw.tray.show()
        w.show()
        _spin(300)
        w.select_path(f"{base}/deploy.lock")
        _spin(200)
        for theme in ("light", "dark"):
            apply_theme(qapp, theme)
            _spin(300)
            w.select_path(f"{base}/deploy.lock")
            _spin(150)
            _save(w.grab(), out / f"main-{theme}.png")
            _shoot_tray_menu(lw, out, theme)
            _shoot_dialogs(lw, base, real, out, theme)
        _shoot_tray_icons(out)
        lw.finish_quit(release=False)
        lw.dispose()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse ``--out`` and render; starts Xvfb + trayer when there is no X display."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="python -m app.shots.screenshots")
    ap.add_argument("--out", type=Path, default=OUT_DEFAULT)
    args = ap.parse_args(args_list)
    if not os.environ.get("LOCKWARDEN_SHOTS_CHILD"):
        return _run_in_xvfb(args_list)
    return shoot(args.out)


if __name__ == "__main__":
    sys.exit(main())
