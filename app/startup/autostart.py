"""Start at login (docs/gui.md "Dialogs", Settings): Linux/BSD ``$XDG_CONFIG_HOME/autostart/
lockwarden.desktop`` (XDG Autostart spec; the base directory from
:func:`platformdirs.user_config_dir`), macOS ``~/Library/LaunchAgents/
org.lockwarden.Lockwarden.plist`` (launchd ``RunAtLoad``; platformdirs has no LaunchAgents
directory), Windows ``HKCU\\Software\\Microsoft\\Windows\\CurrentVersion\\Run`` value
``Lockwarden`` (a registry value, no directory). The command starts the app in the tray
(``--minimized``)."""

from __future__ import annotations

import plistlib
import sys
from pathlib import Path

import platformdirs

LABEL = "org.lockwarden.Lockwarden"
RUN_KEY = r"Software\Microsoft\Windows\CurrentVersion\Run"


def command() -> list[str]:
    """argv that starts Lockwarden in the tray: the frozen executable, else this Python
    running ``-m app``."""
    if getattr(sys, "frozen", False):
        return [sys.executable, "--minimized"]
    return [sys.executable, "-m", "app", "--minimized"]


def _desktop_exec(argv: list[str]) -> str:
    """Quote argv for a .desktop ``Exec`` key (Desktop Entry spec: double quotes, with
    backslash before ``"``, backtick, ``$`` and backslash)."""
    out = []
    for a in argv:
        if any(ch in a for ch in ' \t"`$\\\'><~|&;*?#()'):
            esc = "".join("\\" + ch if ch in '"`$\\' else ch for ch in a)
            out.append(f'"{esc}"')
        else:
            out.append(a)
    return " ".join(out)


def desktop_file() -> Path:
    """Path of the XDG autostart entry: ``autostart/lockwarden.desktop`` in the user's config
    directory (``$XDG_CONFIG_HOME``, default ``~/.config``)."""
    return Path(platformdirs.user_config_dir()) / "autostart" / "lockwarden.desktop"


def plist_file() -> Path:
    """Path of the macOS LaunchAgent."""
    return Path.home() / "Library" / "LaunchAgents" / f"{LABEL}.plist"


def is_enabled() -> bool:
    """True when Lockwarden starts at login for this user."""
    if sys.platform == "win32":
        import winreg

        try:
            with winreg.OpenKey(winreg.HKEY_CURRENT_USER, RUN_KEY) as key:
                winreg.QueryValueEx(key, "Lockwarden")
            return True
        except OSError:
            return False
    if sys.platform == "darwin":
        return plist_file().is_file()
    return desktop_file().is_file()


def set_enabled(on: bool) -> None:
    """Create or remove the login item. Raises ``OSError`` when it cannot be written."""
    argv = command()
    if sys.platform == "win32":
        import winreg

        with winreg.CreateKey(winreg.HKEY_CURRENT_USER, RUN_KEY) as key:
            if on:
                line = " ".join(f'"{a}"' if " " in a else a for a in argv)
                winreg.SetValueEx(key, "Lockwarden", 0, winreg.REG_SZ, line)
            else:
                try:
                    winreg.DeleteValue(key, "Lockwarden")
                except FileNotFoundError:
                    pass
        return
    if sys.platform == "darwin":
        path = plist_file()
        if on:
            path.parent.mkdir(parents=True, exist_ok=True)
            data = {"Label": LABEL, "ProgramArguments": argv, "RunAtLoad": True,
                    "ProcessType": "Interactive"}
            path.write_bytes(plistlib.dumps(data))
        else:
            path.unlink(missing_ok=True)
        return
    path = desktop_file()
    if on:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "[Desktop Entry]\nType=Application\nName=Lockwarden\n"
            "Comment=Watch lock files and who holds them\n"
            f"Exec={_desktop_exec(argv)}\nIcon=lockwarden\nTerminal=false\n"
            "X-GNOME-Autostart-enabled=true\n", encoding="utf-8")
    else:
        path.unlink(missing_ok=True)
