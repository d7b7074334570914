"""Evidence recall of the short road's search with a 256-token chunk beside it, with no model (docs/BEYOND.md, eleventh round).

    python scripts/chunk_screen.py RESULTS_FOLDER [...] [--dbs 'bench-results/dbs11-{unit}/memories/{unit}/nemori-unbuilt.db']

Each folder's results.jsonl names the questions `nemori-unbuilt` answered; each conversation's unbuilt database
is made beforehand with `nemori bench locomo ../shared/data/locomo/locomo-dev.json --sample UNIT --systems
nemori-unbuilt --questions 1 --out bench-results/dbs11-UNIT` (a minute each, the embedder only). For every
question with gold evidence, the share of it that each context holds and the context's estimated tokens:
the shipped search at two budgets, the same search plus the best chunks as `rag-256` cuts and embeds them,
plus the 8-turn window whose turns' mean vector is nearest the question, and `rag-256`'s own chunks. Recall is
not an answer's score; a context that finds more evidence in the same tokens is worth a bench run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nemori_cli import Memory
from nemori_cli.bench.baselines import RagSystem
from nemori_cli.bench.metrics import evidence_recall
from nemori_cli.bench.systems import Shared
from nemori_cli.domain import Hit, Message
from nemori_cli.prompts.render import message_lines
from nemori_cli.prompts.timeline import estimate_tokens, render
from nemori_cli.store import messages as message_sql

DATA = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo-dev.json"
CHUNK_TOKENS = 256  # rag-256's chunk size (bench/baselines.RagSystem)
WINDOW_TURNS = 8  # about as many turns as one 256-token chunk holds


def chunks(messages: list[Message]) -> list[list[Message]]:
    """Consecutive turns up to CHUNK_TOKENS, cut by rag-256's own code, with tokens counted by the prompt's estimate."""
    return RagSystem(CHUNK_TOKENS, 4).chunks(messages, cast(Shared, SimpleNamespace(count_tokens=estimate_tokens)))


def as_hit(turns: list[Message]) -> Hit:
    return Hit(
        kind="episode", id=-1, score=0.0, title="", text="", start=turns[0].timestamp, end=turns[-1].timestamp, messages=tuple(turns)
    )


def tokens_of(searched: list[Hit], added: list[Hit]) -> int:
    """The search's hits as the prompt renders them, and the added turns as plain lines."""
    rendered = estimate_tokens(render(searched)) if searched else 0
    return rendered + sum(estimate_tokens(message_lines(list(h.messages), numbered=False)) for h in added)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--dbs", default="bench-results/dbs11-{unit}/memories/{unit}/nemori-unbuilt.db")
    parser.add_argument("--user", default="bench")
    args = parser.parse_args()
    gold = {}
    for sample in json.loads(DATA.read_text()):
        for number, q in enumerate(sample["qa"]):
            gold[(sample["sample_id"], str(number))] = q.get("evidence") or []
    asked = {}
    for folder in args.folders:
        for line in (Path(folder) / "results.jsonl").read_text().splitlines():
            r = json.loads(line)
            if r.get("kind") == "answer" and r["system"] == "nemori-unbuilt":
                asked[(r["unit"], str(r["qid"]))] = r
    rows: dict[str, list[float]] = {}

    def add(name: str, wanted: list[str], hits: list[Hit], tokens: int) -> None:
        row = rows.setdefault(name, [0.0, 0, 0])
        row[0] += evidence_recall(wanted, [m.source_id for h in hits for m in h.messages if m.source_id]) or 0.0
        row[1] += 1
        row[2] += tokens

    for unit in sorted({u for u, _ in asked}):
        path = Path(args.dbs.format(unit=unit))
        if not path.exists():
            parser.error(f"{path}: no unbuilt database for {unit} (make it as this script's docstring says)")
        with Memory(path, user=args.user) as memory:
            session = memory._session("read")  # the embedder and the turns, as the search itself reads them
            turns = message_sql.all_messages(session.db, args.user)
            embedder = session.embedder
            cut = chunks(turns)
            chunk_vectors = embedder.embed_documents([message_lines(c, numbered=False) for c in cut])
            turn_vectors = embedder.embed_documents([message_lines([m], numbered=False) for m in turns])
            sums = np.vstack([np.zeros(turn_vectors.shape[1]), np.cumsum(turn_vectors, axis=0)])
            means = sums[WINDOW_TURNS:] - sums[:-WINDOW_TURNS]
            means /= np.linalg.norm(means, axis=1, keepdims=True)
            for (u, qid), r in sorted(asked.items()):
                sample, _, n = qid.rpartition(":")
                wanted = gold.get((sample or r["sample"], n), [])
                if u != unit or not wanted:
                    continue
                question = r["question"]
                vector = embedder.embed_query(question)
                best_chunks = np.argsort(-(chunk_vectors @ vector))
                window = int(np.argmax(means @ vector))
                for k in (2, 4):
                    own = [as_hit(cut[i]) for i in best_chunks[:k]]
                    add(f"rag-256's own top {k} chunks", wanted, own, tokens_of([], own))
                searched = {b: memory.search(question, profile="budget", budget=b, k=0) for b in (200, 450, 700)}
                for b in (450, 700):
                    add(f"shipped search, budget {b}", wanted, searched[b], tokens_of(searched[b], []))
                for b, extra in ((200, 1), (450, 1), (450, 2)):
                    have = {m.id for h in searched[b] for m in h.messages}
                    added = [as_hit(new) for i in best_chunks[:extra] if (new := [m for m in cut[i] if m.id not in have])]
                    add(f"shipped {b} + the best {extra} chunk(s)", wanted, [*searched[b], *added], tokens_of(searched[b], added))
                for b in (200, 450):
                    have = {m.id for h in searched[b] for m in h.messages}
                    new = [m for m in turns[window : window + WINDOW_TURNS] if m.id not in have]
                    added = [as_hit(new)] if new else []
                    add(f"shipped {b} + the best mean-vector window", wanted, [*searched[b], *added], tokens_of(searched[b], added))
    for name, (recall, count, tokens) in rows.items():
        print(f"{name:44s} recall {100 * recall / max(1, count):5.1f}%  tokens {tokens / max(1, count):6.0f}  ({int(count)} questions)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
