"""The ``DT_NEEDED`` entries of an ELF shared object (the libraries it links directly), read
from its ``.dynamic`` section in pure Python: ``ldd`` lists every library reached *through*
another one too, so a closure built from it keeps what only a host library needs (glib's
``libpcre2``, systemd's ``libgcrypt``...). Used by packaging/lockwarden.spec on Linux
(docs/packaging.md "What is in the bundle").
"""

from __future__ import annotations

import struct
from pathlib import Path

SHT_DYNAMIC = 6
DT_NEEDED = 1


def needed(path: str | Path) -> list[str]:
    """The names a 64- or 32-bit ELF file links (``DT_NEEDED``, in order); ``[]`` for a file
    that is not ELF or has no dynamic section.

    Raises:
        OSError: the file cannot be read.
    """
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF":
        return []
    is64, end = data[4] == 2, "<" if data[5] == 1 else ">"
    if is64:
        shoff, = struct.unpack_from(end + "Q", data, 0x28)
        shentsize, shnum = struct.unpack_from(end + "HH", data, 0x3A)
        sh_fmt, dyn_fmt = end + "IIQQQQIIQQ", end + "qQ"
    else:
        shoff, = struct.unpack_from(end + "I", data, 0x20)
        shentsize, shnum = struct.unpack_from(end + "HH", data, 0x2E)
        sh_fmt, dyn_fmt = end + "IIIIIIIIII", end + "iI"
    sections = [struct.unpack_from(sh_fmt, data, shoff + i * shentsize) for i in range(shnum)]
    names: list[str] = []
    for sec in sections:
        if sec[1] != SHT_DYNAMIC:
            continue
        offset, size, link = sec[4], sec[5], sec[6]
        strtab_off = sections[link][4]
        step = struct.calcsize(dyn_fmt)
        for i in range(0, size, step):
            tag, val = struct.unpack_from(dyn_fmt, data, offset + i)
            if tag == 0:
                break
            if tag == DT_NEEDED:
                start = strtab_off + val
                names.append(data[start:data.index(b"\0", start)].decode())
    return names
