"""The fleet database's failures as one exception with a kind (docs/fleet.md, "Faults"): what
a caller says and does about them never depends on the driver's text."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.config.servers import redact_url

if TYPE_CHECKING:
    from core.config.model import FleetSpec


class FleetError(Exception):
    """The fleet database could not be used: ``kind`` is ``no_driver``, ``unreachable`` (no
    connection: down, unreachable, or the login refused), ``refused`` (privileges, row-level
    security: a host name not bound to this role), ``no_schema`` (the tables are missing or
    older than this Lockwarden: the database's owner runs ``lockwarden fleet init``),
    ``timed_out`` (no complete answer within the deadline: :mod:`core.fleet.link`),
    ``stopped`` (the operation was abandoned: the program is stopping) or ``failed``; the
    message names the database without its password."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind



def fleet_error(spec: FleetSpec, exc: Exception) -> FleetError:
    """A psycopg error as a :class:`FleetError` naming the database (never its password)."""
    import psycopg

    where = redact_url(spec.dsn)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return FleetError("refused", f"fleet database {where}: refused: {text}")
    if isinstance(exc, psycopg.OperationalError):  # libpq gives no SQLSTATE for a failed
        # login: a wrong password is told apart only by libpq's text, which is never parsed
        return FleetError("unreachable", f"fleet database {where}: {text}")
    return FleetError("failed", f"fleet database {where}: {text}")
