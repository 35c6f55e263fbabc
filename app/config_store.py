"""The configuration the running app works with and where it is saved (docs/DESIGN.md "GUI":
Settings are TOML in the platformdirs config dir, written with :func:`core.config.save`)."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QObject, Signal

from core.config import Config
from core.config import save as save_config


class ConfigStore(QObject):
    """Holds the :class:`core.config.Config` in effect.

    Args:
        config: the configuration to start with.
        path: the TOML file it is saved to.
        persist: False for the demo, whose configuration is never written.
        parent: Qt parent.

    Signals:
        saveFailed(str, str): title and text of a failed save; the new configuration is in
            effect anyway (the app shows the message).
    """

    saveFailed = Signal(str, str)

    def __init__(self, config: Config, path: str, *, persist: bool = True,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._config = config
        self._path = path
        self._persist = persist

    @property
    def config(self) -> Config:
        """The configuration in effect."""
        return self._config

    @property
    def path(self) -> str:
        """The configuration file."""
        return self._path

    def watched_dirs(self) -> list[str]:
        """Paths of the watched directories, in configuration order."""
        return [w.path for w in self._config.watches]

    def set(self, config: Config, *, save: bool = True) -> None:
        """Put ``config`` in effect and, with ``save`` (and unless this is the demo), write
        it; a failed write emits :attr:`saveFailed`."""
        self._config = config
        if save and self._persist:
            self._save()

    def set_notifications_paused(self, paused: bool) -> None:
        """Pause or resume notifications and remember it in the configuration file (nothing
        is written when it is already so)."""
        notes = self._config.notifications
        if notes.paused == paused:
            return
        self.set(replace(self._config, notifications=replace(notes, paused=paused)))

    def _save(self) -> None:
        try:
            save_config(self._config, self._path)
        except OSError as exc:
            self.saveFailed.emit("Settings not saved",
                                 f"Could not write {self._path}: {exc.strerror or exc}")
