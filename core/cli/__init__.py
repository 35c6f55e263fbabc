"""The command line room: the ``lockwarden`` parser (:mod:`core.cli.main`), its verbs and their
output. See docs/architecture.md."""
