"""Bad MCP tool calls, generated: what tests/unit/test_mcp_misuse.py sends through the in-memory client and scripts/fault_surfaces.py over stdio.

Wrong types for every argument, missing and unknown arguments, 1 MB strings,
negative, zero, huge and unknown ids, another user's name, dates that are
not dates, and a tool that does not exist.
"""

from __future__ import annotations

BIG = "x" * 1_000_000
WRONG = [None, 7, -1.5, True, [], {}, ["a", 1], {"nested": {"deeper": [None]}}]


def bad_calls() -> list[tuple[str, dict]]:
    calls: list[tuple[str, dict]] = []
    good_message = {"speaker": "Ann", "content": "hello", "timestamp": "2024-01-01T10:00:00"}
    for value in WRONG + ["not a list", BIG]:
        calls.append(("remember", {"messages": value}))
    for field in ("speaker", "content", "timestamp"):
        for value in [None, 5, [], {}]:
            calls.append(("remember", {"messages": [{**good_message, field: value}]}))
        calls.append(("remember", {"messages": [{k: v for k, v in good_message.items() if k != field}]}))
    calls += [
        ("remember", {"messages": [{**good_message, "timestamp": "yesterday-ish"}]}),
        ("remember", {"messages": [{**good_message, "timestamp": BIG}]}),
        ("remember", {"messages": [good_message], "user": "mallory"}),
        ("remember", {"messages": [good_message], "build": "sometime"}),
        ("remember", {}),
    ]
    for value in WRONG + [""]:
        calls.append(("recall", {"query": value}))
        calls.append(("ask", {"question": value}))
    calls += [
        ("recall", {"query": "kayak", "limit": 0}),
        ("recall", {"query": "kayak", "limit": -3}),
        ("recall", {"query": "kayak", "limit": 10**9}),
        ("recall", {"query": "kayak", "user": "mallory"}),
        ("ask", {"question": "what?", "today": "not a day"}),
        ("ask", {"question": "what?", "user": "mallory"}),
        ("recall", {}),
        ("ask", {}),
    ]
    for kind in ("episode", "fact", "note", "everything", None, 3):
        for item in (0, -1, 2**63, 987654, "1", None, 1.5):
            calls.append(("forget", {"kind": kind, "id": item}))
    calls += [("forget", {"kind": "episode"}), ("forget", {"id": 1}), ("forget", {}), ("nonexistent_tool", {"a": 1})]
    return calls
