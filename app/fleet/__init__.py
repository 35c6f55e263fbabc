"""The fleet in the app (docs/fleet.md): publishing and reading in a worker thread, the Hosts panel
and host filter."""
