"""One instance per user and configuration (docs/gui.md "Start"), after qutebrowser's
``misc/ipc.py``: the first instance listens on a QLocalServer; a later launch connects, asks
it to show its window, and exits 0."""

from __future__ import annotations

import getpass
import hashlib

from PySide6.QtCore import QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

CONNECT_TIMEOUT_MS = 1000


def server_name(config_path: str) -> str:
    """Socket name for this user and configuration file (a hash keeps it short)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "user"
    digest = hashlib.sha256(config_path.encode("utf-8", "replace")).hexdigest()[:12]
    return f"lockwarden-{user}-{digest}"


class SingleInstance(QObject):
    """Single-instance guard. Signal ``activated`` fires in the first instance when a later
    launch asks it to show its window."""

    activated = Signal()

    def __init__(self, name: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.server: QLocalServer | None = None

    def notify_running(self) -> bool:
        """True when another instance answered (and was asked to show its window)."""
        sock = QLocalSocket()
        sock.connectToServer(self.name)
        if not sock.waitForConnected(CONNECT_TIMEOUT_MS):
            return False
        sock.write(b"show\n")
        sock.waitForBytesWritten(CONNECT_TIMEOUT_MS)
        sock.waitForReadyRead(CONNECT_TIMEOUT_MS)
        sock.disconnectFromServer()
        return True

    def acquire(self) -> bool:
        """Become the primary instance; False when another one runs (it was notified)."""
        if self.notify_running():
            return False
        server = QLocalServer(self)
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        if not server.listen(self.name):
            # a socket left by a crashed instance: nobody answered above, so remove it
            QLocalServer.removeServer(self.name)
            if not server.listen(self.name):
                return True  # run without the guard rather than not at all
        server.newConnection.connect(self._connection)
        self.server = server
        return True

    def _connection(self) -> None:
        # The client writes "show" right after connecting, so a short blocking read is
        # enough; no per-socket closures outlive the call.
        assert self.server is not None
        while self.server.hasPendingConnections():
            sock = self.server.nextPendingConnection()
            if sock is None:
                break
            if sock.bytesAvailable() or sock.waitForReadyRead(CONNECT_TIMEOUT_MS):
                data = bytes(sock.readAll().data())
                if b"show" in data:
                    sock.write(b"ok\n")
                    sock.flush()
                    sock.waitForBytesWritten(CONNECT_TIMEOUT_MS)
                    self.activated.emit()
            sock.disconnectFromServer()
            sock.deleteLater()

    def close(self) -> None:
        """Stop listening."""
        if self.server is not None:
            self.server.close()
            self.server = None
