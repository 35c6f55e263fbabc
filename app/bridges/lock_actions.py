"""Lock operations of the GUI, all through the engine (:mod:`core`): acquire, release,
reclaim, force release. :class:`LockActions` keeps the :class:`core.engine.lock.Lock` objects of the
locks this app holds (the app's process is their holder; TTL locks refresh themselves with
``auto_refresh``) and is the one place that decides whether one of them was lost.

Every operation returns normally or raises :class:`ActionError` with a message for people;
the app shows it in a message box. Engine errors (:class:`core.errors.LockError`) and OS
errors (permission denied, directory gone) never escape as tracebacks (docs/gui.md "Window").
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QSettings, Signal

from app.table.lockinfo import Update
from core.errors import LockError, LockHeld, LockLost, NotStale, UnreadableError
from core.record import LockStatus, State
from core.stale_policy import StalePolicy

if TYPE_CHECKING:  # the engine is imported by the first operation (docs/performance.md "Idle tray")
    from core.config import Config
    from core.engine.lock import Lock
    from core.engine.trash import Kept


class ActionError(Exception):
    """A lock operation failed; ``title`` and ``str(self)`` are shown to the user."""

    def __init__(self, title: str, message: str) -> None:
        self.title = title
        super().__init__(message)

FORCED_MEMORY_S = 30.0
"""How long (s) a lock this app force-released is remembered as such: the watcher reports the
file gone within a second or two (a network file system's polling: longer)."""


def _detail(exc: BaseException, path: str) -> str:
    """The engine's message without the path the sentence before it already names."""
    if isinstance(exc, UnreadableError):
        return exc.reason
    if isinstance(exc, OSError) and not isinstance(exc, LockError):
        return str(exc.strerror or exc)
    text = str(exc)
    for prefix in (f"{path}: ", f"{path} "):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return text.replace(path, os.path.basename(path))


def _explain(exc: BaseException, path: str) -> str:
    """A message for people about ``exc`` on ``path``, naming the path once."""
    detail = _detail(exc, path)
    if isinstance(exc, LockHeld):
        rec = exc.status.record if exc.status is not None else None
        if rec is not None and rec.pid == os.getpid():
            return f"{path} is already held by this Lockwarden."
        return f"{path} is held by someone else.\n\n{detail}"
    if isinstance(exc, LockLost):
        return f"{path} is no longer ours: it was removed, reclaimed or replaced.\n\n{detail}"
    if isinstance(exc, NotStale):
        return f"{path} is not stale, so it was not reclaimed.\n\n{detail}"
    if isinstance(exc, UnreadableError):
        return f"{path} {detail}."
    if isinstance(exc, PermissionError):
        return f"Permission denied for {path}."
    if isinstance(exc, FileNotFoundError):
        where = os.path.dirname(path) or path
        return f"{where} does not exist (any more)."
    return f"{path}: {detail}"


def lost_message(path: str, replaced: bool) -> tuple[str, str]:
    """Title and sentence telling the user that a lock this app held was taken away:
    removed (``replaced`` False) or replaced by someone else's."""
    title = f"Lost {os.path.basename(path)}"
    body = ("Someone else replaced this lock while Lockwarden held it." if replaced
            else "Someone removed this lock while Lockwarden held it.")
    return title, body


def lost_verdict(lock: Lock, status: LockStatus | None) -> bool | None:
    """Whether the engine says ``lock`` is no longer ours, given the latest ``status`` of its
    path (``None`` or ``free``: no file). ``None``: still ours -- the Lock holds
    (:attr:`core.engine.lock.Lock.is_held`, its ``lost`` event unset) and the file names its token.
    Otherwise lost: ``False`` when the file is gone, ``True`` when something else is there
    (another token, or a file that no longer parses as ours)."""
    gone = status is None or status.state is State.FREE
    rec = status.record if status is not None else None
    if lock.is_held and not lock.lost.is_set() and rec is not None and not gone \
            and rec.token is not None and rec.token == lock.token:
        return None
    return not gone


class LockActions(QObject):
    """The app's lock operations and the locks it holds.

    Operations run in worker threads (the app starts them); the signals are emitted from
    there and reach GUI-thread slots queued.

    **Lost locks** are decided here and only here (:meth:`observe`): a lock this app holds is
    lost when, with no operation of ours running on its path, the inventory reports its path
    and :func:`lost_verdict` says the engine no longer counts it as ours. The lock is then
    forgotten and :attr:`lost` emitted; the tray and the window only observe that signal, so
    the outcome does not depend on the order in which slots were connected.

    Signals:
        heldChanged(): the set of locks held by this app changed.
        touched(str): an operation changed the lock at this path (re-inspect it).
        released(str): this app gave back the lock at this path (release, or force release
            of a lock it held).
        lost(str, bool): a lock this app held was taken away by someone else: its path, and
            True when it was replaced by another lock (False: removed).
        kept(object): a force release kept the file it removed
            (:class:`core.engine.trash.Kept`: in the trash or quarantine; Undo can put it
            back).
    """

    heldChanged = Signal()
    touched = Signal(str)
    released = Signal(str)
    lost = Signal(str, bool)
    kept = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._held: dict[str, Lock] = {}
        self._left: dict[str, str] = {}
        """Locks this app kept when it last quit ("Keep"): path -> token. Listed wherever they
        are until their file is gone or holds another acquisition (:meth:`observe`)."""
        self._busy: dict[str, int] = {}
        """Paths with an operation of ours running (their changes are expected)."""
        self._forced: dict[str, tuple[float, str]] = {}
        """Paths this app force-released: when (``time.monotonic``) and the reason given; the
        tray words their disappearance as such (:meth:`forced_recently`)."""
        self._mutex = threading.Lock()

    # -- queries (any thread) -----------------------------------------------------------------

    def holds(self, path: str) -> bool:
        """True when this app holds the lock at ``path`` (acquired or reclaimed here, not
        released, not lost)."""
        lock = self._held.get(path)
        return lock is not None and lock.is_held

    def held_paths(self) -> list[str]:
        """Paths of the locks this app holds, in the order they were taken."""
        return [p for p, lock in list(self._held.items()) if lock.is_held]

    def kept_paths(self) -> list[str]:
        """Paths that stay listed whatever the watched directories: the locks this app holds
        and those it kept when it last quit (:meth:`restore_kept`). Thread-safe."""
        with self._mutex:
            left = list(self._left)
        return list(dict.fromkeys([*self.held_paths(), *left]))

    def forced_recently(self, path: str) -> str | None:
        """The reason given (maybe "") when this app force-released ``path`` within the last
        :data:`FORCED_MEMORY_S` seconds or is doing it now, else None: the lock that
        disappeared there was not released by its holder. Thread-safe."""
        with self._mutex:
            seen = self._forced.get(path)
        if seen is None or time.monotonic() - seen[0] > FORCED_MEMORY_S:
            return None
        return seen[1]

    # -- locks kept at quit (GUI thread) ------------------------------------------------------

    KEPT_KEY = "kept_locks"
    """QSettings key of the locks kept at quit: JSON ``[[path, token], ...]``."""

    def save_kept(self, settings: QSettings) -> None:
        """Remember, at quit, the locks left behind: those still held (the user chose
        "Keep") and those kept at an earlier quit that are still there, so that the next
        start lists them even outside every watched directory (docs/gui.md, "Watched
        directories and the locks the app holds")."""
        kept = {p: lock.token for p, lock in list(self._held.items())
                if lock.is_held and lock.token}
        with self._mutex:
            kept.update({p: t for p, t in self._left.items() if p not in kept})
        if kept:
            settings.setValue(self.KEPT_KEY, json.dumps(sorted(kept.items())))
        else:
            settings.remove(self.KEPT_KEY)
        settings.sync()

    def restore_kept(self, settings: QSettings) -> None:
        """Read the locks kept at the last quit (:meth:`save_kept`); a value that does not
        parse is ignored."""
        try:
            pairs = json.loads(str(settings.value(self.KEPT_KEY, "[]")))
            left = {str(p): str(t) for p, t in pairs}
        except (ValueError, TypeError):
            left = {}
        with self._mutex:
            self._left = left

    @contextlib.contextmanager
    def _running(self, path: str) -> Iterator[None]:
        """Mark ``path`` busy while an operation of ours changes it (see :meth:`observe`)."""
        with self._mutex:
            self._busy[path] = self._busy.get(path, 0) + 1
        try:
            yield
        finally:
            with self._mutex:
                left = self._busy.get(path, 1) - 1
                if left:
                    self._busy[path] = left
                else:
                    self._busy.pop(path, None)

    def _forget(self, path: str) -> bool:
        with self._mutex:
            return self._held.pop(path, None) is not None

    # -- operations (worker threads) ----------------------------------------------------------

    def acquire(
        self, path: str, *, format: str = "sema", tag: str | None = None, ttl: float | None = None,
        policy: StalePolicy | None = None,
    ) -> Lock:
        """Acquire ``path`` without waiting, held by this process; a TTL lock (and every
        task-mcp lock, which always carries a lease) refreshes itself at 75% of the TTL
        (``ttl`` in seconds). ``policy``: the watched directory's (its stale limits, and
        whether the lock file may be readable by other users: docs/engine.md, "Who can read a
        lock file"). Returns the held :class:`core.engine.lock.Lock`. Raises
        :class:`ActionError` when the lock is held or the directory is not usable."""
        with self._running(path):
            if self.holds(path):
                raise ActionError("Already held", f"{path} is already held by this Lockwarden.")
            from core.engine.lock import Lock

            try:  # the Lock itself refuses a tag or TTL it cannot write (TagTooLong...)
                lock = Lock(path, tag=tag or None, ttl=ttl, format=format, policy=policy,
                            auto_refresh=ttl is not None or format == "task-mcp")
                lock.acquire(blocking=False)
            except (LockError, OSError, ValueError) as exc:
                raise ActionError("Could not acquire the lock", _explain(exc, path)) from exc
            with self._mutex:
                self._held[path] = lock
            self.heldChanged.emit()
            self.touched.emit(path)
            return lock

    def release(self, path: str) -> None:
        """Release a lock this app holds; emits :attr:`released`. Raises
        :class:`ActionError` when it is not ours or was lost (the engine never deletes a
        successor's lock); the lock is forgotten either way."""
        with self._running(path):
            lock = self._held.get(path)
            if lock is None:
                raise ActionError(
                    "Not held by Lockwarden",
                    f"{path} was not acquired by this Lockwarden; use Force release.")
            try:
                lock.release()
            except (LockError, OSError) as exc:
                self._forget(path)
                self.heldChanged.emit()
                self.touched.emit(path)
                raise ActionError("Could not release the lock", _explain(exc, path)) from exc
            self._forget(path)
            self.heldChanged.emit()
            self.released.emit(path)
            self.touched.emit(path)

    def reclaim(self, path: str, *, force: bool = False, reason: str | None = None,
                status: LockStatus | None = None) -> Lock:
        """Break a stale lock and take it (this app becomes the holder). ``force`` breaks a
        lock that is not stale (``reason`` goes to the audit entry). Uses the lock's own TTL
        (s) and the stale policy it was judged under when ``status`` is given; a lock with a
        lease renews itself.
        Returns the held :class:`core.engine.lock.Lock`. Raises :class:`ActionError`."""
        ttl = status.record.ttl if status is not None and status.record is not None else None
        policy = status.policy if status is not None else None
        with self._running(path):
            try:
                from core.engine.reclaiming import reclaim

                lock = reclaim(path, force=force, reason=reason or None, ttl=ttl,
                               policy=policy, auto_refresh=True)
            except (LockError, OSError) as exc:
                self.touched.emit(path)
                raise ActionError("Could not reclaim the lock", _explain(exc, path)) from exc
            with self._mutex:
                self._held[path] = lock
            self.heldChanged.emit()
            self.touched.emit(path)
            return lock

    def force_release(self, path: str, *, reason: str | None = None,
                      discard_unsaved: bool = False) -> LockStatus:
        """Remove the lock whatever its state; the displaced holder and ``reason`` go to the
        audit log. A foreign file with content goes to the trash or quarantine and
        :attr:`kept` is emitted; a file holding unsaved editor changes only with
        ``discard_unsaved``. Emits :attr:`released` when it was a lock this app held. Returns
        the status of what was removed. Raises :class:`ActionError`."""
        with self._running(path):
            with self._mutex:  # before: the watcher may see the file go at once
                self._forced[path] = (time.monotonic(), reason or "")
            try:
                from core.engine.operations import force_release_kept

                done = force_release_kept(path, reason=reason or None,
                                          discard_unsaved=discard_unsaved)
            except (LockError, OSError) as exc:
                with self._mutex:
                    self._forced.pop(path, None)
                self.touched.emit(path)
                raise ActionError("Could not force-release the lock",
                                  _explain(exc, path)) from exc
            if self._forget(path):
                self.heldChanged.emit()
                self.released.emit(path)
            if done.kept is not None:
                self.kept.emit(done.kept)
            with self._mutex:  # from now: the watcher's "gone" comes after
                self._forced[path] = (time.monotonic(), reason or "")
            self.touched.emit(path)
            return done.status

    def restore(self, kept: Kept, *, reason: str | None = None) -> LockStatus:
        """Put a file a force release kept back at its lock path (Undo;
        :func:`core.engine.trash.restore`, audited as ``restore``), never over a lock taken
        meanwhile. Returns the verdict on the restored file. Raises :class:`ActionError`."""
        path = kept.original
        with self._running(path):
            try:
                from core.engine.trash import restore as restore_kept

                return restore_kept(kept, reason=reason)
            except LockHeld as exc:
                raise ActionError("Could not undo the force release",
                                  f"{path} is taken again, so the removed file was not put "
                                  f"back: it stays in {kept.where()}.") from exc
            except (LockError, OSError) as exc:
                raise ActionError("Could not undo the force release",
                                  _explain(exc, path)) from exc
            finally:
                self.touched.emit(path)

    def end_holder(self, path: str, *, reason: str | None = None,
                   expected_pid: int | None = None, expected_start: float | None = None,
                   kill: bool = False, grace: float = 0.0, own_session: bool = False) -> bool:
        """End the process the kernel names as holder of ``path`` -- only while it is still
        ``expected_pid`` started at ``expected_start``, the one the user confirmed
        (:func:`core.engine.end_holder.end_holder`, audited): SIGTERM, or SIGKILL with
        ``kill``; then wait up to ``grace`` seconds for it to exit
        (:func:`core.engine.end_holder.wait_for_exit`). ``own_session``: the user was told the
        process is their own shell or session leader. Returns True when it has exited (always
        True with ``grace`` 0). Raises :class:`ActionError`."""
        import signal

        from core.engine.end_holder import KILL_SIGNAL, end_holder, wait_for_exit

        with self._running(path):
            try:
                pid = end_holder(path, reason=reason or None, expected_pid=expected_pid,
                                 expected_start=expected_start,
                                 sig=KILL_SIGNAL if kill else signal.SIGTERM,
                                 own_session=own_session)
                gone = True
                if grace > 0 and expected_start is not None:
                    gone = wait_for_exit(pid, expected_start, grace)
            except (LockError, OSError) as exc:
                raise ActionError("Could not end the holder", _explain(exc, path)) from exc
            finally:
                self.touched.emit(path)
            return gone

    def release_all(self) -> list[str]:
        """Release every lock this app holds (on Quit); returns error messages, if any."""
        errors: list[str] = []
        for path in list(self._held):
            try:
                self.release(path)
            except ActionError as exc:
                errors.append(str(exc))
        return errors

    # -- the inventory's reports (GUI thread) -------------------------------------------------

    def observe(self, updates: Iterable[Update]) -> None:
        """Judge the inventory's latest statuses (``None``: gone) of the paths this app holds;
        a lock the engine no longer counts as ours (:func:`lost_verdict`) is forgotten and
        :attr:`lost` emitted. Paths with an operation of ours running are skipped: their
        changes are ours. Connected to :attr:`app.bridges.watch_bridge.WatchBridge.updated`."""
        found: list[tuple[str, bool]] = []
        with self._mutex:
            for path, st in dict(updates).items():
                token = self._left.get(path)
                rec = st.record if st is not None else None
                if token is not None and (st is None or not st.present or rec is None
                                          or rec.token != token):
                    del self._left[path]  # removed, reclaimed or replaced since: done
                lock = self._held.get(path)
                if lock is None or path in self._busy:
                    continue
                replaced = lost_verdict(lock, st)
                if replaced is not None:
                    del self._held[path]
                    found.append((path, replaced))
        for path, replaced in found:
            self.heldChanged.emit()
            self.lost.emit(path, replaced)


def policy_for(config: Config, path: str) -> StalePolicy | None:
    """The whole policy of the configured directory of ``config`` that governs ``path``
    (:class:`core.config.PolicyResolver`: watched directories and projects, af claims
    included); ``None`` (the defaults) when none does."""
    from core.config import PolicyResolver

    specs = list(config.watches) + [p.watch_spec() for p in config.projects]
    return PolicyResolver(specs).policy_for(path)
