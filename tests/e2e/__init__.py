"""End-to-end tests: the GUI, the watcher, the CLI and the API on one live workload."""
