"""The verdicts room: from one lock path to one verdict (read, parse, liveness, the judges of lock
files and of developer tools' locks). See docs/architecture.md."""
