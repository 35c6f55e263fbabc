"""Settings never lose the user's configuration (docs/DESIGN.md, "Nothing lost"; docs/gui.md,
"Dialogs" and "Problems"): real configuration files in temp dirs, the real app offscreen.

- Tables added by hand while the app runs, comments and unknown keys survive Settings' OK.
- A file that does not parse is never overwritten: Settings say where (line, column), OK is
  off, Open file and Reload are offered; once fixed, OK edits it.
- A file changed on disk since Settings opened is merged, and a key both changed is named.
- Lock servers are added, edited and removed in Settings; no password goes in the file.
- The configuration's problems are in the Problems panel, the status line, the tray's count
  and on stderr, each whole.
"""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from core import config as cfgmod

WAIT_MS = 20_000


@pytest.fixture
def app_on(qtbot: Any, tmp_path: Path,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Any]]:
    """Factory: the app on a configuration file holding exactly ``text``."""
    from PySide6.QtWidgets import QApplication

    from app.application import LockwardenApp

    for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME"):
        monkeypatch.setenv(var, str(tmp_path / var.lower()))
    apps: list[Any] = []

    def make(text: str, *, tray: bool = False) -> Any:
        cfg = tmp_path / "cfg" / "config.toml"
        cfg.parent.mkdir(exist_ok=True)
        cfg.write_text(text)
        qapp = QApplication.instance()
        assert isinstance(qapp, QApplication)
        lw = LockwardenApp(qapp, config_path=str(cfg), use_tray=tray)
        apps.append(lw)
        return lw

    yield make
    for lw in apps:
        lw.finish_quit(release=True)
        lw.dispose()


def _settled(lw: Any, qtbot: Any) -> None:
    """Wait for the watcher that applying Settings started to have scanned (closing it in the
    middle of its start is another matter)."""
    if lw.inventory.watcher is not None:
        qtbot.waitUntil(lambda: lw.inventory.initial_done, timeout=WAIT_MS)


def _hand_written(lockdir: Path) -> str:
    return (f"# my settings, by hand\n[[watch]]\npath = \"{lockdir}\"  # the build locks\n"
            "stale_after = 600  # ten minutes\ncolour = \"blue\"\n\n[ui]\ntheme = \"light\"\n")


SERVERS = """
# added while the app ran (docs/remote.md)
[[postgres]]
dsn = "postgres://monitor@db.internal:5432/shop"
password_env = "LOCKWARDEN_PGPASS"

[[redis]]
url = "redis://cache.internal:6379/0"   # deploy locks
"""


def test_ok_keeps_tables_added_by_hand_and_comments(app_on: Any, lockdir: Path,
                                                     qtbot: Any) -> None:
    text = _hand_written(lockdir)
    lw = app_on(text)
    cfg = Path(lw.config_path)
    dlg = lw.ops.open_settings()
    with cfg.open("a") as f:  # the user follows docs/remote.md while the app runs
        f.write(SERVERS)
    dlg.stale.setValue(1200)
    dlg.on_acquire.setChecked(True)
    dlg.accept()
    assert dlg.result() == dlg.DialogCode.Accepted
    _settled(lw, qtbot)
    saved = cfg.read_text()
    assert saved.startswith(text.replace("stale_after = 600", "stale_after = 1200")
                            .split("[ui]")[0])
    assert SERVERS in saved and "colour = \"blue\"" in saved
    back = cfgmod.load(str(cfg))
    assert [s.kind for s in back.servers] == ["postgres", "redis"]
    assert back.notifications.on_acquire and back.watches[0].stale_after == 1200.0
    # the app runs on what the file holds now: its servers too
    assert [s.kind for s in lw.config.servers] == ["postgres", "redis"]
    assert lw.config.watches[0].stale_after == 1200.0


def test_a_file_that_does_not_parse_is_named_and_never_overwritten(
        app_on: Any, lockdir: Path, qtbot: Any, capfd: pytest.CaptureFixture[str]) -> None:
    broken = f'[[watch]]\npath = "{lockdir}"\nstale_after = 12 34\n'
    lw = app_on(broken, tray=True)
    cfg = Path(lw.config_path)
    err = capfd.readouterr().err
    assert "lockwarden: config: config.toml line 3, column 18: stale_after: invalid TOML" in err
    # the Problems panel lists it whole, the status line and the tray count it
    w = lw.window
    assert w.problems.isVisibleTo(w)
    (problem,) = w.problems.problems("configuration")
    assert "line 3, column 18" in problem and problem.endswith("(the file is left as it is)")
    assert w.status_line.config_button.text() == "⚠ 1 configuration problem"
    assert lw.tray is not None and "1 configuration problem" in lw.tray.problems_text()
    lw.tray.refresh()
    assert lw.tray.state == "problem"
    # Settings: where and what, OK off; OK does not write; Open file and Reload offered
    dlg = lw.ops.open_settings()
    assert dlg.problem_frame.isVisibleTo(dlg)
    assert "line 3, column 18" in dlg.problem_label.text()
    assert not dlg.ok_button.isEnabled()
    assert dlg.open_file.isVisibleTo(dlg) and dlg.reload.isVisibleTo(dlg)
    dlg.on_acquire.setChecked(True)
    dlg.accept()
    assert dlg.isVisible() and cfg.read_text() == broken
    # pausing notifications from the tray does not write either, and says why
    lw.tray.act_pause.setChecked(True)
    assert cfg.read_text() == broken
    # fixed by hand, Reload shows the file, OK edits it and the app applies it
    cfg.write_text(broken.replace("12 34", "1234"))
    dlg.reload_from_file()
    assert dlg.ok_button.isEnabled() and not dlg.problem_frame.isVisibleTo(dlg)
    assert [dlg.list.item(i).text() for i in range(dlg.list.count())] == [str(lockdir)]
    dlg.on_acquire.setChecked(True)
    dlg.accept()
    assert not dlg.isVisible()
    _settled(lw, qtbot)
    back = cfgmod.load(str(cfg))
    assert back.notifications.on_acquire and back.watches[0].stale_after == 1234.0
    assert lw.config.watches[0].path == str(lockdir) and lw.config.load_error is None
    assert w.problems.problems("configuration") == []
    assert not w.status_line.config_button.isVisibleTo(w)
    assert "configuration" not in lw.tray.problems_text()


