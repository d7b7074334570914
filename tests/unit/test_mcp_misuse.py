"""The MCP server under misuse (issue 35): generated bad calls each end in a result or an MCP error, the server stays up, nothing is written.

Each tool gets wrong types for every argument, missing and unknown arguments,
1 MB strings, negative, zero, huge and unknown ids, another user's name, and
dates that are not dates: more than 50 calls, through the SDK's client on one
session, one after another. After every call the memory's counts are what they
were, and a good call still works at the end.
"""

from __future__ import annotations

import pytest

from tests.support.mcp import run_client, some_messages
from tests.support.mcp_bad_calls import bad_calls

pytest.importorskip("mcp")


def test_generated_bad_calls_end_in_errors_the_server_stays_up_and_nothing_is_written(memories):
    calls = bad_calls()
    assert len(calls) >= 50

    async def body(client):
        await client.call_tool("remember", {"messages": some_messages(1)})
        before = memories.of(None).stats()
        outcomes = []
        for tool, arguments in calls:
            try:
                result = await client.call_tool(tool, arguments)
                outcomes.append(("error" if result.is_error else "ok", tool, arguments))
            except Exception as e:  # the SDK raises for a call it refuses itself (an unknown tool): still an answer
                outcomes.append(("raised " + type(e).__name__, tool, arguments))
            assert memories.of(None).stats() == before, f"{tool} {str(arguments)[:200]} changed the memory"
        alive = await client.call_tool("recall", {"query": "kayak", "limit": 2})
        return outcomes, alive

    outcomes, alive = run_client(memories, body)
    assert not alive.is_error and alive.structured_content["memories"]  # the server is up and still answers
    writes_that_passed = [o for o in outcomes if o[0] == "ok" and o[1] in ("remember", "forget")]
    assert writes_that_passed == []
    unknown_ids = [o for o in outcomes if o[1] == "forget" and o[2].get("id") == 987654 and o[2].get("kind") in ("episode", "fact", "note")]
    assert unknown_ids and all(o[0] == "error" for o in unknown_ids)


def test_an_id_too_large_for_the_store_is_refused_in_one_line_everywhere(tmp_path, monkeypatch):
    """2**70 is no id: the CLI says so as a usage error, the API as a ConfigError or 'no episode', never an OverflowError."""
    from nemori_cli.api import Memory
    from nemori_cli.errors import ConfigError, StoreError
    from tests.unit.fake_ingest import conversation, isolate, nemori, use_fakes, write_jsonl

    isolate(monkeypatch, tmp_path)
    use_fakes(monkeypatch)
    db = tmp_path / "m.db"
    assert nemori("ingest", write_jsonl(tmp_path / "c.jsonl", conversation()), "--db", db).exit_code == 0
    huge = str(2**70)
    for args in (["forget", "episode", huge], ["forget", "fact", huge], ["inspect", "episode", huge], ["inspect", "note", huge]):
        result = nemori(*args, "--db", db)
        assert result.exit_code == 2 and "less than or equal to" in result.output, (args, result.output)
    with Memory(db) as memory:
        with pytest.raises(ConfigError, match="at most"):
            memory.forget("episode", 2**70)
        with pytest.raises(StoreError, match="no episode"):
            memory.episode(2**70)
