"""The file managers' "What's using this?" entries (app/startup/file_managers.py): installed and
removed without touching anything else, validated where a validator applies, and the command
they name really opens the window on the file (docs/gui.md, "What's using this?")."""

from __future__ import annotations

import configparser
import shlex
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from app.startup import file_managers as fm

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux desktops")

THUNAR_OTHERS = """<?xml version="1.0" encoding="UTF-8"?>
<!-- the user's own actions -->
<actions>
<action><icon>utilities-terminal</icon><name>Open Terminal Here</name>
<unique-id>1234-1</unique-id><command>exo-open --launch TerminalEmulator</command>
<description>Example</description><patterns>*</patterns><directories/></action>
</actions>
"""


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path


@pytest.mark.parametrize("manager", fm.MANAGERS)
def test_install_and_remove_touch_only_lockwardens_entry(homes: Path, manager: str) -> None:
    uca = homes / "config" / "Thunar" / "uca.xml"
    if manager == "thunar":
        uca.parent.mkdir(parents=True)
        uca.write_text(THUNAR_OTHERS)
    assert not fm.installed(manager)
    path = fm.install(manager)
    assert fm.installed(manager)
    fm.install(manager)  # again: still one entry
    if manager == "thunar":
        root = ET.parse(path).getroot()
        ids = [a.findtext("unique-id") for a in root.findall("action")]
        assert ids == ["1234-1", fm.MARK]
    fm.remove(manager)
    assert not fm.installed(manager)
    if manager == "thunar":
        text = uca.read_text()
        assert "Open Terminal Here" in text and "the user's own actions" in text
        assert fm.MARK not in text
    else:
        assert not path.exists()


def test_a_thunar_file_that_does_not_parse_is_left_as_it_was(homes: Path) -> None:
    uca = homes / "config" / "Thunar" / "uca.xml"
    uca.parent.mkdir(parents=True)
    uca.write_text("<actions><action>half")
    with pytest.raises(fm.FileManagerError):
        fm.install("thunar")
    assert uca.read_text() == "<actions><action>half"


def test_a_file_of_the_same_name_not_written_by_lockwarden_is_not_removed(homes: Path) -> None:
    mine = homes / "data" / "nemo" / "actions" / f"{fm.MARK}.nemo_action"
    mine.parent.mkdir(parents=True)
    mine.write_text("[Nemo Action]\nName=the user's own\n")
    fm.remove("nemo")
    assert mine.exists()


@pytest.mark.skipif(shutil.which("desktop-file-validate") is None,
                    reason="desktop-file-validate (desktop-file-utils) is not installed")
def test_the_dolphin_service_menu_validates_but_for_kdes_own_service_type(homes: Path) -> None:
    path = fm.install("dolphin")
    out = subprocess.run(["desktop-file-validate", str(path)], capture_output=True, text=True,
                         check=False)
    errors = [line for line in out.stdout.splitlines() if "error:" in line]
    # KDE's service menus are Type=Service, a type the freedesktop validator does not know
    assert all("the type is \"Service\"" in e for e in errors), out.stdout


def _exec_of(manager: str, path: Path) -> list[str]:
    """The argument vector the file manager would run for ``path``."""
    entry = fm.install(manager)
    if manager == "nautilus":
        return ["sh", str(entry), str(path)]
    if manager == "thunar":
        action = next(a for a in ET.parse(entry).getroot().findall("action")
                      if a.findtext("unique-id") == fm.MARK)
        return shlex.split((action.findtext("command") or "").replace("%f", shlex.quote(
            str(path))))
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read(entry)
    section = "Desktop Action lockwardenWho" if manager == "dolphin" else "Nemo Action"
    line = parser[section]["Exec"]
    return shlex.split(line.replace("%f", shlex.quote(str(path))).replace(
        "%F", shlex.quote(str(path))))


@pytest.mark.parametrize("manager", fm.MANAGERS)
def test_the_command_each_entry_names_opens_the_window_on_the_file(homes: Path, manager: str,
                                                                   tmp_path: Path) -> None:
    f = tmp_path / "in use.txt"
    f.write_text("x")
    holder = subprocess.Popen([sys.executable, "-c", "import sys; f = open(sys.argv[1]); "
                               "print('ready', flush=True); sys.stdin.read()", str(f)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        env = {**__import__("os").environ, "LOCKWARDEN_WHO_ONCE": "1",
               "QT_QPA_PLATFORM": "offscreen"}
        out = subprocess.run(_exec_of(manager, f), capture_output=True, text=True, env=env,
                             timeout=120, cwd=tmp_path, check=False)
    finally:
        holder.kill()
        holder.wait()
    assert out.returncode == 0, out.stderr
    assert f"1 process uses {f}." in out.stdout


def test_settings_install_and_remove_the_entries(make_app, qtbot, lockdir: Path,
                                                 homes: Path) -> None:
    """Off by default; Settings' box installs every file manager's entry and removes them."""
    lw = make_app([lockdir])
    lw.start(show_window=True)
    dlg = lw.ops.open_settings()
    assert not dlg.file_menus.isChecked()
    dlg.file_menus.setChecked(True)
    dlg.accept()
    qtbot.waitUntil(lambda: all(fm.installed(m) for m in fm.MANAGERS), timeout=10_000)
    dlg = lw.ops.open_settings()
    assert dlg.file_menus.isChecked()
    dlg.file_menus.setChecked(False)
    dlg.accept()
    qtbot.waitUntil(lambda: not any(fm.installed(m) for m in fm.MANAGERS), timeout=10_000)


def test_the_macos_quick_action_is_a_service_workflow_running_the_window(tmp_path: Path) -> None:
    """Built here, run on macOS: the two property lists Finder and Automator read."""
    import plistlib

    bundle = fm.write_quick_action(tmp_path)
    assert bundle.name == "What's using this?.workflow"
    info = plistlib.loads((bundle / "Contents" / "Info.plist").read_bytes())
    [service] = info["NSServices"]
    assert service["NSMenuItem"]["default"] == "What's using this?"
    assert service["NSSendFileTypes"] == ["public.item"]
    wflow = plistlib.loads((bundle / "Contents" / "document.wflow").read_bytes())
    [step] = wflow["actions"]
    script = step["action"]["ActionParameters"]["COMMAND_STRING"]
    assert shlex.join([*fm.command(), "--who"]) in script and '"$f"' in script
    assert wflow["workflowMetaData"]["workflowTypeIdentifier"] == \
        "com.apple.Automator.servicesMenu"
    fm.remove_quick_action(tmp_path)
    assert not bundle.exists()
