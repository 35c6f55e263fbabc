"""One way to name a lock's holder in words, for every message (CLI, engine errors, GUI
confirmations). Control characters in holder names, hosts, tags and paths are escaped
(:func:`core.text.printable`).
"""

from __future__ import annotations

import re

from core.codes import Code
from core.reasons import render_all
from core.record import LockRecord, LockStatus, State
from core.text import human_duration, printable


def holder_name(record: LockRecord | None) -> str:
    """Who holds the lock: ``"agent-7 pid 4242 on build-7"``; ``""`` when the record names
    nobody. The PID and host are not repeated when the holder name already says them (Task
    MCP's ``"pid-4242@build-7"``)."""
    if record is None:
        return ""
    who: list[str] = []
    if record.holder:
        who.append(record.holder)
    if record.pid is not None and not (
            record.holder and re.search(rf"(?<![0-9]){record.pid}(?![0-9])", record.holder)):
        who.append(f"pid {record.pid}")
    if record.host and not (record.holder and record.host in record.holder):
        who.append(f"on {record.host}")
    return printable(" ".join(who))


def process_label(status: LockStatus, *, pid: bool = True) -> str:
    """The holder's process as the verdict's evidence names it, for people: ``"bash (PID 4242,
    user alice)"`` (``pid=False``: ``"bash (user alice)"``); ``""`` when no live process is
    known (a dead holder, a lock of another host, a free path). The process the kernel names
    for a kernel lock, the live process a lock records (pidfiles and sema locks too), or the
    process that has an empty file open (docs/gui.md, "Holder")."""
    ev = status.evidence
    if ev.process_name is None and ev.process_user is None:
        return ""
    inner = [f"PID {ev.pid}"] if pid and ev.pid is not None else []
    if ev.process_user is not None:
        inner.append(f"user {ev.process_user}")
    name = ev.process_name or "?"
    return printable(f"{name} ({', '.join(inner)})" if inner else name)


def describe_holder(status: LockStatus, *, path: bool = False, reasons: bool = False) -> str:
    """One phrase about a lock and its holder, e.g.
    ``"held by pid 4242 on build-7 (alive) for 3m 12s, tag 'deploy'"``,
    ``"stale, holder pid 11294 (dead), 2h 5m old"``, ``"free"``, ``"unreadable: <reason>"``.

    Args:
        status: the verdict.
        path: start with the lock's path (``"/locks/a.lock: held by …"``).
        reasons: end with the verdict's reasons in parentheses; a held lock whose holder
            nobody can name (e.g. ``kernel_table_too_large``: docs/verdicts.md) ends with them
            anyway, so "held" never stands alone.
    """
    text, named = _phrase(status)
    if path:
        text = f"{printable(status.path)}: {text}"
    nameless = status.state is State.HELD and not named
    if (reasons or nameless) and status.reasons and status.state is not State.UNREADABLE:
        text += f" ({render_all(status.reasons)})"
    return text


def _phrase(status: LockStatus) -> tuple[str, bool]:
    """The phrase of :func:`describe_holder`, and whether it names a holder."""
    if status.state is State.FREE:
        return "free", False
    if status.state is State.UNREADABLE:
        return f"unreadable: {printable(status.error or 'unknown reason')}", False
    rec = status.record
    who = holder_name(rec) or process_label(status)  # a kernel lock's holder, a file's opener
    holder = f"{who} ({_liveness(status)})" if who else ""
    age = human_duration(max(status.age_s, 0.0)) if status.age_s is not None else None
    if status.state in (State.HELD, State.WRITING):
        text = status.state.value + (f" by {holder}" if holder else "")
        text += f" for {age}" if age else ""
    else:
        text = status.state.value + (f", holder {holder}" if holder else "")
        text += f", {age} old" if age else ""
    if rec is not None and rec.tag:
        text += f", tag '{printable(rec.tag)}'"
    return text, bool(who)


def _liveness(status: LockStatus) -> str:
    """``alive``, ``dead``...; for a holder alive by its pin (reason ``holder_pinned``,
    docs/engine.md "The holder's pin") who keeps the pin: ``pinned by PID 7831 (sh)``."""
    pin = next((r for r in status.reasons if r.code is Code.HOLDER_PINNED), None)
    if pin is None:
        return status.liveness.value
    pid, name = pin.get("pid"), pin.get("name")
    if pid is None:
        return "pinned by a process this user may not inspect"
    return printable(f"pinned by PID {pid}" + (f" ({name})" if name else ""))
