"""The engine room: the only code that creates, replaces or removes a file in a lock directory
(acquire, release, refresh, reclaim, force release, wait, end a holder, clean leftovers). See
docs/architecture.md."""
