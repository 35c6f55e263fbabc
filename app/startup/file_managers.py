"""A right-click "What's using this?" in the file managers (docs/gui.md, "What's using this?"):
installed and removed from Settings, off by default. Each entry runs ``lockwarden-gui --who
PATH``, which opens :class:`app.dialogs.who.WhoDialog` on the file.

- Nautilus (GNOME Files): a script in ``~/.local/share/nautilus/scripts/``;
- Dolphin (KDE): a service menu in ``~/.local/share/kio/servicemenus/`` (executable, as KF6
  requires);
- Nemo (Cinnamon): an action in ``~/.local/share/nemo/actions/``;
- Thunar (Xfce): one ``<action>`` in ``~/.config/Thunar/uca.xml``, edited with care: the user's
  other actions are kept, and a file that does not parse is never overwritten;
- Windows: a per-user Explorer verb under ``HKCU\\Software\\Classes\\*\\shell`` and
  ``Directory\\shell``; macOS: a Finder Quick Action (an Automator service workflow in
  ``~/Library/Services``) running the command with the file (both built and documented; the
  workflow's files are written and parsed in the tests here, not run).

Only what this module wrote is removed: each file carries :data:`MARK`, the Thunar action its
``unique-id``.
"""

from __future__ import annotations

import os
import shlex
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

__all__ = ["MANAGERS", "MARK", "FileManagerError", "command", "install", "installed",
           "quick_action_dir", "register_explorer", "remove", "remove_quick_action",
           "write_quick_action"]

MARK = "lockwarden-who"
"""Names Lockwarden's entry in every file manager (file names, Thunar's unique-id)."""

LABEL = "What's using this?"

MANAGERS = ("nautilus", "dolphin", "nemo", "thunar")
"""The Linux file managers served, in the order Settings lists them."""


class FileManagerError(OSError):
    """An entry could not be written or removed (the message says which file and why)."""


def _data_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")


def _config_home() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")


def command() -> list[str]:
    """The argument vector that opens the window (without the path): the frozen executable,
    the ``lockwarden-gui`` script beside this Python, else ``python -m app``."""
    if getattr(sys, "frozen", False):
        return [sys.executable]
    script = Path(sys.executable).with_name("lockwarden-gui")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "app"]


def _desktop_exec(argv: list[str]) -> str:
    """``argv`` quoted for a desktop entry's ``Exec`` key (the spec's double quotes)."""
    def quote(word: str) -> str:
        if all(c.isalnum() or c in "/._-+=:@" for c in word):
            return word
        return '"' + "".join("\\" + c if c in '"`$\\' else c for c in word) + '"'
    return " ".join(quote(w) for w in argv)


def _paths() -> dict[str, Path]:
    data = _data_home()
    return {
        "nautilus": data / "nautilus" / "scripts" / LABEL,
        "dolphin": data / "kio" / "servicemenus" / f"{MARK}.desktop",
        "nemo": data / "nemo" / "actions" / f"{MARK}.nemo_action",
        "thunar": _config_home() / "Thunar" / "uca.xml",
    }


def _content(manager: str) -> str:
    argv = [*command(), "--who"]
    exe = _desktop_exec(argv)
    if manager == "nautilus":
        return ("#!/bin/sh\n"
                f"# {MARK}: Lockwarden's \"{LABEL}\" (installed and removed in its Settings)\n"
                f'exec {shlex.join(argv)} "${{1:-.}}"\n')
    if manager == "dolphin":
        return (f"[Desktop Entry]\nType=Service\nName={LABEL}\n"
                "MimeType=application/octet-stream;inode/directory;"
                "\nActions=lockwardenWho;\nX-KDE-ServiceTypes=KonqPopupMenu/Plugin\n"
                f"X-Lockwarden={MARK}\n\n[Desktop Action lockwardenWho]\nName={LABEL}\n"
                f"Icon=lockwarden\nExec={exe} %f\n")
    if manager == "nemo":
        return (f"[Nemo Action]\nName={LABEL}\nComment=Show the processes using %N\n"
                f"Exec={exe} %F\nIcon-Name=lockwarden\nSelection=s\nExtensions=any;\n"
                f"X-Lockwarden={MARK}\n")
    raise ValueError(manager)


