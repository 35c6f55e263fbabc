"""Redis locks written by redis-py's ``Lock`` and python-redis-lock (docs/remote.md)."""
