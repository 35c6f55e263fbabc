"""The README's screenshots (``python -m app.shots.screenshots``), main window, dialogs and
history."""
