"""What `nemori forget` does beside the Python API's forget (api.Memory.forget): the question's counts, and the scrub."""

from __future__ import annotations

from nemori_cli.config import Settings
from nemori_cli.services.read import Reading


def stored(settings: Settings) -> dict[str, int]:
    """How many rows of each kind the user has: what `forget user NAME` asks about before it deletes them."""
    from nemori_cli.store import forget as forget_sql

    with Reading(settings) as reading:
        return forget_sql.stored(reading.store, reading.user)


def scrub(settings: Settings) -> bool:
    """Deleted rows scrubbed out of the store (VACUUM); False when another process's read kept it from running."""
    from nemori_cli.store import forget as forget_sql

    with Reading(settings, write=True) as reading:
        return forget_sql.make_physical(reading.store, vacuum=True)