def test_a_file_changed_on_disk_is_merged_or_the_conflict_named(
        app_on: Any, lockdir: Path, qtbot: Any) -> None:
    text = _hand_written(lockdir)
    lw = app_on(text)
    cfg = Path(lw.config_path)
    dlg = lw.ops.open_settings()
    theirs = text.replace("stale_after = 600", "stale_after = 30").replace(
        'theme = "light"', 'theme = "dark"')
    cfg.write_text(theirs)
    dlg.stale.setValue(1200)
    dlg.accept()
    assert dlg.isVisible() and cfg.read_text() == theirs  # nothing written, nothing closed
    label = dlg.problem_label.text()
    assert "stale_after: the file now says 30; yours says 1200" in label
    assert dlg.use_mine.isVisibleTo(dlg)
    dlg.use_mine.click()
    assert not dlg.isVisible()
    _settled(lw, qtbot)
    back = cfgmod.load(str(cfg))
    assert back.watches[0].stale_after == 1200.0 and back.ui.theme == "dark"  # both kept


def test_lock_servers_are_added_edited_and_removed(app_on: Any, lockdir: Path) -> None:
    lw = app_on(_hand_written(lockdir) + SERVERS)
    cfg = Path(lw.config_path)
    dlg = lw.ops.open_settings()
    group = dlg.servers
    assert group.list.count() == 2
    # add: a URL holding a password is refused, the editor stays open and says why
    editor = group.add_server()
    editor.kind.setCurrentIndex(editor.kind.findData("redis"))
    editor.url.setText("redis://:hunter2@cache2.internal:6379/0")
    editor.accept()
    assert editor.isVisible() and "never go in the configuration file" in editor.error
    editor.url.setText("redis://cache2.internal:6379/0")
    editor.password.setCurrentIndex(editor.password.findData("env"))
    editor.password_env.setText("LOCKWARDEN_REDIS2_PASSWORD")
    editor.accept()
    assert not editor.isVisible() and group.list.count() == 3
    # edit the PostgreSQL table: its stale limit; remove the first Redis
    group.list.setCurrentRow(0)
    editor = group.edit_current()
    assert editor is not None and editor.url.text().startswith("postgres://monitor@")
    editor.stale.setValue(120)
    editor.accept()
    group.list.setCurrentRow(1)
    group.remove_current()
    assert [group.list.item(i).text() for i in range(group.list.count())] == [
        "postgres: postgres://monitor@db.internal:5432/shop",
        "redis: redis://cache2.internal:6379/0"]
    dlg.accept()
    saved = cfg.read_text()
    assert "hunter2" not in saved and "cache.internal" not in saved
    assert "# added while the app ran" in saved and 'password_env = "LOCKWARDEN_PGPASS"' in saved
    back = cfgmod.load(str(cfg))
    assert [(s.kind, s.url, s.password_env, s.stale_after) for s in back.servers] == [
        ("postgres", "postgres://monitor@db.internal:5432/shop", "LOCKWARDEN_PGPASS", 120.0),
        ("redis", "redis://cache2.internal:6379/0", "LOCKWARDEN_REDIS2_PASSWORD", 3600.0)]
    assert [w for w in back.warnings if "colour" not in w] == []  # the servers load clean


def test_config_warnings_are_listed_whole(app_on: Any, lockdir: Path,
                                          capfd: pytest.CaptureFixture[str]) -> None:
    long_key = "a_key_whose_name_is_long_enough_to_be_cut_in_any_status_line_" * 2
    lw = app_on(_hand_written(lockdir).replace('colour = "blue"', f"{long_key} = 1")
                + '\n[notifications]\non_stale = "sometimes"\n')
    problems = lw.window.problems.problems("configuration")
    assert len(problems) == 2
    assert any(p.endswith(f"{long_key}: unknown key; ignored") for p in problems)
    assert any("notifications.on_stale: must be true or false, not 'sometimes'; using true"
               in p for p in problems)
    err = capfd.readouterr().err
    assert all(f"lockwarden: config: {p}" in err for p in problems)
    assert lw.window.status_line.config_button.text() == "⚠ 2 configuration problems"
    # the problems are listed, the file was not touched: the app runs
    lw.start(show_window=True)
    lw.window.status_line.config_button.click()
    assert lw.window.problems.isVisible()


