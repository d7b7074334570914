"""`nemori ingest --dry-run`: what an ingest would do and cost, with nothing written and no model loaded.

The input has already been read and validated by the same code as a real
ingest. What would be new and what it would cost is found by
services/dry_run.py (the store only looked at, a missing one not created;
no model file or embedder opened); this module renders it.
"""

from __future__ import annotations

from nemori_cli.cli.render import console, print_json
from nemori_cli.pipeline.built import clock
from nemori_cli.services import dry_run

_RATES_SOURCE = {
    "this database": "measured from this database's earlier ingests with this model",
    "nemori doctor": "measured by `nemori doctor` on this machine",
    "built-in": "rough built-in figures for this preset; `nemori doctor` or an earlier ingest replaces them",
    "generic default": "a conservative default (nothing measured for this model); `nemori doctor` measures it",
}


# The reading and the arithmetic are services/dry_run.py's; this module says what they found.
plan = dry_run.plan
build_seconds = dry_run.build_seconds


def _in_conversations(data: dict) -> str:
    """' in 3 conversations (12 left out)' for an export; '' for a plain JSONL file of one conversation."""
    n, left = data.get("conversations", 1), sum(data.get("left_out", {}).values())
    text = f" in {n} conversation{'s' if n != 1 else ''}" if n != 1 or data.get("format", "jsonl") != "jsonl" else ""
    return text + (f" ({left} left out)" if left else "")


def render(data: dict, source: str, json_out: bool) -> None:
    if json_out:
        print_json({"source": source, **data})
        return
    calls = ", ".join(f"{stage} {n}" for stage, n in data["calls"].items())
    where = data["db"] if data["db_exists"] else f"{data['db']} (does not exist yet)"
    lines = [
        f"dry run: nothing written, no model loaded; database {where}, user {data['user']}",
        f"read {data['read']} messages{_in_conversations(data)} from {source}: {data['new']} new, {data['already_stored']} already stored"
        + (f" ({data['changed']} with different content, kept as stored)" if data["changed"] else "")
        + "; "
        f"{data['pending']} already pending",
        f"to process: {data['messages']} messages, {data['characters']:,} characters, "
        + (
            f"a note each ({data['method']})"
            if data["method"] == "--memory amem"
            else f"in about {data['windows']} windows and {data['episodes']} episodes ({data['method']})"
        ),
        f"LLM calls: about {data['total_calls']} ({calls})" if data["total_calls"] else "LLM calls: none",
        f"tokens: about {data['prompt_tokens']:,} prompt + {data['output_tokens']:,} output; "
        f"about {data['minutes']:.{1 if data['minutes'] >= 1 else 2}f} minutes of LLM time with model {data['model']}",
        f"rates: {data['rates']['source']} ({_RATES_SOURCE.get(data['rates']['source'], 'saved rates')})",
        f"time: searchable after about {clock(data['searchable_seconds'])} (`--build later`), built after about "
        f"{clock(data['searchable_seconds'] + data['build_seconds'])}",
    ]
    if "max_tokens" in data:
        lines.append(
            f"--max-tokens {data['max_tokens']:,}: would stop after about {data['messages_within_budget']} "
            f"of the {data['messages']} messages"
        )
    out = console()
    for line in lines:
        out.print(line, markup=False, highlight=False, soft_wrap=True)  # no hard wraps in piped output
