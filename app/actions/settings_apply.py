"""Settings applied without restart (docs/gui.md, "Settings"): the watched directories handed to
the watcher, rows of directories no longer watched taken out of the table (the locks this app
holds stay), start at login, and "What's using this?" in the file managers' menus."""

from __future__ import annotations

import sys
from collections.abc import Iterable

from app.bridges.watch_bridge import WatchBridge
from app.startup import autostart
from app.table.lockinfo import under_any
from app.table.model import LockTableModel
from core.config import Config


def rewatch(config: Config, *, model: LockTableModel, inventory: WatchBridge,
            held: Iterable[str]) -> None:
    """Watch ``config``'s directories (``Watcher.set_specs``, in a worker thread) and take out
    of the table the rows outside them, except the locks this app holds (``held``): they stay
    listed, and held, wherever they are -- leaving the watch list says nothing about them
    (docs/gui.md "Watched directories and the locks the app holds")."""
    inventory.set_specs(config.all_watches())
    kept = {w.path for w in config.all_watches()}
    outside = [s.path for s in model.statuses() if not under_any(s.path, kept)]
    keep = set(held)
    gone = [p for p in outside if p not in keep]
    if gone:
        inventory.push([(p, None) for p in gone])


def set_autostart(on: bool | None) -> str | None:
    """Turn start at login on or off (``None``: leave it); the error in words when the login
    item cannot be changed, else ``None``."""
    if on is None:
        return None
    try:
        if on != autostart.is_enabled():
            autostart.set_enabled(on)
    except OSError as exc:
        return f"Could not change the login item: {exc}"
    return None


def file_menus_installed() -> bool:
    """True when "What's using this?" is in any file manager's menu
    (:mod:`app.startup.file_managers`)."""
    from app.startup import file_managers

    if sys.platform == "win32":
        return False  # the Explorer verb is not read back: the box starts off
    if sys.platform == "darwin":
        return file_managers.quick_action_dir().exists()
    return any(file_managers.installed(m) for m in file_managers.MANAGERS)


def set_file_menus(on: bool) -> str | None:
    """Install (or remove) "What's using this?" in every file manager's menu; the error in
    words, or None."""
    from app.startup import file_managers

    if on == file_menus_installed():
        return None
    try:
        if sys.platform == "win32":
            file_managers.register_explorer(on)
            return None
        if sys.platform == "darwin":
            if on:
                file_managers.write_quick_action()
            else:
                file_managers.remove_quick_action()
            return None
        for m in file_managers.MANAGERS:
            if on:
                file_managers.install(m)
            else:
                file_managers.remove(m)
    except file_managers.FileManagerError as exc:
        return f"Could not change the file manager's menu: {exc}"
    return None


__all__ = ["file_menus_installed", "rewatch", "set_autostart", "set_file_menus"]
