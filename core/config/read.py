"""Reading the configuration file's bytes safely: only a regular file (symlinks to one are
followed: dotfile managers link it), opened without blocking on a FIFO, at most
:data:`MAX_CONFIG_BYTES`, and only this user's own (docs/DESIGN.md, "Formats": never open a
FIFO, device or socket; docs/watching.md, "Configuration": a file another user controls is
refused, as ssh refuses such files).
"""

from __future__ import annotations

import os
import stat
import sys

__all__ = ["MAX_CONFIG_BYTES", "foreign_config", "read_config_bytes"]

MAX_CONFIG_BYTES = 1024 * 1024
"""A configuration file larger than this (bytes) is refused: no real one comes near it."""


def foreign_config(st: os.stat_result) -> str | None:
    """Why a configuration file with status ``st`` is refused, as ssh refuses such files: it
    belongs to another user (not this user, not root), or other users may write it (writable
    by everyone, or by a group that is not this user's own); None when it is this user's own.
    Such a file could name servers and password variables for this user (docs/watching.md,
    "Configuration"). Always None where there are no owners (Windows)."""
    if sys.platform == "win32":  # pragma: no cover - Windows
        return None
    me = os.geteuid()
    if st.st_uid not in (me, 0):
        import pwd

        try:
            owner = pwd.getpwuid(st.st_uid).pw_name
        except KeyError:
            owner = f"uid {st.st_uid}"
        return f"belongs to {owner}, not to you or root: refused"
    if st.st_mode & stat.S_IWOTH or (st.st_mode & stat.S_IWGRP and st.st_gid != os.getegid()):
        return (f"can be written by other users (mode {stat.S_IMODE(st.st_mode):04o}): refused; "
                "chmod go-w it")
    return None


def read_config_bytes(path: str) -> bytes:
    """Read the configuration file at ``path``: a regular file (a symlink to one is followed),
    opened without blocking, at most :data:`MAX_CONFIG_BYTES`, owned by this user or root and
    writable by nobody else (:func:`foreign_config`).

    Raises:
        FileNotFoundError: no file at ``path``.
        OSError: not a regular file (FIFO, device, socket, directory: ``strerror`` says
            which), larger than 1 MiB, unreadable, or another user's (refused).
    """
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise OSError(0, f"is {kind}", path)
    if st.st_size > MAX_CONFIG_BYTES:
        raise OSError(0, f"is larger than {MAX_CONFIG_BYTES // (1024 * 1024)} MiB", path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags | getattr(os, "O_BINARY", 0))
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise OSError(0, "is not a regular file", path)
        refused = foreign_config(opened)
        if refused:
            raise OSError(0, refused, path)
        data = b""
        while len(data) <= MAX_CONFIG_BYTES:
            chunk = os.read(fd, MAX_CONFIG_BYTES + 1 - len(data))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    if len(data) > MAX_CONFIG_BYTES:
        raise OSError(0, f"is larger than {MAX_CONFIG_BYTES // (1024 * 1024)} MiB", path)
    return data
