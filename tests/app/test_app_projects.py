"""Projects in the app: the Settings dialog offers the folder where the user keeps
repositories, adds and removes project folders (real clicks, offscreen Qt), and the app then
lists the git lock of a real repository in that folder -- without listing the dependency pins
or anything under node_modules -- and saves ``[[projects]]`` to the configuration file."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from core import config
from core.config.project_roots import suggest_roots

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def _repo(parent: Path) -> Path:
    repo = parent / "shop"
    repo.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "Cargo.lock").write_text("# pins\n")
    (repo / "node_modules" / "left-pad" / ".git").mkdir(parents=True)
    (repo / "node_modules" / "left-pad" / ".git" / "index.lock").write_bytes(b"")
    return repo


def test_suggested_roots_are_folders_holding_repositories(tmp_path: Path) -> None:
    _repo(tmp_path / "code" / "work")  # two levels down
    (tmp_path / "src").mkdir()  # no repository: not offered
    (tmp_path / "projects").symlink_to(tmp_path / "code")  # a link: never followed
    assert suggest_roots(str(tmp_path)) == [str(tmp_path / "code")]
    assert suggest_roots(str(tmp_path), exclude=[str(tmp_path / "code")]) == []


def test_settings_adds_a_project_and_the_app_lists_its_git_lock(
        make_app: Any, lockdir: Path, tmp_path: Path, qtbot: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from PySide6.QtTest import QTest

    from app.dialogs.projects import ProjectsGroup

    src = tmp_path / "home" / "src"
    repo = _repo(src)
    lock = repo / ".git" / "index.lock"
    lock.write_bytes(b"")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # where the dialog looks for repos
    lw = make_app([lockdir])
    lw.start(show_window=False)
    qtbot.waitUntil(lambda: lw.inventory.watcher is not None, timeout=20_000)
    dlg = lw.ops.open_settings()
    group = dlg.projects
    assert isinstance(group, ProjectsGroup)
    assert group.suggest.isVisibleTo(dlg) and group.suggest.text() == "Add ~/src"
    QTest.mouseClick(group.suggest, Qt.MouseButton.LeftButton)
    assert [p.path for p in group.projects] == [str(src)]
    assert not group.suggest.isVisibleTo(dlg) and group.list.count() == 1
    group.add_project(str(tmp_path / "other"))
    group.list.setCurrentRow(1)
    QTest.mouseClick(group.remove, Qt.MouseButton.LeftButton)
    assert [p.path for p in group.projects] == [str(src)]
    dlg.accept()
    qtbot.waitUntil(lambda: lw.model.status_of(str(lock)) is not None, timeout=20_000)
    st = lw.model.status_of(str(lock))
    assert st is not None and st.tool == "git"
    assert lw.model.status_of(str(repo / "Cargo.lock")) is None
    assert lw.model.status_of(
        str(repo / "node_modules" / "left-pad" / ".git" / "index.lock")) is None
    saved = config.load(lw.store.config.path)
    assert [p.path for p in saved.projects] == [str(src)]


def test_detail_pane_rule_names_the_developer_tools_rule(tmp_path: Path) -> None:
    import core
    from app.table.lockinfo import deciding_rule

    swap = tmp_path / ".notes.txt.swp"
    data = Path(__file__).parents[1] / "data"
    shutil.copy(data / "devtools" / "vim" / "dead-dirty.notes.txt.swp", swap)
    repo = _repo(tmp_path / "r")
    lock = repo / ".git" / "index.lock"
    lock.write_bytes(b"")
    rules = {deciding_rule(core.inspect(str(p))) for p in (swap, lock)}
    assert "" not in rules and len(rules) == 2
