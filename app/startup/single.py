"""One instance per user and configuration, after qutebrowser's ``misc/ipc.py``: the first
instance listens on a local socket; a later launch connects, asks it to show its window
("show"), and exits 0.

POSIX: a Unix-domain socket of Python's :mod:`socket`, watched by a ``QSocketNotifier``, so
QtNetwork is neither loaded by the app nor carried by the Linux bundle (docs/performance.md,
"Idle tray"; docs/packaging.md); Windows: a ``QLocalServer`` named pipe of this user. Where the
socket lives (this user's private runtime directory, used only when it is a real directory of
this user with mode 0700 whose parent is this user's or root's): docs/gui.md, "Start". When no
such directory can be had the app runs without the guard and says why
(:class:`InstanceLocationError`).
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import os
import socket
import stat
import sys
import time
import warnings
from typing import Any

from PySide6.QtCore import QObject, QSocketNotifier, Signal

CONNECT_TIMEOUT_MS = 1000


class InstanceLocationError(OSError):
    """No private directory for the single-instance socket: the message says which path and
    why (owned by another user, group/other access, a symlink...)."""


def private_dir() -> str:
    """This user's private runtime directory for Lockwarden (module docstring), created with
    mode 0700 when missing.

    Raises:
        InstanceLocationError: it cannot be created, or what is there is not a directory owned
            by this user with no group/other access, or its parent belongs to another user.
    """
    if sys.platform == "win32":  # pragma: no cover - a named pipe there (server_name)
        raise InstanceLocationError("no private runtime directory on Windows")
    import platformdirs

    with warnings.catch_warnings():  # "XDG_RUNTIME_DIR is not set": the fallback is checked
        warnings.simplefilter("ignore")
        path = platformdirs.user_runtime_dir("lockwarden")
    uid = os.geteuid()
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
        pst = os.lstat(os.path.dirname(path))
    except OSError as exc:
        raise InstanceLocationError(f"{path}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise InstanceLocationError(f"{path}: not a directory (a symbolic link or a file)")
    if st.st_uid != uid:
        raise InstanceLocationError(f"{path}: owned by UID {st.st_uid}, not this user")
    if pst.st_uid not in (uid, 0):
        raise InstanceLocationError(
            f"{os.path.dirname(path)}: owned by UID {pst.st_uid}, not this user")
    if stat.S_IMODE(st.st_mode) & 0o077:
        try:
            os.chmod(path, 0o700)
        except OSError as exc:
            raise InstanceLocationError(f"{path}: mode {stat.S_IMODE(st.st_mode):o} and "
                                        f"cannot be made private: {exc.strerror}") from None
    return path


def server_name(config_path: str) -> str:
    """The single-instance socket for this user and configuration file (a hash keeps the name
    short): a path in :func:`private_dir` on POSIX, a per-user pipe name on Windows.

    Raises:
        InstanceLocationError: (POSIX) no private directory for it.
    """
    digest = hashlib.sha256(config_path.encode("utf-8", "replace")).hexdigest()[:12]
    if sys.platform == "win32":
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "user"
        return f"lockwarden-{user}-{digest}"
    return os.path.join(private_dir(), f"gui-{digest}.sock")


class SingleInstance(QObject):
    """Single-instance guard. Signal ``activated`` fires in the first instance when a later
    launch asks it to show its window."""

    activated = Signal()

    def __init__(self, name: str, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.name = name
        self.server: Any = None  # a listening socket.socket (POSIX) or QLocalServer (Windows)
        self._notifier: QSocketNotifier | None = None

    def notify_running(self) -> bool:
        """True when another instance answered (and was asked to show its window)."""
        if sys.platform == "win32":
            return self._notify_running_pipe()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(CONNECT_TIMEOUT_MS / 1000)
                sock.connect(self.name)
                sock.sendall(b"show\n")
                with contextlib.suppress(OSError):
                    sock.recv(16)  # "ok": the first instance got it
        except OSError:
            return False  # nobody listens (no socket, or one left by a crashed instance)
        return True

    def acquire(self) -> bool:
        """Become the primary instance; False when another one runs (it was notified)."""
        if self.notify_running():
            return False
        if sys.platform == "win32":
            return self._listen_pipe()
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                server.bind(self.name)
            except OSError:
                # taken meanwhile by a launch at the same moment? then it answers now
                if self.notify_running():
                    server.close()
                    return False
                # a socket left by a crashed instance: nobody answers on it, so remove it
                with contextlib.suppress(OSError):
                    os.unlink(self.name)
                server.bind(self.name)
            with contextlib.suppress(OSError):
                os.chmod(self.name, 0o600)
            server.listen(8)
            server.setblocking(False)
        except OSError:
            server.close()
            return True  # run without the guard rather than not at all
        self.server = server
        self._notifier = QSocketNotifier(server.fileno(), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._connection)
        return True

    def _connection(self, *_args: object) -> None:
        # The client writes "show" right after connecting, so a short blocking read is
        # enough: at most CONNECT_TIMEOUT_MS for each connection, however slowly it sends.
        server = self.server
        if not isinstance(server, socket.socket):
            return
        while True:
            try:
                conn, _addr = server.accept()
            except OSError:  # BlockingIOError: no more pending connections
                return
            with conn:
                deadline = time.monotonic() + CONNECT_TIMEOUT_MS / 1000
                data = b""
                try:
                    while b"show" not in data and len(data) < 64:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        conn.settimeout(left)
                        chunk = conn.recv(64)
                        if not chunk:
                            break
                        data += chunk
                    if b"show" in data:
                        conn.sendall(b"ok\n")
                except OSError:
                    pass
            if b"show" in data:
                self.activated.emit()

    def close(self) -> None:
        """Stop listening (POSIX: the socket file is removed)."""
        if self._notifier is not None:
            self._notifier.setEnabled(False)
            self._notifier = None
        server, self.server = self.server, None
        if isinstance(server, socket.socket):
            server.close()
            with contextlib.suppress(OSError):
                os.unlink(self.name)
        elif server is not None:
            server.close()

    # -- Windows: a QLocalServer named pipe of this user --------------------------------------

    def _notify_running_pipe(self) -> bool:
        from PySide6.QtNetwork import QLocalSocket

        sock = QLocalSocket()
        sock.connectToServer(self.name)
        if not sock.waitForConnected(CONNECT_TIMEOUT_MS):
            return False
        sock.write(b"show\n")
        sock.waitForBytesWritten(CONNECT_TIMEOUT_MS)
        sock.waitForReadyRead(CONNECT_TIMEOUT_MS)
        sock.disconnectFromServer()
        return True

    def _listen_pipe(self) -> bool:
        from PySide6.QtNetwork import QLocalServer

        server = QLocalServer(self)
        server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        if not server.listen(self.name):
            if self._notify_running_pipe():
                return False
            QLocalServer.removeServer(self.name)
            if not server.listen(self.name):
                return True  # run without the guard rather than not at all
        server.newConnection.connect(self._pipe_connection)
        self.server = server
        return True

    def _pipe_connection(self) -> None:
        server = self.server
        while server is not None and server.hasPendingConnections():
            sock = server.nextPendingConnection()
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
