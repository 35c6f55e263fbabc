"""The fleet room: hosts publish their watched locks, a heartbeat and the liveness of the PIDs
those locks name to one PostgreSQL database, and any host judges a lock recorded on another
host by that host's report (docs/fleet.md). See docs/architecture.md."""
