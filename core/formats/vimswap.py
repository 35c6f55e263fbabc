"""Vim and Neovim swap files (format ``vim-swap``): ``.<name>.swp``, then ``.swo``, ``.swn`` …
``.saa``, next to the edited file or in Vim's ``'directory'``.

Block 0's layout (``struct block0`` of Vim's ``src/memline.c``; the integers at 0-1007 are
4-byte little-endian on every platform, the magics after them native and only tell whether a
compatible build wrote the file): docs/specs/devtool-locks.md, "Vim swap files", and the
offset table of docs/formats.md, "vim-swap". A swap file grows with the edited file; only its
first 1024 bytes matter (:func:`read_block0` reads just those).
"""

from __future__ import annotations

import os
import re
import stat
import struct

from core.errors import ParseError
from core.formats._common import sanitize
from core.record import LockRecord

FORMAT = "vim-swap"
BLOCK0_SIZE = 1024
"""Bytes of block 0 read (the fields end at 1007, the magics at 1022)."""

MIN_SIZE = 1008
"""Shortest input parsed: up to and including the dirty byte."""

DIRTY = 0x55
B0_SAME_DIR = 4
B0_HAS_FENC = 8
_IDS = {b"b0": None, b"bc": "zip", b"bC": "blowfish", b"bd": "blowfish2"}
_MAGIC_LE64 = struct.pack("<QIHB", 0x30313233, 0x20212223, 0x1213, 0x55)

_NAME_RE = re.compile(r"^\..+\.s(?:w[a-p]|[a-v][a-z])\Z")
"""Vim's swap names: ``.<name>.swp`` down to ``.<name>.saa`` (``src/memline.c``,
``findswapname``)."""


def is_swap_name(name: str) -> bool:
    """True for a base name Vim gives swap files (``.notes.txt.swp``, ``.x.swo``, ``.x.saa``)."""
    return _NAME_RE.match(name) is not None


def looks_like(data: bytes) -> bool:
    """True when ``data`` starts with a block 0 id (``b0``, ``bc``, ``bC``, ``bd``) followed by
    a version that starts with ``VIM`` or ``NVIM``, and is long enough to hold the fields."""
    return (len(data) >= MIN_SIZE and data[:2] in _IDS
            and (data[2:5] == b"VIM" or data[2:6] == b"NVIM"))


def _u32(data: bytes, offset: int) -> int:
    value: int = struct.unpack_from("<I", data, offset)[0]
    return value


def _text(field: bytes) -> str:
    return sanitize(field.split(b"\0", 1)[0].decode("utf-8", errors="replace"))


def parse(data: bytes, path: str = "") -> LockRecord:
    """Block 0 of a swap file into a :class:`LockRecord`.

    ``pid`` (``None`` for 0), ``holder`` = the user name, ``host``, ``tag`` = the edited file's
    name as Vim wrote it; ``metadata``: ``file``, ``dirty`` (bool), ``version``,
    ``page_size`` (bytes), ``file_mtime`` (Unix s or ``None``), ``inode``, ``flags``,
    ``same_dir``, ``fileencoding`` (or ``None``), ``encrypted`` (``None`` or the method),
    ``compatible`` (the magic numbers match a little-endian LP64 build, like this one).
    ``acquired_at`` is ``None``: the swap's mtime is when Vim last wrote it.

    Raises:
        ParseError: shorter than 1008 bytes, or no block 0 id.
    """
    if len(data) < MIN_SIZE:
        raise ParseError(f"is {len(data)} bytes; a Vim swap file's block 0 needs {MIN_SIZE}")
    ident = data[:2]
    if ident not in _IDS:
        raise ParseError(f"has no Vim block 0 id ('b0'), starts with {data[:2]!r}")
    pid = _u32(data, 24)
    flags = data[1006]
    fname_area = data[108:1006]
    fenc: str | None = None
    if flags & B0_HAS_FENC:
        cut = fname_area.rfind(b"\0")
        if cut >= 0 and cut + 1 < len(fname_area):
            fenc = _text(fname_area[cut + 1:])
    fname = _text(fname_area)
    mtime = _u32(data, 16)
    meta: dict[str, object] = {
        "file": fname,
        "dirty": data[1007] != 0,
        "version": _text(data[2:12]),
        "page_size": _u32(data, 12),
        "file_mtime": mtime or None,
        "inode": _u32(data, 20),
        "flags": flags,
        "same_dir": bool(flags & B0_SAME_DIR),
        "fileencoding": fenc,
        "encrypted": _IDS[ident],
        "compatible": data[1008:1024] == _MAGIC_LE64 + b"\0" if len(data) >= 1024 else False,
    }
    user = _text(data[28:68])
    host = _text(data[68:108])
    return LockRecord(path=path, format=FORMAT, holder=user or None, pid=pid or None,
                      host=host or None, tag=fname or None, metadata=meta,
                      raw=f"<Vim swap file, {len(data)} bytes read>")


def read_block0(path: str) -> bytes:
    """The first :data:`BLOCK0_SIZE` bytes of the swap file at ``path``, read safely: ``lstat``
    first, a regular file only, opened with ``O_NOFOLLOW|O_NONBLOCK`` (a swap file of a large
    buffer exceeds the 64 KiB a generic lock read takes).

    Raises:
        OSError: cannot be opened or read; ``IsADirectoryError``/``OSError`` for a path that is
            not a regular file (symlink, FIFO, device).
    """
    st = os.lstat(path)
    if not stat.S_ISREG(st.st_mode):
        raise OSError(f"{path}: not a regular file")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    try:
        return os.read(fd, BLOCK0_SIZE)
    finally:
        os.close(fd)
