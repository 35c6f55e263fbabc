"""The "Lock servers" group of the Settings dialog (docs/remote.md, "In the app"): the
``[[postgres]]``, ``[[redis]]`` and ``[[etcd]]`` servers of the configuration, with **Add…**,
**Edit…** and **Remove** (:class:`ServerEditor`), and **Test connection**, which lists the
selected server's locks once in a worker thread and says how it went (the number of locks, or
the error's kind and words: unreachable, wrong password, missing privilege, no driver).

Passwords never go in the file (docs/remote.md, "Configuration"): the editor refuses a URL that
holds one and offers an environment variable (``password_env``) or the OS keychain
(``keyring = true``) instead. The editor checks what it builds with the loader's own rules
(:func:`core.config.servers.parse_server`), so what Settings save loads back the same."""

from __future__ import annotations

import os
import threading
from urllib.parse import urlsplit

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.dialogs.duration import DurationSpinBox
from core.config.model import SERVER_KINDS, ServerSpec
from core.defaults import DEFAULT_STALE_AFTER
from core.text import printable

KIND_NAMES: dict[str, str] = {"postgres": "PostgreSQL", "redis": "Redis", "etcd": "etcd"}
"""The kinds as the editor names them."""

_URL_LABELS = {"postgres": "DSN:", "redis": "URL:", "etcd": "Endpoints:"}
_URL_HINTS = {
    "postgres": "postgres://monitor@db.internal:5432/shop",
    "redis": "redis://cache.internal:6379/0",
    "etcd": "http://etcd1:2379, http://etcd2:2379",
}
PASSWORD_CHOICES = ("none", "env", "keyring")
"""Where a server's password comes from: nowhere, an environment variable, the keychain."""


def server_label(spec: ServerSpec) -> str:
    """One line for a server table: its kind and URL (etcd: its endpoints)."""
    where = spec.url or ", ".join(spec.endpoints)
    return printable(f"{spec.kind}: {where}")


def check_connection(spec: ServerSpec) -> str:
    """List ``spec``'s locks once and say how it went, in one line (blocks on the network).
    Never raises."""
    from core.remote.base import RemoteError
    from core.remote.sources import source_from_spec

    try:
        source, problem = source_from_spec(spec)
    except (RemoteError, ValueError) as exc:
        return f"not usable: {exc}"
    try:
        locks = source.list_locks()
    except RemoteError as exc:
        return f"failed ({exc.kind.value}): {exc}" + (f"; {problem}" if problem else "")
    except Exception as exc:  # a driver's own error: said, never raised
        return f"failed: {str(exc) or type(exc).__name__}"  # the words, not the class
    finally:
        source.close()
    n = len(locks)
    return f"connected: {n} lock{'' if n == 1 else 's'}" + (f"; {problem}" if problem else "")