def installed(manager: str) -> bool:
    """True when Lockwarden's entry is in ``manager``'s configuration."""
    path = _paths()[manager]
    try:
        if manager == "thunar":
            return _thunar_action(ET.parse(path).getroot()) is not None
        return MARK in path.read_text(encoding="utf-8")
    except (OSError, ET.ParseError, UnicodeDecodeError):
        return False


def install(manager: str) -> Path:
    """Write Lockwarden's entry for ``manager``; returns the file written.

    Raises:
        FileManagerError: the file cannot be written, or (Thunar) ``uca.xml`` does not parse
            (it is left as it was).
    """
    path = _paths()[manager]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if manager == "thunar":
            _thunar_edit(path, add=True)
            return path
        tmp = path.with_name(f".{path.name}.lockwarden-tmp")
        tmp.write_text(_content(manager), encoding="utf-8")
        tmp.chmod(0o755 if manager in ("nautilus", "dolphin") else 0o644)
        os.replace(tmp, path)
    except (OSError, ET.ParseError, UnicodeDecodeError) as exc:
        raise FileManagerError(f"{path}: {exc}") from None
    return path


def remove(manager: str) -> None:
    """Remove Lockwarden's entry from ``manager`` (nothing else; nothing when absent).

    Raises:
        FileManagerError: the file cannot be changed, or ``uca.xml`` does not parse.
    """
    path = _paths()[manager]
    try:
        if manager == "thunar":
            if path.exists():
                _thunar_edit(path, add=False)
            return
        if installed(manager):
            path.unlink()
    except (OSError, ET.ParseError, UnicodeDecodeError) as exc:
        raise FileManagerError(f"{path}: {exc}") from None


def _thunar_action(root: ET.Element) -> ET.Element | None:
    for action in root.findall("action"):
        if (action.findtext("unique-id") or "").strip() == MARK:
            return action
    return None


def _thunar_edit(path: Path, *, add: bool) -> None:
    """Add or remove Lockwarden's ``<action>`` in ``uca.xml``, keeping every other action and
    the file's comments and order (``ET.ParseError``: a file that does not parse is left
    alone)."""
    prolog = '<?xml version="1.0" encoding="UTF-8"?>\n'
    if path.exists():
        text = path.read_text(encoding="utf-8")
        root = ET.fromstring(text, parser=ET.XMLParser(target=ET.TreeBuilder(
            insert_comments=True)))
        start = text.find("<" + root.tag)
        prolog = text[:start] if start > 0 else prolog  # the declaration, comments before
    else:
        root = ET.Element("actions")
    tree = ET.ElementTree(root)
    old = _thunar_action(root)
    if old is not None:
        root.remove(old)
    if add:
        action = ET.SubElement(root, "action")
        for tag, text in (("icon", "lockwarden"), ("name", LABEL), ("unique-id", MARK),
                          ("command", _desktop_exec([*command(), "--who"]) + " %f"),
                          ("description", "Show the processes using this file or folder"),
                          ("patterns", "*")):
            ET.SubElement(action, tag).text = text
        for kind in ("directories", "audio-files", "image-files", "other-files", "text-files",
                     "video-files"):
            ET.SubElement(action, kind)
    ET.indent(tree)
    tmp = path.with_name(f".{path.name}.lockwarden-tmp")
    tmp.write_text(prolog + ET.tostring(root, encoding="unicode") + "\n", encoding="utf-8")
    os.replace(tmp, path)


