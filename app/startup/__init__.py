"""Starting the app: one instance per user, the display check, start at login, the self-test, the
demo, the garbage collector's schedule."""
