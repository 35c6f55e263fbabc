"""Emacs file locks (format ``emacs-lock``): ``.#<name>`` beside the edited file, a **symlink**
whose target is ``USER@HOST.PID[:BOOT]`` (or, where symlinks fail, a regular file with the same
text).

Rules from ``docs/specs/devtool-locks.md`` (§2.3 "Emacs", Emacs's ``src/filelock.c``,
``current_lock_owner``): USER is everything before the **last** ``@``; PID follows the last
``.``; ``:`` (or U+F022, a CIFS quirk) precedes BOOT, the boot time in Unix seconds, left out
when Emacs found no boot time. Emacs creates the lock on a buffer's first modification and
removes it on save or kill.

The lock is read with ``os.readlink`` (:func:`read_lock`), never followed.
"""

from __future__ import annotations

import os
import stat

from core.errors import ParseError
from core.formats._common import MAX_PID, sanitize, short
from core.record import LockRecord

FORMAT = "emacs-lock"
PREFIX = ".#"
MAX_TARGET = 4096
"""Longest lock text read (bytes)."""


def is_lock_name(name: str) -> bool:
    """True for ``.#<name>`` (but not Emacs's nonce files ``.#-emacsXXXXXX``)."""
    return name.startswith(PREFIX) and len(name) > 2 and not name.startswith(".#-emacs")


def parse(data: bytes, path: str = "") -> LockRecord:
    """``USER@HOST.PID[:BOOT]`` (the symlink's target, or the regular file's text).

    ``holder`` = USER, ``host``, ``pid``; ``metadata``: ``boot`` (Unix s, or ``None``),
    ``file`` (the locked file's name: ``path``'s base name without ``.#``).

    Raises:
        ParseError: no ``@``, no ``.PID``, an empty user or host, a PID or BOOT that is not a
            decimal number (PID 1..2**32-1).
    """
    text = data[:MAX_TARGET].decode("utf-8", errors="replace").strip("\n")
    at = text.rfind("@")
    if at <= 0:
        raise ParseError(f"an Emacs lock reads USER@HOST.PID, not {short(text)}")
    user, rest = text[:at], text[at + 1:]
    dot = rest.rfind(".")
    if dot <= 0:
        raise ParseError(f"an Emacs lock has HOST.PID after the '@', not {short(rest)}")
    host, tail = rest[:dot], rest[dot + 1:]
    boot_text: str | None = None
    for sep in (":", "\uf022"):
        if sep in tail:
            tail, boot_text = tail.split(sep, 1)
            break
    if not (tail.isascii() and tail.isdigit()) or len(tail) > 10:
        raise ParseError(f"Emacs lock PID is not a number: {short(tail)}")
    pid = int(tail)
    if not 0 < pid <= MAX_PID:
        raise ParseError(f"Emacs lock PID is out of range: {pid}")
    boot: int | None = None
    if boot_text is not None:
        if not (boot_text.isascii() and boot_text.isdigit()) or len(boot_text) > 12:
            raise ParseError(f"Emacs lock boot time is not a number: {short(boot_text)}")
        boot = int(boot_text)
    if not user or not host:
        raise ParseError(f"an Emacs lock names a user and a host, not {short(text)}")
    name = os.path.basename(path)
    locked = name[len(PREFIX):] if is_lock_name(name) else None
    meta: dict[str, object] = {"boot": boot}
    if locked is not None:
        meta["file"] = locked
    return LockRecord(path=path, format=FORMAT, holder=sanitize(user), pid=pid,
                      host=sanitize(host), tag=locked, metadata=meta, raw=sanitize(text))


def read_lock(path: str) -> tuple[bytes, bool]:
    """The lock text of ``.#<name>``: the symlink's target (``os.readlink``, never followed)
    or a regular file's first 4 KiB, and whether it was a symlink.

    Raises:
        OSError: missing, unreadable, or neither a symlink nor a regular file.
    """
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return os.fsencode(os.readlink(path))[:MAX_TARGET], True
    if not stat.S_ISREG(st.st_mode):
        raise OSError(f"{path}: neither a symlink nor a regular file")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        return os.read(fd, MAX_TARGET), False
    finally:
        os.close(fd)


def parse_path(path: str) -> LockRecord:
    """:func:`read_lock` then :func:`parse`; ``metadata["symlink"]`` says which form it was.

    Raises:
        OSError: as :func:`read_lock`.
        ParseError: as :func:`parse`.
    """
    data, link = read_lock(path)
    record = parse(data, path)
    record.metadata["symlink"] = link
    return record
