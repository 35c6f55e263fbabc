"""Small lies and rough edges of the app, each as a user meets it (docs/gui.md "Window",
"Tray"): the detail pane follows a new acquisition at once; "Lost …" and the directory notices
show line breaks, never a literal ``\\n``; a watched directory moved away is one notice, not a
"released" per lock; "hidden by the filter" only when a filter hides it; plurals; no exception
class names in dialogs; Rule and Safe action never clipped; local times with UTC on hover; a
lock kept at quit is listed after a restart; one's own lock offers Release, never Reclaim or
Force release; the raw-file pane escapes U+202E and the other format characters. Real files,
real processes, real engine, real offscreen Qt."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import core
from app.table.detail import DetailPane
from core.stale_policy import StalePolicy
from core.verdicts.inspect import inspect
from tests.support.app_spies import SignalSpy
from tests.support.cli import ENV
from tests.support.clock import age_after_boot

TOKEN_A = "a" * 32
TOKEN_B = "b" * 32


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A live process of another program, to name as a lock's holder."""
    proc = subprocess.Popen(["sleep", "300"])
    yield proc
    proc.kill()
    proc.wait()


def _sema(path: Path, pid: int, token: str | None = None, *, tag: str = "nightly",
          at: int | None = None) -> None:
    """Write a sema lock of another tool atomically (temp file + rename, as a tool does)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(f"pid={pid}\ntimestamp={at or int(time.time())}\ntag={tag}\n"
                   + (f"token={token}\n" if token else ""))
    os.replace(tmp, path)


def _started(lw: Any, qtbot: Any, rows: int = 0) -> None:
    lw.start(show_window=True)
    qtbot.waitUntil(lambda: lw.inventory.initial_done and lw.model.rowCount() == rows,
                    timeout=15_000)


def test_the_detail_pane_follows_a_new_acquisition_at_once(
        make_app: Callable[..., Any], lockdir: Path, qtbot: Any,
        sleeper: subprocess.Popen[bytes]) -> None:
    """Same holder, same second, same tag: no table cell changes, the token does."""
    path = lockdir / "deploy.lock"
    now = int(time.time())
    _sema(path, sleeper.pid, TOKEN_A, at=now)
    lw = make_app([lockdir])
    _started(lw, qtbot, rows=1)
    assert lw.window.select_path(str(path))
    assert lw.window.detail.values["Token"].text() == TOKEN_A
    _sema(path, sleeper.pid, TOKEN_B, at=now)
    qtbot.waitUntil(lambda: (st := lw.model.status_of(str(path))) is not None
                    and st.record is not None and st.record.token == TOKEN_B, timeout=10_000)
    assert lw.window.detail.values["Token"].text() == TOKEN_B


def test_lost_shows_line_breaks_not_a_literal_backslash_n(
        make_app: Callable[..., Any], lockdir: Path, qtbot: Any) -> None:
    lw = make_app([lockdir], tray=True)
    _started(lw, qtbot)
    notes = SignalSpy(lw.tray.notified)
    path = str(lockdir / "my-task.lock")
    lw.actions.acquire(path)
    core.force_release(path, reason="test: someone else removes it")
    qtbot.waitUntil(lambda: "Lost my-task.lock" in notes.column(0), timeout=10_000)
    body = next(b for t, b, _ in notes.calls if t == "Lost my-task.lock")
    assert "\\n" not in body
    assert body.split("\n") == ["Someone removed this lock while Lockwarden held it.", path]


def test_a_watched_directory_moved_away_is_one_notice(
        make_app: Callable[..., Any], tmp_path: Path, qtbot: Any,
        sleeper: subprocess.Popen[bytes]) -> None:
    watched = tmp_path / "build"
    watched.mkdir()
    for name in ("f15c.lock", "a07e.lock"):
        _sema(watched / name, sleeper.pid)
    lw = make_app([watched], tray=True, on_release=True)
    _started(lw, qtbot, rows=2)
    notes = SignalSpy(lw.tray.notified)
    os.rename(watched, tmp_path / "build.old")
    qtbot.waitUntil(lambda: lw.model.rowCount() == 0, timeout=15_000)
    qtbot.waitUntil(lambda: bool(notes.calls), timeout=10_000)
    lw.inventory.flush()
    titles = notes.column(0)
    assert not [t for t in titles if "released" in t], titles
    assert titles == ["build is gone"]
    body = notes.calls[0][1]
    assert body.split("\n") == [
        "The watched directory was moved or removed: 2 locks there are no longer watched.",
        str(watched)]


def test_hidden_by_the_filter_only_when_a_filter_hides_it(
        make_app: Callable[..., Any], lockdir: Path, qtbot: Any,
        sleeper: subprocess.Popen[bytes]) -> None:
    path = lockdir / "x.lock"
    _sema(path, sleeper.pid)
    lw = make_app([lockdir])
    _started(lw, qtbot, rows=1)
    assert lw.window.select_path(str(path))
    st = lw.model.status_of(str(path))
    assert not lw.proxy.active
    # released, and taken again before the pane words why the selection went
    lw.model.apply([(str(path), None)])
    lw.model.apply([(str(path), st)])
    qtbot.waitUntil(lambda: "no longer in the list" in lw.window.detail.reasons.text(),
                    timeout=10_000)
    text = lw.window.detail.reasons.text()
    assert "filter" not in text and "it was released or removed" in text


def test_one_entry_is_one_entry(lockdir: Path, qtbot: Any) -> None:
    from app.dialogs import AuditDialog

    lock = core.Lock(str(lockdir / "once.lock"))
    lock.acquire(blocking=False)  # one audit entry: its acquire
    dlg = AuditDialog([str(lockdir)])
    qtbot.addWidget(dlg)
    qtbot.waitUntil(lambda: dlg.ready, timeout=10_000)
    text = dlg.verification.toPlainText()
    assert ": 1 entry, chain intact" in text and "entries" not in text
    out = subprocess.run([sys.executable, "-m", "core", "audit", "--verify", str(lockdir)],
                         capture_output=True, text=True, env=ENV, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert "(1 entry, 0 from other tools)" in out.stdout
    lock.release()


def test_dialogs_show_the_message_not_the_exception_class(
        make_app: Callable[..., Any], lockdir: Path, qtbot: Any) -> None:
    lw = make_app([lockdir])
    _started(lw, qtbot)
    errors = SignalSpy(lw.ops.errorShown)
    dlg = lw.ops.open_acquire(str(lockdir))
    dlg.tag.setText("x" * 5000)
    dlg.accept()
    qtbot.waitUntil(lambda: bool(errors.calls), timeout=10_000)
    (_title, text), = errors.calls
    assert "TagTooLong" not in text and "Error:" not in text
    assert "tag is 5000 bytes of UTF-8; Lockwarden writes tags of at most 4096 bytes" in text
    assert "TagTooLong" not in dlg.error.text()
    # a held lock's message keeps its own line breaks, never a literal \n
    held = str(lockdir / "held.lock")
    other = core.Lock(held, holder_pid=1)
    other.acquire(blocking=False)
    try:
        dlg.tag.setText("")
        dlg.name.setText("held.lock")
        dlg.accept()
        qtbot.waitUntil(lambda: len(errors.calls) == 2, timeout=10_000)
        assert "\\n" not in dlg.error.text() and "\n\n" in dlg.error.text()
    finally:
        other.release()


def test_rule_and_safe_action_wrap_instead_of_being_clipped(qtbot: Any) -> None:
    # a short directory, so that the Path line keeps to one line as in a typical setup (the
    # form layout's stale heights showed when only the Rule changed its number of lines)
    lockdir = Path(tempfile.mkdtemp(prefix="lw-"))
    short, long = lockdir / "short.lock", lockdir / "long.lock"
    short.write_text(f"pid={os.getpid()}\ntimestamp={int(time.time())}\ntag=nightly\n")
    # no such PID, 2 h old (less if this host booted since: an older lock would predate the
    # boot, with another Rule), twice the stale limit: stale, with a Rule that takes two lines
    # at this width
    age = age_after_boot(7200)
    long.write_text(f"pid=4000000\ntimestamp={int(time.time() - age) + 1}\ntag=nightly\n")
    policy = StalePolicy(stale_after=age / 2)
    clipped = []
    wrapped = False
    for width in (700, 800, 900, 1000, 1100):  # how the window and splitter are sized
        pane = DetailPane()
        qtbot.addWidget(pane)
        pane.resize(width, 300)
        pane.show()
        qtbot.waitExposed(pane)
        for step, path in enumerate([short, long, short, long]):  # as the user selects them
            pane.show_status(inspect(str(path), policy=policy))
            qtbot.wait(20)
            for name in ("Rule", "Safe action"):
                label = pane.values[name]
                need = label.heightForWidth(label.width())
                wrapped |= need > label.fontMetrics().height() + 1
                if label.height() < need:
                    clipped.append((width, step, name, label.height(), need))
        pane.close()
    shutil.rmtree(lockdir)
    assert wrapped  # the long Rule does need more than one line at some width
    assert clipped == []


def test_times_are_local_with_utc_on_hover(qtbot: Any, lockdir: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Asia/Kolkata")  # UTC+05:30, no daylight saving
    time.tzset()
    try:
        path = lockdir / "t.lock"
        at = 1_800_000_000  # 2027-01-15 08:00:00 UTC = 13:30:00 IST
        _sema(path, os.getpid(), at=at)
        pane = DetailPane()
        qtbot.addWidget(pane)
        pane.show_status(inspect(str(path)), age="3m")
        acquired = pane.values["Acquired"]
        assert acquired.text() == "2027-01-15 13:30:00 IST (3m ago)"
        assert acquired.toolTip() == "2027-01-15 08:00:00 UTC"
        # the audit viewer too
        from app.dialogs import AuditDialog

        lock = core.Lock(str(lockdir / "audited.lock"))
        lock.acquire(blocking=False)
        lock.release()
        dlg = AuditDialog([str(lockdir)])
        qtbot.addWidget(dlg)
        qtbot.waitUntil(lambda: dlg.ready and dlg.table.rowCount() == 2, timeout=10_000)
        cell, header = dlg.table.item(0, 0), dlg.table.horizontalHeaderItem(0)
        assert cell is not None and header is not None
        assert header.text() == "Time"
        assert cell.text().endswith(" IST") and cell.toolTip().endswith(" UTC")
        local = time.strptime(cell.text()[:19], "%Y-%m-%d %H:%M:%S")
        utc = time.strptime(cell.toolTip()[:19], "%Y-%m-%d %H:%M:%S")
        assert time.mktime(local) - time.mktime(utc) == 5.5 * 3600
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_a_lock_kept_at_quit_is_listed_after_a_restart(
        make_app: Callable[..., Any], tmp_path: Path, qtbot: Any) -> None:
    watched, elsewhere = tmp_path / "watched", tmp_path / "elsewhere"
    watched.mkdir()
    elsewhere.mkdir()
    path = str(elsewhere / "kept.lock")  # in no watched directory
    first = make_app([watched])
    _started(first, qtbot)
    first.actions.acquire(path)
    qtbot.waitUntil(lambda: first.model.status_of(path) is not None, timeout=10_000)
    first.finish_quit(release=False)  # "Keep"
    assert os.path.exists(path)
    second = make_app([watched])
    second.start(show_window=True)
    qtbot.waitUntil(lambda: second.model.status_of(path) is not None, timeout=10_000)
    # once it is gone it is forgotten: a third start does not list it
    core.force_release(path, reason="test: done with it")
    second.inventory.check_kept()
    qtbot.waitUntil(lambda: second.model.status_of(path) is None, timeout=10_000)
    assert path not in second.actions.kept_paths()


def test_ones_own_lock_offers_release_not_reclaim_or_force(
        make_app: Callable[..., Any], lockdir: Path, qtbot: Any) -> None:
    lw = make_app([lockdir], tray=True)
    _started(lw, qtbot)
    path = str(lockdir / "mine.lock")
    lw.actions.acquire(path, ttl=60.0)
    qtbot.waitUntil(lambda: lw.model.status_of(path) is not None, timeout=10_000)
    assert lw.window.select_path(path)
    w = lw.window
    assert w.act_release.isEnabled()
    assert not w.act_reclaim.isEnabled() and not w.act_force.isEnabled()
    lw.tray.rebuild_menu()
    sub = next(a.menu() for a in lw.tray.menu.actions()
               if a.menu() is not None and "mine.lock" in a.text())
    texts = [a.text() for a in sub.actions() if a.text()]
    assert "Release" in texts and "Reclaim" not in texts and "Force release…" not in texts
    # asked anyway (a shortcut, a stale menu): refused with what to do instead
    errors = SignalSpy(lw.ops.errorShown)
    assert lw.ops.open_force_release(path) is None
    assert lw.ops.open_reclaim(path) is None
    assert [t for t, _ in errors.calls] == ["Held by this Lockwarden"] * 2
    assert lw.actions.holds(path)


def test_the_raw_pane_escapes_format_characters(qtbot: Any, lockdir: Path) -> None:
    pane = DetailPane()
    qtbot.addWidget(pane)
    # a readable lock of another tool whose tag holds a bidi override and a zero width space
    path = lockdir / "evil.lock"
    path.write_text(f"pid={os.getpid()}\ntimestamp={int(time.time())}\n"
                    "tag=deploy \u202egnp.exe\u200b\n", encoding="utf-8")
    pane.show_status(inspect(str(path)))
    raw = pane.raw.toPlainText()
    assert "\u202e" not in raw and "\u200b" not in raw
    assert "tag=deploy \\u202egnp.exe\\u200b" in raw
    assert raw.count("\n") == 3  # its own line breaks stay line breaks
    # an unreadable file: its bytes, read in a worker thread, escaped the same way
    bad = lockdir / "bad.lock"
    bad.write_bytes("\u202e garbage \x00\xff\n\tnext".encode("utf-8", "surrogateescape")
                    .replace(b"\xc3\xbf", b"\xff"))
    old = time.time() - 60  # past the writing grace: unreadable, not being written
    os.utime(bad, (old, old))
    st = inspect(str(bad))
    assert st.record is None
    pane.show_status(st)
    qtbot.waitUntil(lambda: pane.raw.toPlainText() != "", timeout=10_000)
    raw = pane.raw.toPlainText()
    assert "\u202e" not in raw and raw == "\\u202e garbage \\x00\\xff\n\tnext"


def test_one_problem_does_not_take_half_the_window(make_app: Any, lockdir: Path,
                                                   qtbot: Any) -> None:
    # a new user's first TOML typo opened a Problems panel of ~190 px for one line, leaving
    # the table five rows: the panel opens as tall as its first few problems
    for i in range(8):
        (lockdir / f"l{i}.lock").write_text(f"pid={os.getpid()}\ntimestamp={int(time.time())}\n")
    lw = make_app([lockdir])
    lw.start(show_window=True)
    w = lw.window
    w.resize(1100, 680)
    qtbot.waitUntil(lambda: lw.model.rowCount() == 8, timeout=20_000)
    w.problems.set_config_problems(["config.toml line 3, column 17: stale_after: invalid TOML: "
                                    "Expected newline or end of document after a statement"])
    w.problems.reveal()
    qtbot.waitUntil(lambda: w.problems.isVisible() and w.problems.height() > 0, timeout=5_000)
    line = w.problems.list.fontMetrics().lineSpacing()
    assert w.problems.list.height() <= 6 * line, (w.problems.list.height(), line)
    assert w.table.height() > w.problems.height()
