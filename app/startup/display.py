"""Is there a display the GUI can open? Checked before Qt starts, because Qt's own failure is
an abort with a misleading hint (docs/gui.md, "Start"): a ``DISPLAY`` that names no running X
server, or no display at all, each get one line that says what to do.

Only the connection is tried (the X11 socket ``/tmp/.X11-unix/X<N>``, its abstract twin, or TCP
``6000 + N`` for a remote host; a Wayland socket is looked up in ``XDG_RUNTIME_DIR``); nothing
is sent. Elsewhere than Linux/BSD (macOS, Windows) there is always a display.
"""

from __future__ import annotations

import ctypes.util
import os
import re
import socket
import sys

CONNECT_TIMEOUT_S = 1.0
"""Seconds to wait for a remote X server to accept the connection."""

_DISPLAY_RE = re.compile(r"^(?P<host>[^:]*):(?P<num>[0-9]+)(?:\.[0-9]+)?\Z")

CLI_HINT = ("the command line works without one: 'lockwarden list DIR', "
            "'lockwarden watch DIR'")


def problem(env: dict[str, str] | None = None) -> str | None:
    """Why the GUI cannot open a window here, in one line, or ``None`` when it can (or when
    Qt was told to use another platform: ``QT_QPA_PLATFORM=offscreen``...). ``env``: the
    environment to judge (default ``os.environ``). Never raises."""
    env = dict(os.environ) if env is None else env
    if not sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
        return None
    platform = env.get("QT_QPA_PLATFORM", "")
    if platform and not platform.startswith(("xcb", "wayland")):
        return None
    wayland, x11 = env.get("WAYLAND_DISPLAY", ""), env.get("DISPLAY", "")
    if wayland and _wayland_ok(wayland, env):
        return None
    if not x11:
        if wayland:
            return (f"no Wayland socket {wayland!r} (WAYLAND_DISPLAY) in XDG_RUNTIME_DIR and "
                    f"DISPLAY is not set; start the GUI inside your desktop session, or {CLI_HINT}")
        return ("no graphical display: DISPLAY and WAYLAND_DISPLAY are not set. Start the GUI "
                f"inside a desktop session (or over 'ssh -X'), or {CLI_HINT}")
    why = _x11_unreachable(x11)
    if why is not None:
        return (f"cannot reach the X display {x11!r} named by DISPLAY ({why}); check that the "
                f"X server runs and DISPLAY is right, or {CLI_HINT}")
    if ctypes.util.find_library("xcb-cursor") is None:
        return ("Qt needs the library libxcb-cursor0 to open windows on X11; install it "
                "(Debian/Ubuntu: 'apt install libxcb-cursor0'), or " + CLI_HINT)
    return None


def _wayland_ok(name: str, env: dict[str, str]) -> bool:
    path = name if os.path.isabs(name) else os.path.join(env.get("XDG_RUNTIME_DIR", ""), name)
    return os.path.exists(path)


def _x11_unreachable(display: str) -> str | None:
    """Why the X server of ``display`` does not accept a connection, or None when it does."""
    m = _DISPLAY_RE.match(display)
    if m is None:
        return "not of the form [host]:N"
    host, num = m.group("host"), int(m.group("num"))
    if num > 65535 - 6000:
        return "not of the form [host]:N (display number too large)"
    if host in ("", "unix") or host.startswith("/"):
        if sys.platform == "win32":  # pragma: no cover - problem() asks on Linux and BSDs only
            return "no Unix sockets here"
        path = host if host.startswith("/") else f"/tmp/.X11-unix/X{num}"
        for address in (path, "\0" + path):  # the file, then Linux's abstract namespace
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(CONNECT_TIMEOUT_S)
                    s.connect(address)
                return None
            except OSError as exc:
                why = exc.strerror or str(exc)
        return f"no X server listens on {path}: {why}"
    try:
        with socket.create_connection((host, 6000 + num), timeout=CONNECT_TIMEOUT_S):
            return None
    except OSError as exc:
        return f"{host}:{6000 + num}: {exc.strerror or exc}"
    except (UnicodeError, ValueError) as exc:  # a host name the resolver cannot even encode
        return f"{host!r} is not a host name: {exc}"
