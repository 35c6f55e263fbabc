"""History in the app (docs/history.md): the recorder fed by the watcher, the History pane and its
timeline, "Notify me when free"."""
