"""Shared fixtures: fake LLM and embedder for unit tests, paths for the real stack."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from nemori_cli.domain import IncomingMessage
from nemori_cli.embed.fake import FakeEmbedder
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.llm.fake import FakeBackend
from nemori_cli.store.sqlite import SqliteStore
from tests.support.bench_world import locomo_path, shared  # noqa: F401 - the bench tests' fixtures, registered here
from tests.support.mcp import memories  # noqa: F401 - the MCP tests' fixture, registered here
from tests.support.view import served  # noqa: F401 - the view tests' fixture, registered here

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path) -> SqliteStore:
    """The store on each engine: a SQLite file, then a new database on the test PostgreSQL server (tests/support/postgres.py)."""
    if request.param == "sqlite":
        database = SqliteStore(tmp_path / "memory.db")
    else:
        from nemori_cli.store.engines import open_store
        from tests.support.postgres import new_database

        database = open_store(new_database())
    yield database
    database.close()


def sqlite_only(db, why: str) -> None:
    """Skip a test of the db fixture's PostgreSQL run that checks what only a SQLite file has."""
    if db.engine != "sqlite":
        pytest.skip(f"SQLite only: {why}")


def foreign_key_violations(db) -> list:
    """Rows pointing at rows that are not there: SQLite's check; PostgreSQL refuses such a write outright, so none can exist."""
    return db.query("PRAGMA foreign_key_check") if db.engine == "sqlite" else []


@pytest.fixture
def embedder() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture
def llm(backend) -> StructuredLLM:
    return StructuredLLM(backend)


def make_messages(
    n: int, *, start: datetime = datetime(2023, 5, 8, 13, 0), step_s: int = 60, topic: str = "topic", speakers=("Ann", "Bob")
):
    return [
        IncomingMessage(
            speaker=speakers[i % len(speakers)],
            content=f"{topic} message {i}",
            timestamp=start + timedelta(seconds=step_s * i),
            source_id=f"{topic}-{i}",
        )
        for i in range(n)
    ]


def locomo_file() -> Path:
    path = SHARED_DATA / "locomo" / "locomo-dev.json"
    if not path.is_file():
        pytest.skip(f"LoCoMo development data not found at {path} (clone with ../shared beside the project)")
    return path


# -- hypothesis: a quick profile for every run, a long one for a fault campaign ----
# HYPOTHESIS_PROFILE=campaign runs 1000 examples per property test; the default
# keeps tests/unit fast. No deadline: this machine is often busy, and a slow
# example is not a wrong one.

_HOSTILE = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
hypothesis_settings.register_profile("unit", max_examples=100, **_HOSTILE)
hypothesis_settings.register_profile("campaign", max_examples=1000, **_HOSTILE)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "unit"))
