"""Whether a lock file stands for a person's unsaved work (docs/DESIGN.md, "Nothing lost";
docs/engine.md, "Unsaved work"): the one question a forced removal asks before it goes on
without an explicit "discard" from the user.

What each editor's lock says (docs/specs/devtool-locks.md §2.2-§2.4):

- **Vim** swap (``vim-swap``): block 0's ``b0_dirty`` byte (:mod:`core.formats.vimswap`,
  ``metadata["dirty"]``) says the swap holds changes never written to the file. The swap *is*
  the work: ``vim -r FILE`` recovers it.
- **Emacs** lock (``emacs-lock``): Emacs creates ``.#NAME`` on a buffer's first modification
  and removes it on save, so the lock means a modified buffer. Emacs keeps what it can of that
  work in the auto-save file ``#NAME#`` beside the edited file; when that file exists it holds
  the unsaved changes (``M-x recover-file``). The lock itself holds none.
- **LibreOffice** (``libreoffice-lock``): the lock records who opened the document, not
  whether it changed; LibreOffice keeps its recovery data in the user's profile and offers it
  at its next start. Removing the lock file loses no work, so it is not asked about.

Recovery data files themselves (Emacs's ``#NAME#``, LibreOffice's backups) are not lock files
no format reads, which a forced operation never touches anyway (docs/engine.md, "What force
may remove").
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
