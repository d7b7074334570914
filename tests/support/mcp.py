"""The MCP server's memories for the tests, on SQLite and PostgreSQL, and a client session run over it in memory.

``memories`` is a fixture, registered for every test module by tests/conftest.py; the test modules that use it
skip themselves where the ``mcp`` package is missing.
"""

from __future__ import annotations

import asyncio

import pytest

from tests.unit.fake_ingest import conversation, isolate, use_fake_answers, use_fakes


@pytest.fixture(params=["sqlite", "postgresql"])
def memories(request, monkeypatch, tmp_path):
    """The server's memories in a SQLite file, then in a new database on the test PostgreSQL server."""
    from nemori_cli.mcp_server.server import Memories

    isolate(monkeypatch, tmp_path)
    use_fakes(monkeypatch)
    use_fake_answers(monkeypatch)
    if request.param == "sqlite":
        target = str(tmp_path / "m.db")
    else:
        from tests.support.postgres import new_database

        target = new_database()
    made = Memories(target, "ann", any_user=False, model=None, embedder=None, answer_model=None)
    yield made
    made.close()


def run_client(memories, body):
    from mcp import Client

    from nemori_cli.mcp_server.server import build

    async def go():
        async with Client(build(memories)) as client:
            return await body(client)

    return asyncio.run(go())


def some_messages(n_topics: int = 2):
    return [
        {"speaker": r["speaker"], "content": r["content"], "timestamp": r["timestamp"], "id": r["id"]}
        for r in conversation()[: 4 * n_topics]
    ]
