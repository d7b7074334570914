"""Prompt-lookup decoding (llm/lookup_decoding.py) against llama-cpp-python's own loop, on nemori's narration prompts.

Both paths run the same prompts in the same process, on the same loaded
model: the baseline is `LlamaCppBackend.chat` with lookup off
(create_chat_completion and the shortlisted grammar, as before), then the
lookup decoder at each setting given. Prefix snapshots are off for both, so
each prompt is read whole and the difference is the writing. Reported: wall
time, tokens written, decode calls, guesses checked and kept, and whether the
text is the baseline's.

    python scripts/bench_lookup.py --model small --prompts 8 --settings 0:2,3:2,4:2,8:2,8:1 --out docs/bench/lookup-small.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nemori_cli import deps, stages  # noqa: E402
from nemori_cli.config import Settings  # noqa: E402
from nemori_cli.llm.schema import decoder_safe  # noqa: E402
from nemori_cli.prompts import narrative  # noqa: E402
from scripts.bench_batched import prompts  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="small")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=6, help="messages per narrated group")
    parser.add_argument("--settings", default="8:2", help="draft_max:ngram_min pairs, comma-separated")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    os.environ["NEMORI_PREFIX_CACHE"] = "0"

    settings = Settings.from_env(db="/tmp/bench-lookup.db", user="bench", model=args.model)
    backend = deps.build_llm(settings).backend
    schema = decoder_safe(narrative.Narrative.model_json_schema())
    cap = stages.NARRATION.max_tokens
    chats = prompts(args.prompts, args.group)

    backend.lookup = None  # llama-cpp-python's loop
    began = time.perf_counter()
    baseline = [backend.chat(c, schema=schema, max_tokens=cap, temperature=0.0) for c in chats]
    base_s = time.perf_counter() - began
    written = sum(r.completion_tokens for r in baseline)
    record = {
        "command": "python scripts/bench_lookup.py " + " ".join(sys.argv[1:]),
        "model": args.model,
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores",
        "prompts": len(chats),
        "prompt_tokens": sum(r.prompt_tokens for r in baseline),
        "baseline": {"seconds": round(base_s, 2), "written": written},
        "settings": [],
    }
    print(f"create_chat_completion: {base_s:.1f} s, {written} tokens written", flush=True)

    from nemori_cli.llm.lookup_decoding import LookupDecoder

    for setting in args.settings.split(","):
        draft_max, ngram_min = (int(x) for x in setting.split(":"))
        backend.lookup = draft_max
        backend._lookup = LookupDecoder(backend.llama, draft_max=draft_max, ngram_min=ngram_min, ngram_max=max(3, ngram_min))
        began = time.perf_counter()
        outs = [backend.chat(c, schema=schema, max_tokens=cap, temperature=0.0) for c in chats]
        seconds = time.perf_counter() - began
        stats = backend._lookup.stats
        row = {
            "draft_max": draft_max,
            "ngram_min": ngram_min,
            "seconds": round(seconds, 2),
            "vs_baseline": round(seconds / base_s, 3),
            "written": stats.written,
            "decodes": stats.decodes,
            "tokens_per_decode": round(stats.written / max(1, stats.decodes), 2),
            "drafted": stats.drafted,
            "accepted": stats.accepted,
            "acceptance": round(stats.acceptance, 3),
            "same_text_as_baseline": sum(o.text == b.text for o, b in zip(outs, baseline)),
        }
        record["settings"].append(row)
        print(json.dumps(row), flush=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