class _Collect:
    """Collects the loader's problems with one table (:class:`core.config.servers.Problems`)."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def add(self, key: str, message: str, *, section: tuple[str, int] | None, name: str,
            fallback: str | None) -> None:
        self.problems.append(f"{name}: {message}")


class ServerEditor(QDialog):
    """Add or edit one lock server: kind, URL (etcd: endpoints), etcd's prefix and user,
    Redis's libraries, key patterns and change feed, where the password comes from, stale
    limit.

    Args:
        spec: the server to edit, or None to add one.
        parent: Qt parent.

    Attributes:
        spec: after OK, the server (an edited one keeps its ``table_index``: the same table of
            the file is edited).
        error: the error line's text ("" when none).
    """

    def __init__(self, spec: ServerSpec | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Edit lock server" if spec else "Add lock server")
        self.original = spec
        self.spec: ServerSpec | None = None
        self.error = ""
        self.kind = QComboBox()
        self.kind.setAccessibleName("Server kind")
        for kind in SERVER_KINDS:
            self.kind.addItem(KIND_NAMES[kind], kind)
        self.url = QLineEdit()
        self.url.setAccessibleName("Server address")
        self.url_label = QLabel("URL:")
        self.url_label.setBuddy(self.url)
        self.prefix = QLineEdit()
        self.prefix.setPlaceholderText("locks/  (empty: the whole keyspace)")
        self.username = QLineEdit()
        self.profile_prl = QCheckBox("python-redis-lock")
        self.profile_rp = QCheckBox("redis-py (needs key patterns)")
        self.patterns = QLineEdit()
        self.patterns.setPlaceholderText("deploy:*, build:*")
        self.patterns.setToolTip("SCAN patterns of redis-py's keys (it writes no prefix), "
                                 "separated by commas")
        self.feed = QCheckBox("Follow keyspace notifications (turns them on: a server-wide "
                              "change that needs CONFIG rights)")
        self.password = QComboBox()
        self.password.setAccessibleName("Password source")
        self.password.setToolTip("Passwords never go in the configuration file. PostgreSQL "
                                 "without one also tries libpq's PGPASSWORD and ~/.pgpass.")
        self.password.addItem("No password", "none")
        self.password.addItem("From an environment variable", "env")
        self.password.addItem("From the OS keychain (keyring)", "keyring")
        self.password_env = QLineEdit()
        self.password_env.setAccessibleName("Password variable")
        self.password_env.setPlaceholderText("LOCKWARDEN_PG_PASSWORD")
        self.password_hint = QLabel()
        self.password_hint.setWordWrap(True)
        self.stale = DurationSpinBox()
        self.stale.setRange(1, 30 * 24 * 3600)
        self.stale.setDecimals(3)
        self.stale.setValue(DEFAULT_STALE_AFTER)
        self.error_label = QLabel()
        self.error_label.setWordWrap(True)
        self.error_label.setTextFormat(Qt.TextFormat.PlainText)
        self.error_label.setAccessibleName("Server problem")
        self.error_label.setStyleSheet("color: #d23c3c;")
        self.error_label.hide()
        form = QFormLayout()
        form.addRow("&Kind:", self.kind)
        form.addRow(self.url_label, self.url)
        self._etcd_rows = [("Key &prefix:", self.prefix), ("&User:", self.username)]
        self._redis_rows = [("Libraries:", self.profile_prl), ("", self.profile_rp),
                            ("Key &patterns:", self.patterns), ("", self.feed)]
        for label, w in (*self._etcd_rows, *self._redis_rows):
            form.addRow(label, w)
        form.addRow("Pass&word:", self.password)
        form.addRow("&Variable:", self.password_env)
        form.addRow("", self.password_hint)
        form.addRow("&Stale after:", self.stale)
        self._form = form
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addWidget(self.error_label)
        lay.addWidget(buttons)
        self.kind.currentIndexChanged.connect(self._kind_changed)
        self.password.currentIndexChanged.connect(self._password_changed)
        self.password_env.textChanged.connect(self._password_changed)
        self._fill(spec)

    def _fill(self, spec: ServerSpec | None) -> None:
        kind = spec.kind if spec else "postgres"
        self.kind.setCurrentIndex(SERVER_KINDS.index(kind))
        self._kind_changed()
        if spec is None:
            self.profile_prl.setChecked(True)
            self._password_changed()
            return
        self.url.setText(", ".join(spec.endpoints) if kind == "etcd" else spec.url)
        self.prefix.setText(spec.prefix)
        self.username.setText(spec.username or "")
        self.profile_prl.setChecked("python-redis-lock" in spec.profiles)
        self.profile_rp.setChecked("redis-py" in spec.profiles)
        self.patterns.setText(", ".join(spec.patterns))
        self.feed.setChecked(spec.notifications)
        source = "env" if spec.password_env else "keyring" if spec.keyring else "none"
        self.password.setCurrentIndex(PASSWORD_CHOICES.index(source))
        self.password_env.setText(spec.password_env or "")
        self.stale.setValue(spec.stale_after)
        self._password_changed()

    def _kind_changed(self) -> None:
        kind = self.current_kind()
        self.url_label.setText(_URL_LABELS[kind])
        self.url.setPlaceholderText(_URL_HINTS[kind])
        for rows, on in ((self._etcd_rows, kind == "etcd"), (self._redis_rows, kind == "redis")):
            for _label, w in rows:
                self._form.setRowVisible(w, on)

    def _password_changed(self) -> None:
        source = self.password.currentData()
        self._form.setRowVisible(self.password_env, source == "env")
        name = self.password_env.text().strip()
        if source == "env" and name:
            self.password_hint.setText(
                f"{name} is set in Lockwarden's environment." if os.environ.get(name) else
                f"{name} is not set in Lockwarden's environment: set it where Lockwarden "
                "starts (a login session variable), else the server is asked without one.")
        elif source == "keyring":
            self.password_hint.setText(
                "Store it with: keyring set lockwarden " + (self.url.text().split(",")[0].strip()
                                                             or "URL"))
        else:
            self.password_hint.setText("")
        self._form.setRowVisible(self.password_hint, bool(self.password_hint.text()))

    def current_kind(self) -> str:
        """The kind chosen (``postgres``, ``redis``, ``etcd``)."""
        kind = self.kind.currentData()
        return kind if isinstance(kind, str) else "postgres"

    def table(self) -> dict[str, object]:
        """The TOML table the fields describe (what the loader would read)."""
        kind = self.current_kind()
        text = self.url.text().strip()
        out: dict[str, object] = {}
        if kind == "postgres":
            out["dsn"] = text
        elif kind == "redis":
            out["url"] = text
            out["profiles"] = [name for box, name in ((self.profile_prl, "python-redis-lock"),
                                                       (self.profile_rp, "redis-py"))
                               if box.isChecked()]
            out["patterns"] = [p.strip() for p in self.patterns.text().split(",") if p.strip()]
            out["notifications"] = self.feed.isChecked()
        else:
            out["endpoints"] = [e.strip() for e in text.split(",") if e.strip()]
            out["prefix"] = self.prefix.text()
            if self.username.text().strip():
                out["username"] = self.username.text().strip()
        source = self.password.currentData()
        if source == "env":
            out["password_env"] = self.password_env.text().strip()
        elif source == "keyring":
            out["keyring"] = True
        out["stale_after"] = float(self.stale.value())
        return out

    def build(self) -> tuple[ServerSpec | None, list[str]]:
        """The server the fields describe and the problems with it, checked as the loader
        checks a table (:func:`core.config.servers.parse_server`)."""
        from core.config.servers import parse_server

        kind = self.current_kind()
        table = self.table()
        addresses = table.get("endpoints") if kind == "etcd" else [
            table.get("dsn" if kind == "postgres" else "url")]
        first = addresses[0] if isinstance(addresses, list) and addresses else ""
        problems = _Collect()
        if isinstance(first, str) and first:
            try:
                has_password = urlsplit(first if "://" in first else "http://" + first
                                        ).password is not None
            except ValueError:
                has_password = False
            if has_password:
                return None, ["The address holds a password. Passwords never go in the "
                              "configuration file: remove it from the address and choose "
                              "an environment variable or the OS keychain below."]
        if self.password.currentData() == "env" and not self.password_env.text().strip():
            problems.problems.append("password_env: name the environment variable")
        if kind == "redis" and not table["profiles"]:
            problems.problems.append("profiles: choose at least one library")
        spec = parse_server(kind, table, 0, problems)
        if spec is not None and self.original is not None:
            spec.table_index = self.original.table_index
        return (spec if not problems.problems else None), problems.problems

    def accept(self) -> None:
        """OK: keep the server when the loader would take it; else say why and stay open."""
        spec, problems = self.build()
        if spec is None:
            self.error = "\n".join(problems) or "This server cannot be used."
            self.error_label.setText(self.error)
            self.error_label.show()
            return
        self.spec = spec
        self.error = ""
        super().accept()


class ServersGroup(QGroupBox):
    """The configured lock servers with Add…, Edit…, Remove and Test connection;
    :attr:`servers` is the edited list, :attr:`result` the last test's line (``tested(str)`` is
    emitted when it arrives), :attr:`editor` the server editor open now (if any)."""

    tested = Signal(str)

    def __init__(self, servers: list[ServerSpec], parent: QWidget | None = None) -> None:
        super().__init__("Lock servers", parent)
        self.servers = list(servers)
        self.editor: ServerEditor | None = None
        self.list = QListWidget()
        self.list.setAccessibleName("Lock servers")
        self.list.itemDoubleClicked.connect(lambda _item: self.edit_current())
        self.add = QPushButton("Add…")
        self.add.setToolTip("Add a PostgreSQL, Redis or etcd server whose locks to list")
        self.add.clicked.connect(self.add_server)
        self.edit = QPushButton("Edit…")
        self.edit.clicked.connect(self.edit_current)
        self.remove = QPushButton("Remove")
        self.remove.setAccessibleName("Remove lock server")
        self.remove.clicked.connect(self.remove_current)
        self.test = QPushButton("Test connection")
        self.test.clicked.connect(self.run_test)
        self.result = QLabel()
        self.result.setWordWrap(True)
        self.result.setAccessibleName("Connection test result")
        self.tested.connect(self._show)
        buttons = QHBoxLayout()
        for b in (self.add, self.edit, self.remove, self.test):
            buttons.addWidget(b)
        buttons.addStretch(1)
        lay = QVBoxLayout(self)
        lay.addWidget(self.list)
        lay.addLayout(buttons)
        lay.addWidget(self.result)
        self.list.setMaximumHeight(80)
        self._refresh()

    def set_servers(self, servers: list[ServerSpec]) -> None:
        """Show ``servers`` instead (Settings' Reload)."""
        self.servers = list(servers)
        self._refresh()

    def _refresh(self, select: int = 0) -> None:
        self.list.clear()
        self.list.addItems([server_label(s) for s in self.servers])
        has = bool(self.servers)
        for b in (self.edit, self.remove, self.test):
            b.setEnabled(has)
        self.result.setText("" if has else
                            "None configured: Add… a PostgreSQL, Redis or etcd server (its "
                            "password comes from an environment variable or the OS keychain, "
                            "never the configuration file).")
        if has:
            self.list.setCurrentRow(max(0, min(select, len(self.servers) - 1)))

    def _open(self, editor: ServerEditor, row: int | None) -> ServerEditor:
        self.editor = editor

        def done() -> None:
            spec = editor.spec
            if spec is None:
                return
            if row is None:
                self.servers.append(spec)
                self._refresh(len(self.servers) - 1)
            else:
                self.servers[row] = spec
                self._refresh(row)

        editor.accepted.connect(done)
        editor.finished.connect(lambda _r: setattr(self, "editor", None))
        editor.open()
        return editor

    def add_server(self) -> ServerEditor:
        """Open the editor for a new server; on OK it is added to the list."""
        return self._open(ServerEditor(None, self), None)

    def edit_current(self) -> ServerEditor | None:
        """Open the editor on the selected server; on OK it replaces it (same table)."""
        row = self.list.currentRow()
        if not 0 <= row < len(self.servers):
            return None
        return self._open(ServerEditor(self.servers[row], self), row)

    def remove_current(self) -> None:
        """Remove the selected server from the list (the file loses its table on OK)."""
        row = self.list.currentRow()
        if 0 <= row < len(self.servers):
            del self.servers[row]
            self._refresh(row)

    def run_test(self) -> None:
        """Test the selected server in a worker thread; the button waits meanwhile."""
        row = self.list.currentRow()
        if not 0 <= row < len(self.servers):
            return
        spec = self.servers[row]
        self.test.setEnabled(False)
        self.result.setText(f"testing {server_label(spec)}…")

        def work() -> None:
            line = check_connection(spec)
            try:
                self.tested.emit(line)
            except RuntimeError:  # the dialog was closed meanwhile
                pass

        threading.Thread(target=work, name="lockwarden-server-test", daemon=True).start()

    def _show(self, line: str) -> None:
        self.result.setText(printable(line))
        self.test.setEnabled(True)
