"""Compare LLM presets on a real conversation: episode quality against seconds.

For each model: a fresh database, LoCoMo sessions ingested through the real
`nemori ingest` command, then measured:
- ingest wall time, LLM calls, tokens, repairs and fallbacks (from `stats`);
- partition sanity: every message in exactly one episode, episode sizes;
- dates: narratives that carry an absolute date (a year);
- usefulness for retrieval: evidence recall@k of the LoCoMo questions whose
  evidence lies in the ingested sessions (does `search` return an episode
  holding an evidence turn among its top k);
- faithfulness proxy: capitalised words of the narratives that appear nowhere
  in the source messages (invented names or places), per episode.

    .venv/bin/python scripts/compare_models.py --models small,base --sessions 1-3 --out docs/DEFAULT_MODEL.md
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo-dev.json"


def nemori(*args: str, model: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "nemori_cli", *args, "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**__import__("os").environ, "NEMORI_MODEL": model},
    )
    if proc.returncode != 0:
        raise SystemExit(f"nemori {' '.join(args)} failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout)


def questions(sample: str, lo: int, hi: int) -> list[dict]:
    data = json.loads(LOCOMO.read_text())
    qa = next(s for s in data if s["sample_id"] == sample)["qa"]
    keep = []
    for q in qa:
        if q["category"] == 5 or not q.get("evidence"):
            continue
        sessions = set()
        for ev in q["evidence"]:
            m = re.match(r"D(\d+):\d+$", ev.strip())
            sessions.add(int(m.group(1)) if m else -1)
        if sessions and all(lo <= s <= hi for s in sessions):
            keep.append(q)
    return keep


def measure(model: str, sample: str, sessions: str, ks=(3, 10)) -> dict:
    lo, _, hi = sessions.partition("-")
    lo, hi = int(lo), int(hi or lo)
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / f"{model}.db")
        t0 = time.perf_counter()
        report = nemori("ingest", str(LOCOMO), "--format", "locomo", "--sample", sample, "--sessions", sessions, "--db", db, model=model)
        wall = time.perf_counter() - t0
        stats = nemori("stats", "--db", db, model=model)
        episodes = nemori("inspect", "episodes", "--db", db, model=model)["episodes"]
        owner = {m["source_id"]: e["id"] for e in episodes for m in e["messages"]}
        all_text = " ".join(m["content"] for e in episodes for m in e["messages"]).lower()
        invented = []
        for e in episodes:
            words = set(re.findall(r"\b[A-Z][a-z]{2,}\b", e["title"] + " " + e["narrative"]))
            stop = {
                "The",
                "They",
                "She",
                "His",
                "Her",
                "And",
                "But",
                "On",
                "In",
                "After",
                "During",
                "Both",
                "This",
                "That",
                "Then",
                "When",
                "While",
                "Their",
                "With",
            }
            months = {
                "January",
                "February",
                "March",
                "April",
                "May",
                "June",
                "July",
                "August",
                "September",
                "October",
                "November",
                "December",
            }
            invented.append(len([w for w in words - stop - months if w.lower() not in all_text]))
        qs = questions(sample, lo, hi)
        hits_at = {k: 0 for k in ks}
        for q in qs:
            found = nemori("search", q["question"], "--db", db, "--k", str(max(ks)), "--raw", "0", model=model)["hits"]
            ids = [h["id"] for h in found]
            gold = {owner.get(ev.strip()) for ev in q["evidence"]} - {None}
            for k in ks:
                if gold & set(ids[:k]):
                    hits_at[k] += 1
        stages = {s["stage"]: s for s in stats["stages"]}
        calls = sum(s["calls"] for s in stages.values())
        return {
            "model": model,
            "messages": report["added"],
            "episodes": len(episodes),
            "sizes": [len(e["messages"]) for e in episodes],
            "partitioned": sorted(owner) == sorted(set(owner)) and len(owner) == report["added"],
            "wall_s": wall,
            "ingest_s": report["seconds"],
            "calls": calls,
            "prompt_tokens": sum(s["prompt_tokens"] for s in stages.values()),
            "output_tokens": sum(s["completion_tokens"] for s in stages.values()),
            "repaired": sum(s["repaired"] for s in stages.values()),
            "fallbacks": sum(s["fallbacks"] for s in stages.values()),
            "dated": sum(bool(re.search(r"\b(19|20)\d\d\b", e["narrative"])) for e in episodes),
            "invented_per_episode": sum(invented) / max(1, len(episodes)),
            "questions": len(qs),
            "recall": {k: hits_at[k] / max(1, len(qs)) for k in ks},
            "sample_episode": episodes[len(episodes) // 2] if episodes else None,
        }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="small,base")
    ap.add_argument("--sample", default="conv-26")
    ap.add_argument("--sessions", default="1-3")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    results = [measure(m, args.sample, args.sessions) for m in args.models.split(",")]
    rows = [
        "| model | ingest s | LLM calls | prompt / output tokens | repaired | fallbacks | episodes (sizes) | dated narratives | invented capitalised words per episode | evidence recall@3 | recall@10 |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        rows.append(
            f"| {r['model']} | {r['ingest_s']:.0f} | {r['calls']} | {r['prompt_tokens']} / {r['output_tokens']} | {r['repaired']} | "
            f"{r['fallbacks']} | {r['episodes']} ({', '.join(map(str, r['sizes']))}) | {r['dated']}/{r['episodes']} | "
            f"{r['invented_per_episode']:.2f} | {r['recall'][3]:.2f} | {r['recall'][10]:.2f} |"
        )
    table = "\n".join(rows)
    print(table)
    print(json.dumps(results, indent=1, default=str)[:3000])
    if args.out:
        examples = "\n\n".join(
            f"**{r['model']}**, episode {r['sample_episode']['id']} ({len(r['sample_episode']['messages'])} messages): "
            f"*{r['sample_episode']['title']}* — {r['sample_episode']['narrative']}"
            for r in results
            if r["sample_episode"]
        )
        args.out.write_text(
            f"# Choosing the default model\n\nLoCoMo `{args.sample}` sessions {args.sessions} "
            f"({results[0]['messages']} messages, {results[0]['questions']} questions with evidence in them), "
            "ingested by the real `nemori ingest` with each model; 2-core machine, nothing else running.\n\n"
            f"    .venv/bin/python scripts/compare_models.py --models {args.models} --sample {args.sample} --sessions {args.sessions} --out {args.out}\n\n"
            f"{table}\n\nA middle episode of each, as written:\n\n{examples}\n"
        )


if __name__ == "__main__":
    main()
