"""The history room: what the watcher saw, who held each lock, when and for how long
(docs/history.md)."""