def test_readable_lock_files_is_a_checkbox_edited_into_the_file(app_on: Any, lockdir: Path,
                                                                 qtbot: Any) -> None:
    """The watched directory's policy "other users may read lock files written here"
    (docs/engine.md, "Who can read a lock file") is shown and edited in Settings: only that
    key is added to the hand-written file, and the app runs on it."""
    text = _hand_written(lockdir)
    lw = app_on(text)
    cfg = Path(lw.config_path)
    dlg = lw.ops.open_settings()
    assert not dlg.readable.isChecked()
    dlg.readable.setChecked(True)
    dlg.accept()
    _settled(lw, qtbot)
    saved = cfg.read_text()
    assert "readable_lock_files = true" in saved
    assert saved.replace("readable_lock_files = true\n", "").startswith(text.split("[ui]")[0])
    assert cfgmod.load(str(cfg)).watches[0].readable_lock_files
    assert lw.config.watches[0].readable_lock_files


def test_a_misspelled_table_is_listed_and_kept_by_settings(
        app_on: Any, lockdir: Path, qtbot: Any, capfd: pytest.CaptureFixture[str]) -> None:
    from core.config.problems import problem_line

    lw = app_on(_hand_written(lockdir) + f'\n[[wacth]]\npath = "{lockdir}"\n')
    problems = lw.window.problems.problems("configuration")
    assert any(p.endswith("line 10: unknown table `wacth` (ignored; did you mean `watch`?)")
               for p in problems)
    assert any(p.endswith("watch[1].colour: unknown key; ignored") for p in problems)
    err = capfd.readouterr().err
    assert all(problem_line(p) in err for p in problems)  # the words of the command line
    dlg = lw.ops.open_settings()
    dlg.stale.setValue(1200)
    dlg.accept()
    assert dlg.result() == dlg.DialogCode.Accepted
    _settled(lw, qtbot)
    saved = Path(lw.config_path).read_text()
    assert "stale_after = 1200" in saved
    assert f'[[wacth]]\npath = "{lockdir}"' in saved and 'colour = "blue"' in saved


def _clipped_labels(dlg: Any) -> list[str]:
    """The word-wrapped labels shown shorter than their text needs at their width."""
    from PySide6.QtWidgets import QLabel

    return [lab.text()[:40] for lab in dlg.findChildren(QLabel)
            if lab.isVisibleTo(dlg) and lab.wordWrap() and lab.text()
            and lab.height() < lab.heightForWidth(lab.width())]


def test_the_problem_bar_clips_nothing_and_ok_is_off_while_the_file_is_broken(
        app_on: Any, lockdir: Path, qtbot: Any) -> None:
    """The problem bar takes room from the rest of the dialog: on a screen too small for all
    of it the groups scroll, and no help text is cut (the Projects group's was). A file that
    broke while Settings were open turns OK off until it parses again."""
    broken = f'[[watch]]\npath = "{lockdir}"\nstale_after = 12 34\n'
    lw = app_on(broken)
    cfg = Path(lw.config_path)
    dlg = lw.ops.open_settings()
    qtbot.waitExposed(dlg)
    assert dlg.problem_frame.isVisible()
    screen = dlg.screen().availableGeometry()
    assert dlg.frameGeometry().height() <= screen.height()
    assert _clipped_labels(dlg) == []
    dlg.resize(dlg.width(), 560)  # a small screen (a 768-pixel one with a panel and a title)
    qtbot.waitUntil(lambda: dlg.height() <= 600, timeout=WAIT_MS)
    assert _clipped_labels(dlg) == []
    assert dlg.ok_button.isVisible() and dlg.buttons.geometry().bottom() <= dlg.height()
    assert dlg.ok_button.isVisible() and not dlg.ok_button.isEnabled()
    # fixed, Reload: OK on; then broken again on disk before OK: not saved, OK off
    cfg.write_text(broken.replace("12 34", "1234"))
    dlg.reload_from_file()
    assert dlg.ok_button.isEnabled()
    cfg.write_text(broken)
    dlg.on_acquire.setChecked(True)
    dlg.accept()
    assert dlg.isVisible() and "no longer parses" in dlg.problem_label.text()
    assert not dlg.ok_button.isEnabled() and cfg.read_text() == broken
    assert _clipped_labels(dlg) == []
    # fixed again by hand: OK comes back on by itself, with the edits kept
    cfg.write_text(broken.replace("12 34", "99"))
    qtbot.waitUntil(dlg.ok_button.isEnabled, timeout=WAIT_MS)
    assert dlg.on_acquire.isChecked()
    dlg.accept()
    assert not dlg.isVisible()
    _settled(lw, qtbot)
    assert cfgmod.load(str(cfg)).notifications.on_acquire
