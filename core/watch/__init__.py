"""The watch room: listing watched directories and project trees and keeping their verdicts live
(scan, inventory, observers, the watcher thread). See docs/architecture.md."""
