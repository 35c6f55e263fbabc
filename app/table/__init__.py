"""The lock table: the model and its columns, the sort/filter proxy, row order, the view, the
detail pane, and the words a row is shown in (docs/gui.md, "Window")."""
