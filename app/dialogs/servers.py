"""The "Lock servers" group of the Settings dialog (docs/remote.md, "In the app"): the
``[[postgres]]``, ``[[redis]]`` and ``[[etcd]]`` servers of the configuration, each with
**Test connection**, which lists its locks once in a worker thread and says how it went (the
number of locks, or the error's kind and words: unreachable, wrong password, missing privilege,
no driver). Servers are added in the configuration file (passwords from an environment
variable or the OS keychain, never the file)."""

from __future__ import annotations

import threading

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from core.config.model import ServerSpec
from core.reasons import printable


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


class ServersGroup(QGroupBox):
    """The configured lock servers with a Test connection button. :attr:`result` holds the
    last test's line (``tested(str)`` is emitted when it arrives)."""

    tested = Signal(str)

    def __init__(self, servers: list[ServerSpec], parent: QWidget | None = None) -> None:
        super().__init__("Lock servers", parent)
        self.servers = list(servers)
        self.list = QListWidget()
        self.list.setAccessibleName("Lock servers")
        self.list.addItems([server_label(s) for s in self.servers])
        self.test = QPushButton("Test connection")
        self.test.setEnabled(bool(self.servers))
        self.test.clicked.connect(self.run_test)
        self.result = QLabel("" if self.servers else
                             "None configured: add [[postgres]], [[redis]] or [[etcd]] tables "
                             "to the configuration file (docs/remote.md).")
        self.result.setWordWrap(True)
        self.result.setAccessibleName("Connection test result")
        self.tested.connect(self._show)
        row = QHBoxLayout()
        row.addWidget(self.test)
        row.addWidget(self.result, 1)
        lay = QVBoxLayout(self)
        lay.addWidget(self.list)
        lay.addLayout(row)
        if self.servers:
            self.list.setCurrentRow(0)
        self.list.setMaximumHeight(80)

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
