"""One instance per user and configuration (docs/gui.md "Start"), after qutebrowser's
``misc/ipc.py``: the first instance listens on a QLocalServer; a later launch connects, asks
it to show its window, and exits 0.

Where the socket lives (POSIX): in this user's private runtime directory,
``platformdirs.user_runtime_dir("lockwarden")`` (``$XDG_RUNTIME_DIR/lockwarden``; without
``XDG_RUNTIME_DIR``, platformdirs' ``/tmp/runtime-<uid>/lockwarden``), used only when it is a
real directory owned by this user with mode 0700 and its parent is this user's or root's: a
name in a shared ``/tmp`` could be taken first by another user, who would then block or
impersonate the GUI. When no such directory can be had, the app runs without the guard and
says why (:class:`InstanceLocationError`). Windows uses a named pipe of this user
(``UserAccessOption``).
"""

from __future__ import annotations

import getpass
import hashlib
import os
import stat
import warnings

from PySide6.QtCore import QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

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
    if os.name == "nt":
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
            # taken meanwhile by a launch at the same moment? then it answers now
            if self.notify_running():
                return False
            # a socket left by a crashed instance: nobody answers on it, so remove it
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