def register_explorer(enable: bool) -> None:
    """Windows: add (or remove) the per-user Explorer verb for files and folders.

    Raises:
        FileManagerError: the registry cannot be written.
    """
    if sys.platform == "win32":
        import winreg

        argv = [*command(), "--who"]
        cmd = " ".join(f'"{w}"' for w in argv) + ' "%1"'
        try:
            for cls in (r"Software\Classes\*\shell", r"Software\Classes\Directory\shell"):
                key = f"{cls}\\{MARK}"
                if enable:
                    with winreg.CreateKey(winreg.HKEY_CURRENT_USER, key) as k:
                        winreg.SetValueEx(k, None, 0, winreg.REG_SZ, LABEL)
                    with winreg.CreateKey(winreg.HKEY_CURRENT_USER, key + r"\command") as k:
                        winreg.SetValueEx(k, None, 0, winreg.REG_SZ, cmd)
                else:
                    for sub in (key + r"\command", key):
                        try:
                            winreg.DeleteKey(winreg.HKEY_CURRENT_USER, sub)
                        except FileNotFoundError:
                            pass
        except OSError as exc:
            raise FileManagerError(f"Explorer context menu: {exc}") from None


def quick_action_dir(home: Path | None = None) -> Path:
    """macOS: the Finder Quick Action's bundle, ``~/Library/Services/What's using
    this?.workflow``."""
    return (home or Path.home()) / "Library" / "Services" / f"{LABEL}.workflow"


def write_quick_action(home: Path | None = None) -> Path:
    """Write the macOS Finder Quick Action (``Info.plist`` naming the service for files and
    folders in Finder, ``document.wflow`` with one *Run Shell Script* action that runs the
    window on each file, ``$@``); returns the bundle. Written with :mod:`plistlib` on any
    platform, so the tests here check what macOS would read.

    Raises:
        FileManagerError: the bundle cannot be written.
    """
    import plistlib

    bundle = quick_action_dir(home)
    script = f'for f in "$@"; do {shlex.join([*command(), "--who"])} "$f" & done'
    info = {"NSServices": [{
        "NSMenuItem": {"default": LABEL},
        "NSMessage": "runWorkflowAsService",
        "NSRequiredContext": {"NSApplicationIdentifier": "com.apple.finder"},
        "NSSendFileTypes": ["public.item"],
    }]}
    wflow = {
        "AMApplicationBuild": "523", "AMApplicationVersion": "2.10", "AMDocumentVersion": "2",
        "actions": [{"action": {
            "AMAccepts": {"Container": "List", "Optional": True,
                          "Types": ["com.apple.cocoa.string"]},
            "AMActionVersion": "2.0.3", "AMApplication": ["Automator"],
            "AMProvides": {"Container": "List", "Types": ["com.apple.cocoa.string"]},
            "ActionBundlePath": "/System/Library/Automator/Run Shell Script.action",
            "ActionName": "Run Shell Script",
            "ActionParameters": {"COMMAND_STRING": script, "CheckedForUserDefaultShell": True,
                                 "inputMethod": 1, "shell": "/bin/sh", "source": ""},
            "BundleIdentifier": "com.apple.RunShellScript", "CFBundleVersion": "2.0.3",
            "Class Name": "RunShellScriptAction", "UUID": MARK,
        }}],
        "connectors": {},
        "workflowMetaData": {
            "serviceInputTypeIdentifier": "com.apple.Automator.fileSystemObject",
            "serviceOutputTypeIdentifier": "com.apple.Automator.nothing",
            "serviceProcessesInput": False,
            "workflowTypeIdentifier": "com.apple.Automator.servicesMenu",
        },
    }
    try:
        contents = bundle / "Contents"
        contents.mkdir(parents=True, exist_ok=True)
        (contents / "Info.plist").write_bytes(plistlib.dumps(info))
        (contents / "document.wflow").write_bytes(plistlib.dumps(wflow))
    except OSError as exc:
        raise FileManagerError(f"{bundle}: {exc}") from None
    return bundle


def remove_quick_action(home: Path | None = None) -> None:
    """Remove the Quick Action written by :func:`write_quick_action` (only ours: its
    ``document.wflow`` names :data:`MARK`).

    Raises:
        FileManagerError: it cannot be removed.
    """
    import shutil

    bundle = quick_action_dir(home)
    try:
        if MARK in (bundle / "Contents" / "document.wflow").read_bytes().decode(
                "utf-8", "replace"):
            shutil.rmtree(bundle)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise FileManagerError(f"{bundle}: {exc}") from None
