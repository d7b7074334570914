"""The time a row is stamped with, alike on both engines: UTC, ISO 8601 to the second."""

from __future__ import annotations

from datetime import UTC, datetime


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
