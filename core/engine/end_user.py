"""Ending a process because it uses a file or folder (docs/cli.md, "who"; docs/gui.md, "What's
using this?"): the answer to "why can't I delete, move or eject this?" once the user has decided
that the process may go. An explicit, confirmed human decision, always audited (``end_user``,
fsynced, in the per-user log: the file is no lock and its folder nobody's lock directory).

As for ending a lock's holder (:mod:`core.engine.end_holder`): through a pidfd opened first,
the process is re-proven to be the one the person confirmed (its start time) and to use the
path *now* (:func:`core.kernel.usage.who_uses`), so neither a reused PID nor a process that let
go is signalled; SIGTERM first, :func:`core.engine.end_holder.wait_for_exit`, SIGKILL only when
the caller asks again; the caller's own shell or session leader never.
"""

from __future__ import annotations

import os
import signal
import sys

from core.engine.audited import record_audit
from core.engine.end_holder import KILL_SIGNAL, TERM_GRACE, wait_for_exit
from core.errors import LockError
from core.kernel.proof import open_pidfd, own_session_role
from core.kernel.usage import who_uses
from core.verdicts.liveness import process_facts

__all__ = ["TERM_GRACE", "NotUsing", "end_user", "wait_for_exit"]

_START_TOLERANCE = 0.01
"""Seconds by which two reads of one process's start time may differ (psutil rounds)."""


class NotUsing(LockError):
    """The process is gone, is not the one confirmed, no longer uses the path, or is the
    caller's own session: nothing was signalled."""


def end_user(path: str, pid: int, start: float, *, kill: bool = False,
             reason: str | None = None) -> None:
    """Send SIGTERM (``kill``: SIGKILL) to process ``pid``, which started at ``start`` (Unix s),
    because it uses ``path``; audited as ``end_user`` in the per-user log.

    Raises:
        NotUsing: see the class; also for the caller's own shell or session leader.
        PermissionError: the process is another user's and this user may not signal it.
        OSError: ``path`` cannot be reached.
    """
    role = own_session_role(pid)
    if role is not None:
        raise NotUsing(f"PID {pid} is {role}: it is not ended from here")
    sig = KILL_SIGNAL if kill else signal.SIGTERM
    try:
        fd = open_pidfd(pid)
    except ProcessLookupError:
        raise NotUsing(f"PID {pid} has exited") from None
    try:
        facts = process_facts(pid)
        if facts is None or abs(facts.start - start) > _START_TOLERANCE:
            raise NotUsing(f"PID {pid} is not the process you confirmed any more (it exited)")
        use = who_uses([path]).uses.get(pid)
        if use is None:
            raise NotUsing(f"PID {pid} ({facts.name}) no longer uses {path}")
        details = {"pid": pid, "name": facts.name, "user": facts.user, "start": facts.start,
                   "cmdline": list(facts.cmdline or ()), "how": use.how, "files": use.files,
                   "signal": signal.Signals(sig).name, "reason": reason}
        try:
            if fd is not None and sys.platform.startswith("linux"):
                signal.pidfd_send_signal(fd, sig)
            else:
                os.kill(pid, sig)
        except ProcessLookupError:
            raise NotUsing(f"PID {pid} has exited") from None
        record_audit(path, "end_user", details=details, durable=True, user_log=True)
    finally:
        if fd is not None:
            os.close(fd)
