"""``python -m app``: start the Lockwarden desktop app."""

import sys

from app.main import main

sys.exit(main())
