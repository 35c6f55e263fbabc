"""A fake lock server on 127.0.0.1 that drips: a TCP proxy in front of a real server that
forwards what the client sends at once and what the server answers one byte every
``interval`` seconds, so no single read ever waits long enough for a per-read socket timeout
while no answer ever completes in reasonable time."""

from __future__ import annotations

import select
import socket
import threading
from types import TracebackType


class DripProxy:
    """``with DripProxy(target_port) as proxy:`` listens on ``proxy.port`` (127.0.0.1).
    With ``drip_after``, answers go at full speed until the client has sent those bytes
    (e.g. the listing query), so the connection is made and the query's answer drips; with
    ``nth``, from the ``nth`` time a client sends them (on any connection) on."""

    def __init__(self, target_port: int, interval: float = 2.0,
                 drip_after: bytes | None = None, nth: int = 1) -> None:
        self.target_port = target_port
        self.drip_after = drip_after
        self.nth = nth
        self.seen_after = 0  # how many times a client sent drip_after
        self.interval = interval
        self.stop = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.listener.getsockname()[1]
        self.accepted = 0
        self.dripping = threading.Event()
        """Set once a client sent ``drip_after`` (or at the first connection without it):
        from then on answers drip."""
        self._threads: list[threading.Thread] = []
        self._socks: list[socket.socket] = []

    def __enter__(self) -> DripProxy:
        self._spawn(self._accept)
        return self

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop.set()
        self.listener.close()
        for s in self._socks:
            try:
                s.close()
            except OSError:
                pass
        for th in self._threads:
            th.join(5)

    def _spawn(self, fn: object, *args: object) -> None:
        th = threading.Thread(target=fn, args=args, daemon=True)  # type: ignore[arg-type]
        th.start()
        self._threads.append(th)

    def _accept(self) -> None:
        while not self.stop.is_set():
            ready, _, _ = select.select([self.listener], [], [], 0.1)
            if not ready:
                continue
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.accepted += 1
            server = socket.create_connection(("127.0.0.1", self.target_port))
            self._socks += [client, server]
            go = threading.Event()
            if self.drip_after is None:
                go.set()
                self.dripping.set()
            self._spawn(self._forward, client, server, go)
            self._spawn(self._drip, server, client, go)

    def _forward(self, src: socket.socket, dst: socket.socket, go: threading.Event) -> None:
        seen = b""
        while not self.stop.is_set():
            try:
                ready, _, _ = select.select([src], [], [], 0.1)
                if not ready:
                    continue
                data = src.recv(65536)
                if not data:
                    return
                if self.drip_after is not None and not go.is_set():
                    seen = (seen + data)[-65536:]
                    if self.drip_after in seen:
                        seen = b""
                        self.seen_after += 1
                        if self.seen_after >= self.nth:
                            go.set()
                            self.dripping.set()
                dst.sendall(data)
            except (OSError, ValueError):
                return

    def _drip(self, src: socket.socket, dst: socket.socket, go: threading.Event) -> None:
        pending = b""
        while not self.stop.is_set():
            try:
                if not go.is_set():
                    ready, _, _ = select.select([src], [], [], 0.05)
                    if ready:
                        data = src.recv(65536)
                        if not data:
                            return
                        if go.is_set():  # the awaited query went through meanwhile: this
                            pending += data  # may be its answer, which drips
                            continue
                        dst.sendall(data)
                    continue
                ready, _, _ = select.select([src], [], [], 0)
                if ready:
                    data = src.recv(65536)
                    if not data and not pending:
                        return
                    pending += data
                if pending:
                    dst.sendall(pending[:1])
                    pending = pending[1:]
            except (OSError, ValueError):
                return
            self.stop.wait(self.interval)
