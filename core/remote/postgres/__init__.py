"""PostgreSQL's locks: advisory locks and the Liquibase lock table (docs/remote.md)."""
