"""The "Projects" group of the Settings dialog (docs/watching.md, "Projects"): the folders of
repositories searched for developer tools' locks (``[[projects]]``), with **Add project…**
(a folder picker), **Remove**, and, when none is configured, a one-click offer of the folder
where this user keeps repositories (:func:`core.config.project_roots.suggest_roots`)."""

from __future__ import annotations

import os

from PySide6.QtWidgets import (
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from core.config.model import PROJECT_SKIP_DIRS, ProjectSpec
from core.text import printable

EXPLAIN = ("Repositories in these folders are searched for git, Vim, Emacs, LibreOffice and "
           "Terraform locks, sub-folders included; node_modules, .venv, target, build outputs "
           "and caches are skipped.")


class ProjectsGroup(QGroupBox):
    """The configured project roots; :attr:`projects` is the edited list.

    Args:
        projects: the ``[[projects]]`` of the configuration (copied).
        suggestions: folders to offer when the list is empty (default:
            :func:`core.config.project_roots.suggest_roots`); the first is offered as a button.
    """

    def __init__(self, projects: list[ProjectSpec], *, suggestions: list[str] | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__("Projects", parent)
        self.projects = list(projects)
        if suggestions is None:
            from core.config.project_roots import suggest_roots

            suggestions = suggest_roots(exclude=[p.expanded_path for p in self.projects])
        self.list = QListWidget()
        self.list.setAccessibleName("Project folders")
        self.list.setToolTip("Skipped folders: " + ", ".join(PROJECT_SKIP_DIRS))
        explain = QLabel(EXPLAIN)
        explain.setWordWrap(True)
        self.add = QPushButton("Add project…")
        self.add.setToolTip("Choose a folder of repositories to search for developer tools' "
                            "locks")
        self.add.clicked.connect(self._browse)
        self.remove = QPushButton("Remove")
        self.remove.setAccessibleName("Remove project folder")
        self.remove.clicked.connect(self.remove_current)
        self.suggest = QPushButton()
        self._suggestion = suggestions[0] if suggestions else ""
        self.suggest.setText(f"Add {self._pretty(self._suggestion)}")
        self.suggest.setToolTip(f"{self._suggestion} holds git repositories")
        self.suggest.clicked.connect(lambda: self.add_project(self._suggestion))
        row = QHBoxLayout()
        row.addWidget(self.add)
        row.addWidget(self.remove)
        row.addWidget(self.suggest)
        row.addStretch(1)
        lay = QVBoxLayout(self)
        lay.addWidget(explain)
        lay.addWidget(self.list)
        lay.addLayout(row)
        self._refresh()

    @staticmethod
    def _pretty(path: str) -> str:
        home = os.path.expanduser("~")
        if path == home or path.startswith(home + os.sep):
            return "~" + path[len(home):]
        return path

    def _refresh(self) -> None:
        self.list.clear()
        self.list.addItems([printable(self._pretty(p.path)) for p in self.projects])
        self.remove.setEnabled(bool(self.projects))
        self.suggest.setVisible(bool(self._suggestion) and not any(
            p.expanded_path == self._suggestion for p in self.projects))
        self.list.setMaximumHeight(max(48, 22 * min(len(self.projects) + 1, 4)))

    def _browse(self) -> None:
        d = QFileDialog.getExistingDirectory(self, "Add a folder of repositories",
                                             os.path.expanduser("~"))
        if d:
            self.add_project(d)

    def add_project(self, path: str) -> None:
        """Add ``path`` as a project root with the default skip list (once)."""
        path = os.path.normpath(os.path.abspath(os.path.expanduser(path)))
        if path and not any(p.expanded_path == path for p in self.projects):
            self.projects.append(ProjectSpec(path))
        self._refresh()
        self.list.setCurrentRow(len(self.projects) - 1)

    def set_projects(self, projects: list[ProjectSpec]) -> None:
        """Show ``projects`` instead (Settings' Reload)."""
        self.projects = list(projects)
        self._refresh()

    def remove_current(self) -> None:
        """Remove the selected project root."""
        row = self.list.currentRow()
        if 0 <= row < len(self.projects):
            del self.projects[row]
            self._refresh()
