"""Lockwarden desktop app (PySide6). Talks to files only through :mod:`core`."""
