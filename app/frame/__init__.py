"""The main window's parts: its actions and shortcuts, what it remembers between runs, the status
line and the Problems panel."""
