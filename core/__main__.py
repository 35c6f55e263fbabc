"""``python -m core``: the engine's ``lockwarden`` command line, every verb but ``gui`` (see
:mod:`core.cli.main`; ``core`` never imports the app, so ``gui`` is added only by the ``lockwarden``
console script, ``app.console:main``, also ``python -m app.console``)."""

from __future__ import annotations

import sys

from core.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
