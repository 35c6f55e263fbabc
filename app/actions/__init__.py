"""What the window and the tray offer (docs/gui.md, "Actions"): the commands, ending a holder,
settings applied, Undo of a force release."""
