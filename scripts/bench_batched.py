"""Written tokens per second at 1, 2, 4 and 8 sequences decoded together (llm/batched.py).

The prompts are nemori's own narration prompts over groups of consecutive
LoCoMo messages (conv-26, sessions 1-5), so the lengths and the grammar are
those of an ingest. Every prompt is generated at every width, in chunks of
that width; the writing time is separated from the reading time (prefill), so
"written tokens per second" is what the width changes. The one-at-a-time
path of today (`LlamaCppBackend.chat`, llama-cpp-python's
create_chat_completion) runs the same prompts first, as the baseline, and the
outputs at each width are compared with its outputs.

    python scripts/bench_batched.py --model small --prompts 8 --widths 1,2,4,8 --out docs/bench/batched-small.json
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nemori_cli import (
    deps,  # noqa: E402
    stages,  # noqa: E402
)
from nemori_cli.config import Settings  # noqa: E402
from nemori_cli.importers import formats  # noqa: E402
from nemori_cli.importers.selection import Selection  # noqa: E402
from nemori_cli.llm.batched import Request  # noqa: E402
from nemori_cli.llm.schema import decoder_safe  # noqa: E402
from nemori_cli.prompts import narrative  # noqa: E402


def prompts(count: int, size: int) -> list[list[dict]]:
    from nemori_cli.domain import Message

    source = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
    with source.open("rb") as f:
        imported = formats.read("locomo", f, str(source), selection=Selection(()), sample="conv-26", sessions="1-5")
    rows = [
        Message(
            id=i,
            user="bench",
            key=f"k{i}",
            speaker=m.speaker,
            content=m.content,
            timestamp=m.timestamp,
            source_id=m.source_id,
            session=m.session,
        )
        for i, m in enumerate(imported.messages, 1)
    ]
    groups = [rows[i : i + size] for i in range(0, len(rows), size)][:count]
    return [narrative.render(g) for g in groups]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="small")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=6, help="messages per narrated group")
    parser.add_argument("--widths", default="1,2,4,8")
    parser.add_argument("--unified", action="store_true", help="one KV pool for all sequences instead of a stream each")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    widths = [int(w) for w in args.widths.split(",")]

    settings = Settings.from_env(db="/tmp/bench-batched.db", user="bench", model=args.model)
    backend = deps.build_llm(settings).backend
    schema = decoder_safe(narrative.Narrative.model_json_schema())
    cap = stages.NARRATION.max_tokens
    chats = prompts(args.prompts, args.group)

    # The baseline: one at a time, as the pipeline calls today.
    began = time.perf_counter()
    baseline = [backend.chat(c, schema=schema, max_tokens=cap, temperature=0.0) for c in chats]
    one_at_a_time = time.perf_counter() - began
    written = sum(r.completion_tokens for r in baseline)
    record = {
        "command": "python scripts/bench_batched.py " + " ".join(sys.argv[1:]),
        "model": args.model,
        "machine": f"{platform.machine()}, {len(__import__('os').sched_getaffinity(0))} cores",
        "prompts": len(chats),
        "kv": "unified" if args.unified else "a stream per sequence",
        "prompt_tokens": sum(r.prompt_tokens for r in baseline),
        "baseline_valid_json": sum(_parses(r.text) for r in baseline),
        "baseline": {"seconds": round(one_at_a_time, 2), "written": written, "tokens_per_s_end_to_end": round(written / one_at_a_time, 2)},
        "widths": [],
    }
    print(f"one at a time (create_chat_completion): {one_at_a_time:.1f} s, {written} tokens written", flush=True)

    from nemori_cli.llm.batched import BatchedDecoder

    grammar = backend._grammar(schema)
    tokenized = [backend._prompt(c) for c in chats]
    for width in widths:
        decoder = BatchedDecoder(
            backend.llama, sequences=width, n_ctx_per_sequence=backend.n_ctx, n_threads=backend._threads, unified=args.unified
        )
        texts: list[str] = []
        prefill = decode = 0.0
        read = steps = 0
        began = time.perf_counter()
        for start in range(0, len(chats), width):
            chunk = tokenized[start : start + width]
            out = decoder.generate([Request(p, grammar, cap) for p in chunk])
            prefill += decoder.timing.prefill_s
            decode += decoder.timing.decode_s
            read += decoder.timing.prefill_tokens
            steps += decoder.timing.steps
            texts += [backend.llama.detokenize(g.tokens).decode("utf-8", errors="ignore") for g in out]
        total = time.perf_counter() - began
        decoder.close()
        tokens = sum(len(backend.llama.tokenize(t.encode("utf-8"), add_bos=False)) for t in texts)
        same = sum(t == b.text for t, b in zip(texts, baseline))
        valid = sum(_parses(t) for t in texts)
        row = {
            "width": width,
            "seconds": round(total, 2),
            "prefill_s": round(prefill, 2),
            "prefill_tokens": read,
            "decode_s": round(decode, 2),
            "decode_steps": steps,
            "written": tokens,
            "written_per_s": round(tokens / decode, 2) if decode else None,
            "same_as_baseline": same,
            "valid_json": valid,
        }
        record["widths"].append(row)
        print(json.dumps(row), flush=True)
    single = next((w for w in record["widths"] if w["width"] == 1), None)
    if single and single["written_per_s"]:
        for w in record["widths"]:
            w["written_per_s_vs_1"] = round(w["written_per_s"] / single["written_per_s"], 2)
            w["seconds_vs_baseline"] = round(w["seconds"] / one_at_a_time, 3)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps({w["width"]: (w.get("written_per_s_vs_1"), w.get("seconds_vs_baseline")) for w in record["widths"]}))
    return 0


def _parses(text: str) -> bool:
    """Valid as the pipeline reads it (llm/base._validate: strict JSON, then raw newlines in strings allowed)."""
    from nemori_cli.llm.base import _validate

    try:
        _validate(narrative.Narrative, text)
        return True
    except ValueError:
        return False


if __name__ == "__main__":
    raise SystemExit(main())
