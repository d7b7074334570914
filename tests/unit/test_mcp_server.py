"""The MCP server's tools through the SDK's in-memory client, with the fake LLM and embedder (tests/integration/test_mcp.py runs it over stdio with real models)."""

from __future__ import annotations

import pytest

from tests.support.mcp import run_client, some_messages
from tests.unit.fake_ingest import isolate

pytest.importorskip("mcp")


def test_tools_have_schemas_and_the_spec_annotations(memories):
    async def body(client):
        return {t.name: t for t in (await client.list_tools()).tools}

    tools = run_client(memories, body)
    assert set(tools) == {"remember", "recall", "ask", "forget"}
    hints = {
        name: (t.annotations.read_only_hint, t.annotations.destructive_hint, t.annotations.idempotent_hint) for name, t in tools.items()
    }
    assert hints == {
        "remember": (False, False, True),
        "recall": (True, False, True),
        "ask": (True, False, True),
        "forget": (False, True, True),
    }
    assert tools["remember"].input_schema["required"] == ["messages"]
    assert set(tools["recall"].output_schema["properties"]) == {"query", "memories"}
    assert tools["forget"].input_schema["properties"]["kind"]["enum"] == ["episode", "fact", "note"]


def test_remember_recall_ask_forget(memories):
    async def body(client):
        remembered = await client.call_tool("remember", {"messages": some_messages()})
        recalled = await client.call_tool("recall", {"query": "kayak", "limit": 3})
        asked = await client.call_tool("ask", {"question": "What about the kayak?", "today": "2023-06-01"})
        episode = memories.of(None).episodes()[0].id
        forgotten = await client.call_tool("forget", {"kind": "episode", "id": episode})
        again = await client.call_tool("forget", {"kind": "episode", "id": episode})
        return remembered, recalled, asked, forgotten, again

    remembered, recalled, asked, forgotten, again = run_client(memories, body)
    assert not remembered.is_error and remembered.structured_content["added"] == 8 and remembered.structured_content["episodes"] == 2
    assert len(recalled.structured_content["memories"]) <= 3 and "kayak" in recalled.structured_content["memories"][0]["text"]
    assert asked.structured_content["answer"] == "the kayak" and asked.structured_content["failed"] is False
    assert forgotten.structured_content["deleted"]["messages"] == 4
    assert again.is_error and "no episode" in again.content[0].text


@pytest.mark.parametrize(
    ("tool", "arguments", "said"),
    [
        ("remember", {"messages": [{"speaker": "Ann", "content": "no time"}]}, "timestamp"),
        ("remember", {"messages": [{"speaker": "Ann", "content": "x", "timestamp": "soon"}]}, "is not a date-time"),
        ("remember", {"messages": []}, "messages"),
        ("remember", {"messages": "not a list"}, "messages"),
        ("recall", {"query": ""}, "query"),
        ("recall", {"query": "kayak", "user": "bob"}, "serves user 'ann' only"),
        ("forget", {"kind": "everything", "id": 1}, "kind"),
        ("forget", {"kind": "fact", "id": 0}, "id"),
    ],
)
def test_a_bad_call_is_an_mcp_error_and_writes_nothing(memories, tool, arguments, said):
    async def body(client):
        await client.call_tool("remember", {"messages": some_messages(1)})
        before = memories.of(None).stats()
        result = await client.call_tool(tool, arguments)
        return before, result

    before, result = run_client(memories, body)
    assert result.is_error
    assert said in result.content[0].text
    assert memories.of(None).stats() == before


def test_any_user_lets_a_call_choose_whose_memory(memories, tmp_path):
    from nemori_cli.mcp_server.server import Memories

    shared = Memories(memories.db_path, "ann", any_user=True, model=None, embedder=None, answer_model=None)

    async def body(client):
        await client.call_tool("remember", {"messages": some_messages(1), "user": "bob"})
        return await client.call_tool("recall", {"query": "kayak"}), await client.call_tool("recall", {"query": "kayak", "user": "bob"})

    try:
        mine, bobs = run_client(shared, body)
    finally:
        shared.close()
    assert mine.structured_content["memories"] == []
    assert bobs.structured_content["memories"]


def test_nemori_mcp_refuses_a_database_it_could_never_use_before_serving(monkeypatch, tmp_path):
    import apsw

    from nemori_cli.errors import StoreError
    from tests.unit.fake_ingest import nemori

    isolate(monkeypatch, tmp_path)
    other = tmp_path / "other-app.sqlite"
    conn = apsw.Connection(str(other))
    conn.execute("CREATE TABLE invoices(id INTEGER PRIMARY KEY, total REAL)")
    conn.close()
    before = other.read_bytes()
    for db in (other, tmp_path):
        result = nemori("mcp", "--db", db)  # in-process: the NemoriError app.main would print as one line, exit 4
        assert isinstance(result.exception, StoreError) and result.exception.exit_code == 4, result.output
        assert "\n" not in result.exception.message
    assert other.read_bytes() == before
