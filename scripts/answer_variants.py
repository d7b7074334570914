"""Answer settings side by side on one built memory: the fast loop behind docs/ANSWERS.md.

    .venv/bin/python scripts/answer_variants.py bench-results/locomo-conv26-1-5-small \\
        --variant budget=500 --variant budget=1000,turns=2 --out docs/bench/variants.jsonl

Reads a bench folder's built Nemori memory (memories/<sample>/nemori-*.db) and
its questions (LoCoMo, from the data file named in config.json under
../shared/data), answers every question with each variant of the `budget`
profile through `retrieval.answer.ask` (the path `nemori ask` takes), and
prints set-F1 per category, evidence recall, context tokens and answer time.
A variant is comma-separated `field=value` overrides of SearchOptions. The
bench itself stays the record of the bars; this is for choosing what to
measure there.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import fields, replace
from pathlib import Path

from nemori_cli import deps
from nemori_cli.bench import locomo, metrics
from nemori_cli.bench.nemori_systems import _turns
from nemori_cli.bench.run import USER
from nemori_cli.config import Settings
from nemori_cli.domain import Hit
from nemori_cli.retrieval.answer import Layout, answer_hits, ask
from nemori_cli.retrieval.search import PROFILES, SearchOptions
from nemori_cli.store import message_index
from nemori_cli.store import messages as message_sql
from nemori_cli.store.sqlite import SqliteStore

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo"


def parse_variant(text: str) -> SearchOptions:
    types = {f.name: f.type for f in fields(SearchOptions)}
    base = PROFILES["budget"]
    changes = {}
    for part in filter(None, text.split(",")):
        name, value = part.split("=", 1)
        if name == "profile":
            base = PROFILES[value]
            continue
        if name in ("qfirst", "oracle"):  # handled in main(): layout and context trials
            continue
        kind = types[name]
        changes[name] = int(value) if kind in (int, "int") else float(value) if kind in (float, "float") else value
    return replace(base, **changes)


def evidence_hits(db: SqliteStore, evidence, turns: int) -> list[Hit]:
    found = [m for m in message_sql.all_messages(db, USER) if m.source_id in set(evidence)]
    around = message_index.around(db, USER, found, turns)
    return [
        Hit(
            kind="message",
            id=m.id,
            score=1.0,
            title=m.speaker,
            text=m.content,
            start=m.timestamp,
            end=m.timestamp,
            messages=tuple(around[m.id]),
        )
        for m in found
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--variant", action="append", default=[])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    config = json.loads((args.folder / "config.json").read_text())
    sessions = config["scope_key"].get("sessions")
    from nemori_cli.importers.locomo import parse_session_range

    units = locomo.units(DATA / config["data"]["file"], [], parse_session_range(sessions), None, adversarial=False)
    settings = Settings.from_env(model=config["model"]["name"])
    embedder = deps.build_embedder(settings)
    llm = deps.build_llm(settings)
    from nemori_cli.prompts import answer as answer_prompt

    plain_render = answer_prompt.render_timeline

    def question_first(question, hits, **kw):
        messages = plain_render(question, hits, **kw)
        messages[1]["content"] = f"Question: {question}\n" + messages[1]["content"]
        return messages

    for variant in args.variant or [""]:
        options = parse_variant(variant)
        answer_prompt.render_timeline = question_first if "qfirst=1" in variant else plain_render
        rows = []
        for unit in units:
            found = sorted((args.folder / "memories" / unit.key).glob("nemori-native-*.db"))
            if not found:
                continue
            db = SqliteStore(found[0], create=False)
            for q in unit.questions:
                if "oracle=1" in variant:
                    # The gold-evidence context: the evidence turns themselves (with the same
                    # neighbours), laid out as ask lays out what it retrieves. What the model makes
                    # of the right context tells whether retrieval or the model limits the score.
                    answer = answer_hits(
                        llm, q.text, evidence_hits(db, q.evidence, options.turns), Layout("timeline"), today=q.today, gate=False
                    )
                else:
                    answer, _ = ask(db, USER, embedder, llm, q.text, options, today=q.today)
                llm.log.drain()
                scores = locomo.text_scores(answer.answer, q.gold, q.meta["category"])
                recall = metrics.evidence_recall(q.evidence, _turns(db, USER, list(answer.hits)))
                rows.append(
                    {
                        "variant": variant,
                        "qid": q.qid,
                        "group": q.meta["group"],
                        "question": q.text,
                        "gold": q.gold,
                        "answer": answer.answer,
                        "context_tokens": answer.usage.prompt_tokens,
                        "answer_ms": round(answer.answer_ms),
                        "evidence_recall": recall,
                        **scores,
                    }
                )
            db.close()
        by_group: dict[str, list[float]] = {}
        for r in rows:
            by_group.setdefault(r["group"], []).append(r["set_f1"])
        recalls = [r["evidence_recall"] for r in rows if r["evidence_recall"] is not None]
        print(
            f"{variant or 'budget'}: set_f1 {100 * statistics.mean(r['set_f1'] for r in rows):.1f}  "
            + "  ".join(f"{g} {100 * statistics.mean(v):.1f}" for g, v in by_group.items())
            + f"  recall {100 * statistics.mean(recalls):.1f}  ctx {statistics.mean(r['context_tokens'] for r in rows):.0f}"
            + f"  p50 {statistics.median(r['answer_ms'] for r in rows) / 1000:.1f}s",
            flush=True,
        )
        if args.out:
            with args.out.open("a") as f:
                for r in rows:
                    f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    t = time.perf_counter()
    main()
