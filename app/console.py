"""The ``lockwarden`` console script: the engine's command line (:func:`core.cli.main.main`) plus
the ``gui`` verb, which starts the desktop app (also ``python -m app.console``).

The verb is added from the app side because ``core`` never imports :mod:`app`, not even lazily
(docs/DESIGN.md, "Layout"). Its options are the app's own (``app/main.py``,
:func:`app.main.build_parser`): ``--config PATH``, ``--demo``, ``--minimized`` (and the hidden
``--demo-helper ROLE DIR`` the demo re-launches with). :mod:`app.main` is imported only when
``gui`` runs, so ``lockwarden status`` never imports PySide6 (docs/cli.md, "Start-up time"),
and every other verb works with PySide6 missing; ``gui`` then says so in one line (exit 3).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from core.cli.args import path as path_arg
from core.cli.common import EXIT_IO, CliError, Out
from core.cli.main import Verb
from core.cli.main import main as cli_main

_QT_PACKAGES = ("PySide6", "shiboken6")
"""Packages whose ImportError means "Qt is not installed or broken", not an app bug."""

_GUI_EXAMPLE = """examples:
  lockwarden gui
  lockwarden gui --minimized                    # start in the tray, no window
  lockwarden gui --demo                         # a temporary directory with demo locks
  lockwarden gui --config ~/lockwarden-test.toml"""


def add_gui_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``lockwarden gui``: those :func:`app.main.build_parser` accepts (a test
    in tests/core/cli/test_cli.py keeps the two lists equal)."""
    p.add_argument("--config", type=path_arg, metavar="PATH",
                   help="configuration file (TOML); default: the per-user config file")
    p.add_argument("--demo", action="store_true",
                   help="watch a temporary directory where demo processes take locks")
    p.add_argument("--minimized", action="store_true", help="start in the tray, no window")
    p.add_argument("--demo-helper", nargs=2, metavar=("ROLE", "DIR"), help=argparse.SUPPRESS)
    p.add_argument("--who", type=path_arg, metavar="PATH",
                   help="open \"What's using this?\" on a file or folder")


def app_argv(args: argparse.Namespace) -> list[str]:
    """The parsed ``gui`` options as the argument list of :func:`app.main.main`."""
    argv: list[str] = []
    if args.config is not None:
        argv += ["--config", str(args.config)]
    if args.demo:
        argv.append("--demo")
    if args.minimized:
        argv.append("--minimized")
    if args.demo_helper is not None:
        argv += ["--demo-helper", *map(str, args.demo_helper)]
    if args.who is not None:
        argv += ["--who", str(args.who)]
    return argv


def run_gui(args: argparse.Namespace, out: Out) -> int:
    """``gui``: start the desktop app (:func:`app.main.main`) and return its exit status.

    Raises:
        CliError: PySide6 is not installed or cannot be loaded (exit 3, one line).
        ImportError: the app misses one of its own modules (a bug: :func:`core.cli.main.main`
            reports it as an internal error, exit 4).
    """
    import importlib.util

    try:
        qt = importlib.util.find_spec("PySide6")
    except (ImportError, ValueError):
        qt = None
    if qt is None:
        raise CliError("gui: the desktop app is not available: PySide6 is not installed "
                       "(the command-line verbs work without it)", EXIT_IO)
    from app.main import main as gui_main

    try:
        return int(gui_main(app_argv(args)) or 0)
    except ImportError as exc:  # a broken Qt install: PySide6 is imported inside gui_main
        if (exc.name or "").split(".")[0] not in _QT_PACKAGES:
            raise  # a bug of the app, not a missing Qt: exit 4 (traceback with --debug)
        raise CliError(f"gui: the desktop app is not available: {exc}", EXIT_IO) from None


GUI_VERB = Verb(
    "gui", "start the desktop app (tray icon and window)", _GUI_EXAMPLE,
    add_gui_arguments, run_gui, json=False, via="cli",
)
"""The ``gui`` verb handed to :func:`core.cli.main.main`."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lockwarden`` console script: :func:`core.cli.main.main` with the
    ``gui`` verb; returns the exit code (never raises for bad input). For ``gui``, hashlib is
    kept off OpenSSL before the CLI imports it (:func:`app.main.hash_without_openssl`)."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["gui"]:
        try:
            from app.main import hash_without_openssl
        except ImportError:  # run_gui says in one line why the app cannot start
            pass
        else:
            hash_without_openssl()
    return cli_main(words, extra_verbs=(GUI_VERB,))


if __name__ == "__main__":
    sys.exit(main())
