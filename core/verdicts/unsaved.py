"""Whether a lock file stands for a person's unsaved work: the one question a forced removal
asks before it goes on without an explicit "discard" from the user
(:func:`unsaved_changes`).

What each editor's lock says -- a Vim swap's dirty byte, an Emacs lock with its auto-save file
``#NAME#`` beside the file, never a LibreOffice lock -- and the recovery command of each:
docs/engine.md, "Unsaved work"; docs/DESIGN.md, "Nothing lost"; docs/specs/devtool-locks.md,
"Vim swap files", "Emacs" and "LibreOffice". Recovery files themselves are not lock files, so
no forced operation touches them (docs/engine.md, "What force may remove").
"""

from __future__ import annotations

import os
import shlex

from core.codes import Code
from core.reasons import Reason
from core.record import LockStatus
from core.verdicts.devtools import edited_file


def unsaved_changes(status: LockStatus) -> Reason | None:
    """The unsaved work ``status``'s lock file stands for, as the reason
    ``unsaved_changes{tool, file, where, recover}`` (``file``: the edited file; ``where``: the
    file holding the changes; ``recover``: the shell command that gets them back), or
    ``None`` when it stands for none. Reads only the record, and for an Emacs lock whether its
    auto-save file exists (one ``lstat``). Never raises."""
    rec = status.record
    if rec is None:
        return None
    if rec.format == "vim-swap" and rec.metadata.get("dirty"):
        name = edited_file(status.path, rec)
        return Reason.of(Code.UNSAVED_CHANGES, tool="Vim", file=name, where=status.path,
                         recover=f"vim -r {shlex.quote(name)}")
    if rec.format == "emacs-lock":
        locked = rec.metadata.get("file")
        if not isinstance(locked, str) or not locked:
            return None
        name = os.path.join(os.path.dirname(status.path), locked)
        auto_save = os.path.join(os.path.dirname(status.path), f"#{locked}#")
        if not os.path.lexists(auto_save):
            return None
        lisp = '(recover-file "{}")'.format(name.replace("\\", "\\\\").replace('"', '\\"'))
        return Reason.of(Code.UNSAVED_CHANGES, tool="Emacs", file=name, where=auto_save,
                         recover=f"emacs --eval {shlex.quote(lisp)}")
    return None


__all__ = ["unsaved_changes"]
