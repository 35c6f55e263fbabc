"""py-filelock's ``SoftFileLock`` marker (format ``softfilelock``): ``"<pid>\\n<host>\\n
[<start-token>\\n]"``.

Rules from ``docs/specs/devtool-locks.md`` (§2.7 "Other tools", "filelock SoftFileLock"; §1
table): the marker's existence is the lock; live when on this host, the PID runs and its start
token matches. On Linux the token is ``(boot_id << 64) | starttime`` (``/proc/<pid>/stat``
field 22, clock ticks since boot, and the 128-bit ``/proc/sys/kernel/random/boot_id``), as
filelock computes it; a token whose boot part is 0 compares on the low 64 bits only.
"""

from __future__ import annotations

import re

from core.errors import ParseError
from core.formats._common import MAX_PID, decode_text, raw_text, sanitize, short
from core.record import LockRecord

FORMAT = "softfilelock"
_RE = re.compile(r"^([0-9]{1,10})\r?\n([^\s=]{1,255})\r?\n(?:([0-9]{1,60})\r?\n?)?\Z")


def looks_like(text: str) -> bool:
    """True for text of the marker's shape (a PID line, a host line, an optional token)."""
    return _RE.match(text) is not None


def parse(data: bytes, path: str = "") -> LockRecord:
    """The marker: ``pid``, ``host``; ``metadata["start_token"]`` (int or ``None``).

    Raises:
        ParseError: not that shape, or a PID of 0 or out of range.
    """
    text = decode_text(data)
    m = _RE.match(text)
    if m is None:
        raise ParseError(f"a SoftFileLock marker reads '<pid>\\n<host>\\n[<token>]', "
                         f"not {short(text)}")
    pid = int(m.group(1))
    if not 0 < pid <= MAX_PID:
        raise ParseError(f"SoftFileLock PID is out of range: {short(m.group(1))}")
    token = int(m.group(3)) if m.group(3) else None
    return LockRecord(path=path, format=FORMAT, pid=pid, host=sanitize(m.group(2)),
                      metadata={"start_token": token}, raw=raw_text(data))


def start_token(pid: int, proc: str = "/proc") -> int | None:
    """filelock's start token of a running ``pid`` on this host (Linux), or ``None`` when it
    cannot be read. Never raises."""
    try:
        with open(f"{proc}/{pid}/stat", "rb") as f:
            data = f.read(4096)
        fields = data[data.rfind(b")") + 1:].split()
        start = int(fields[19])
    except (OSError, ValueError, IndexError):
        return None
    try:
        with open(f"{proc}/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = int(f.read().strip().replace("-", ""), 16)
    except (OSError, ValueError):
        boot = 0
    return (boot << 64) | start


def same_start(current: int, recorded: int) -> bool:
    """filelock's comparison: equal, or equal low 64 bits when either boot part is 0."""
    return current == recorded or (
        0 in (current >> 64, recorded >> 64) and current % 2**64 == recorded % 2**64)
