"""The app's bridges to core: the watcher's changes into the GUI thread (``WatchBridge``), the
engine's actions on worker threads (``LockActions``), the configuration store, the lock servers'
poller, the viewer's audit logs."""
