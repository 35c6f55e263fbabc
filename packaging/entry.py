"""Entry point of the frozen Lockwarden executable (PyInstaller, ``packaging/lockwarden.spec``).

One executable serves the desktop app and the command line (docs/DESIGN.md "Layout";
docs/packaging.md):

- no arguments, ``gui [APP OPTIONS]``, or app options first (``--minimized``, ``--demo``,
  ``--config PATH``, ``--demo-helper ROLE DIR``: what the autostart entry and the demo use
  to re-launch the frozen executable) -> the app, :func:`app.main.main`;
- ``--self-test`` -> :func:`app.startup.selftest.main` (Qt offscreen, icons, a lock through the
engine,
  the audit log);
- anything else (``--version``, ``--help``, CLI verbs) -> :func:`app.console.main`.

On Windows the spec builds this script twice: ``lockwarden.exe`` (windowed: no console, so
``sys.stdout`` may be ``None``) and ``lockwarden-cli.exe`` (console, for scripts).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

#: Options that belong to the app (``app.main.build_parser``), not to the CLI.
APP_OPTIONS: frozenset[str] = frozenset({"--minimized", "--demo", "--config", "--demo-helper",
                                         "--who"})


def _ensure_streams() -> None:
    """A windowed Windows executable has no stdout/stderr (``None``): give it sinks so that
    ``print`` (argparse errors, the self-test's lines) never raises."""
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115


def route(argv: Sequence[str]) -> str:
    """Which part handles ``argv`` (without the program name): ``"app"``, ``"selftest"`` or
    ``"cli"``. Pure function, so the dispatch is testable without starting anything."""
    if not argv:
        return "app"
    first = argv[0]
    if first == "--self-test":
        return "selftest"
    if first == "gui" or first in APP_OPTIONS or first.startswith("--config="):
        return "app"
    return "cli"


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch ``argv`` (default ``sys.argv[1:]``) and return the exit status."""
    _ensure_streams()
    args = list(sys.argv[1:] if argv is None else argv)
    where = route(args)
    if where == "selftest":
        from app.startup.selftest import main as selftest_main

        return selftest_main(args[1:])
    if where == "app":
        from app.main import main as app_main

        return int(app_main(args[1:] if args and args[0] == "gui" else args) or 0)
    from app.console import main as cli_main

    return int(cli_main(args) or 0)


if __name__ == "__main__":
    if sys.platform == "darwin" or sys.platform.startswith("win"):
        import multiprocessing

        multiprocessing.freeze_support()
    sys.exit(main())
