"""The kernel room: file locks only the kernel knows (flock, fcntl, OFD; Restart Manager on
Windows), the well-known anchors and the holder's pin. See docs/architecture.md."""
