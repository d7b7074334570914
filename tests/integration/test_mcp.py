"""`nemori mcp` as an agent meets it: the SDK's own client over stdio, a real database, the tiny model and the real embedder."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

MESSAGES = [
    {"speaker": "Priya", "content": "I live in Lisbon, near the river.", "timestamp": "2024-03-02T10:00:00", "id": "m1"},
    {"speaker": "Sam", "content": "Lisbon suits you. Still climbing on Thursdays?", "timestamp": "2024-03-02T10:01:00", "id": "m2"},
    {"speaker": "Priya", "content": "Yes, at the gym by the station, with Maya.", "timestamp": "2024-03-02T10:02:00", "id": "m3"},
    {
        "speaker": "Priya",
        "content": "Big news: I moved to Berlin last week for the new job.",
        "timestamp": "2024-06-10T18:00:00",
        "id": "m4",
    },
    {"speaker": "Sam", "content": "Berlin! How is the flat?", "timestamp": "2024-06-10T18:02:00", "id": "m5"},
]


def _server(db: Path):
    from mcp import StdioServerParameters

    env = {k: v for k, v in os.environ.items() if not k.startswith("NEMORI_")}
    env["NEMORI_CACHE_DIR"] = os.environ.get("NEMORI_CACHE_DIR", "")  # the suite's model cache, if it set one
    env = {k: v for k, v in env.items() if v}
    return StdioServerParameters(
        command=sys.executable, args=["-m", "nemori_cli", "mcp", "--db", str(db), "--user", "priya", "--model", "tiny"], env=env
    )


async def _session(db: Path, body):
    from mcp import Client

    async with Client(_server(db)) as client:  # the SDK's client, the server a subprocess on its stdin/stdout
        return await body(client)


def _stored_messages(db: Path, user: str = "priya") -> int:
    from nemori_cli import Memory

    with Memory(db, user=user) as memory:
        return memory.stats().get("messages", 0)


def test_an_agent_remembers_recalls_asks_and_forgets_over_stdio(tmp_path):
    db = tmp_path / "agent.db"

    async def body(session):
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == {"remember", "recall", "ask", "forget"}
        assert tools["recall"].annotations.read_only_hint is True
        assert tools["forget"].annotations.destructive_hint is True
        assert tools["remember"].annotations.destructive_hint is False and tools["remember"].annotations.idempotent_hint is True
        assert all(t.output_schema and t.input_schema["type"] == "object" for t in tools.values())

        remembered = await session.call_tool("remember", {"messages": MESSAGES})
        assert not remembered.is_error, remembered.content
        assert remembered.structured_content["added"] == 5 and remembered.structured_content["pending"] == 0
        again = await session.call_tool("remember", {"messages": MESSAGES})
        assert again.structured_content["added"] == 0  # idempotent, as annotated

        recalled = await session.call_tool("recall", {"query": "Berlin", "limit": 5})
        assert not recalled.is_error
        memories = recalled.structured_content["memories"]
        assert memories and any("Berlin" in m["text"] for m in memories)

        asked = await session.call_tool("ask", {"question": "Where did Priya move to?"})
        assert not asked.is_error
        assert asked.structured_content["answer"]  # the tiny model's words are not judged here, only that it answered

        # A call that does not fit the schema is an MCP error, and writes nothing.
        before = _stored_messages(db)
        bad = await session.call_tool("remember", {"messages": [{"speaker": "Priya", "content": "no time given"}]})
        assert bad.is_error
        bad_time = await session.call_tool("remember", {"messages": [{"speaker": "Priya", "content": "x", "timestamp": "yesterday"}]})
        assert bad_time.is_error and "timestamp" in bad_time.content[0].text
        other_user = await session.call_tool("recall", {"query": "Berlin", "user": "sam"})
        assert other_user.is_error and "serves user 'priya' only" in other_user.content[0].text
        assert _stored_messages(db) == before

        episode = next(m for m in memories if m["kind"] in ("episode", "message"))
        kind = "episode" if episode["kind"] == "episode" else None
        if kind is None:  # the budget profile returns raw turns: forget the episode a fact came from instead
            from nemori_cli import Memory

            with Memory(db, user="priya") as memory:
                target = memory.episodes()[-1].id
        else:
            target = episode["id"]
        forgotten = await session.call_tool("forget", {"kind": "episode", "id": target})
        assert not forgotten.is_error, forgotten.content
        assert forgotten.structured_content["deleted"]["episodes"] >= 1
        missing = await session.call_tool("forget", {"kind": "episode", "id": target})
        assert missing.is_error
        return json.dumps(remembered.structured_content)

    asyncio.run(_session(db, body))
    assert _stored_messages(db) < 5
