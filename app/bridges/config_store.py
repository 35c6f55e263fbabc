"""The configuration the running app works with and where it is saved (docs/DESIGN.md "GUI":
Settings are TOML in the platformdirs config dir; "Nothing lost": the file is edited in place
with :func:`core.config.save`, never overwritten when it does not parse, merged when it changed
on disk since it was read)."""

from __future__ import annotations

import sys
from dataclasses import replace

from PySide6.QtCore import QObject, Signal

from core.config import Config, load
from core.config.problems import problem_line
from core.errors import ConfigError


class ConfigStore(QObject):
    """Holds the :class:`core.config.Config` in effect.

    Args:
        config: the configuration to start with (as :func:`core.config.load` read it: its
            warnings are the configuration's problems).
        path: the TOML file it is saved to.
        persist: False for the demo, whose configuration is never written.
        parent: Qt parent.

    Every configuration problem (:meth:`problems`) is printed once on stderr
    (``lockwarden: config: ...``) when it first appears, whole, so a user who starts the app
    from a terminal reads it there too (docs/gui.md, "Problems").

    Signals:
        saveFailed(str, str): title and text of a failed save; the new configuration is in
            effect anyway (the app shows the message).
        problemsChanged(list): the configuration's problems changed (a list of str).
    """

    saveFailed = Signal(str, str)
    problemsChanged = Signal(list)

    def __init__(self, config: Config, path: str, *, persist: bool = True,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._config = config
        self._path = path
        self._persist = persist
        self._printed: set[str] = set()
        self._print_new(self.problems())

    @property
    def config(self) -> Config:
        """The configuration in effect."""
        return self._config

    @property
    def path(self) -> str:
        """The configuration file."""
        return self._path

    @property
    def persist(self) -> bool:
        """False for the demo: nothing is ever written."""
        return self._persist

    def problems(self) -> list[str]:
        """The configuration's problems, each whole (``config.toml line 8:
        watch[2].stale_after: must be ...; using 3600``): what :func:`core.config.load`
        warned about, the file that cannot be used first."""
        return list(self._config.warnings)

    def watched_dirs(self) -> list[str]:
        """Paths of the watched directories, in configuration order."""
        return [w.path for w in self._config.watches]

    def set(self, config: Config, *, save: bool = True) -> None:
        """Put ``config`` in effect and, with ``save`` (and unless this is the demo), write
        the change from the configuration in effect into the file (the file's other content
        and changes made on disk meanwhile are kept). A file that does not parse, or that
        changed on disk in the same keys, is not written: :attr:`saveFailed` says why and
        where, and ``config`` is in effect anyway (the problems of the file stay listed)."""
        old = self._config
        self._config = config
        if save and self._persist:
            try:
                self._config = self._write(config, base=old, prefer_mine=False)
            except (ConfigError, OSError) as exc:
                self._config = replace(config, warnings=list(old.warnings),
                                       load_error=old.load_error)
                self.saveFailed.emit("Settings not saved", _why(self._path, exc))
        self._changed(old)

    def commit(self, config: Config, *, base: Config, prefer_mine: bool = False,
               reloaded: bool = False) -> Config:
        """Save ``config`` -- what Settings made of ``base`` -- into the file, merged with
        what the file says now, and put what the file then holds in effect (for the demo:
        ``config`` itself, nothing written). Nothing is written when ``config`` equals
        ``base``; with ``reloaded`` (``base`` was read again from the file: Settings' Reload)
        ``base`` is then put in effect.

        Returns:
            The configuration now in effect.

        Raises:
            core.config.edit.ConfigUnparsable: the file does not parse (line, column).
            core.config.edit.ConfigConflict: the file changed on disk since ``base`` was read
                and both changed a key (``prefer_mine`` False); nothing written.
            ConfigError: the edit would not parse (a bug); OSError: cannot be read/written.
        """
        old = self._config
        if replace(config, warnings=[]) == replace(base, warnings=[]):
            if reloaded:
                self._config = base
                self._changed(old)
            return self._config
        self._config = (self._write(config, base=base, prefer_mine=prefer_mine)
                        if self._persist else config)
        self._changed(old)
        return self._config

    def reload(self) -> Config:
        """Read the file again (after the user fixed it by hand) and return what it says; the
        configuration in effect is not changed (Settings applies it on OK)."""
        return load(self._path)

    def set_notifications_paused(self, paused: bool) -> None:
        """Pause or resume notifications and remember it in the configuration file (nothing
        is written when it is already so)."""
        notes = self._config.notifications
        if notes.paused == paused:
            return
        self.set(replace(self._config, notifications=replace(notes, paused=paused)))

    # -- internals ----------------------------------------------------------------------------

    def _write(self, config: Config, *, base: Config, prefer_mine: bool) -> Config:
        from core.config.edit import write

        written = write(config, self._path, base=base, prefer_mine=prefer_mine)
        return written

    def _changed(self, old: Config) -> None:
        if old.warnings != self._config.warnings:
            self._print_new(self.problems())
            self.problemsChanged.emit(self.problems())

    def _print_new(self, problems: list[str]) -> None:
        for p in problems:
            if p not in self._printed:
                self._printed.add(p)
                print(problem_line(p), file=sys.stderr, flush=True)


def _why(path: str, exc: Exception) -> str:
    """A failed save in words, without the exception's class name."""
    if isinstance(exc, OSError):
        return f"Could not write {path}: {exc.strerror or exc}"
    return str(exc)
