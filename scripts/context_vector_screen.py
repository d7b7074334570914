"""Evidence recall of the short road's search if each turn's vector also read the turns around it, with no model.

    python scripts/context_vector_screen.py [--dbs 'bench-results/dbs12-{unit}/memories/{unit}/nemori-unbuilt.db']
        [--samples conv-26,conv-30,conv-41,conv-43] [--questions FILE.json]

Why: a turn is embedded alone ("Melanie: Yeah, it's special to me."), so a question about what the line is
about often matches the turn that asked, or nothing; `rag-256`'s chunks carry that context into their vectors. This
screen swaps the vector list of the shipped search (store/message_index.vector_search) for one computed here, by
brute force, from other texts per turn, and keeps everything else as shipped (full text, fusion, windows, the
450-token budget). For every question with gold evidence (categories 1-4 of the dev file, or of --questions), the
share of it the context holds and its estimated tokens. Recall is not an answer's score: a setting that finds
more evidence in the same tokens is worth a bench run on the tuning split.

Each conversation's unbuilt database is made first, as scripts/chunk_screen.py's docstring says (`nemori bench
locomo ../shared/data/locomo/locomo-dev.json --sample UNIT --systems nemori-unbuilt --questions 1 --out
bench-results/dbs12-UNIT`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nemori_cli import Memory
from nemori_cli.bench.metrics import evidence_recall
from nemori_cli.domain import Message
from nemori_cli.embed.base import max_chars
from nemori_cli.prompts.timeline import estimate_tokens, render
from nemori_cli.retrieval import search as search_module
from nemori_cli.store import message_index
from nemori_cli.store import messages as message_sql

DATA = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo-dev.json"


def texts(turns: list[Message], before: int, after: int, limit: int) -> list[str]:
    """Each turn's text with up to ``before``/``after`` turns of its own session around it, oldest first."""
    out = []
    for i, m in enumerate(turns):
        lo, hi = i, i
        while lo > 0 and i - lo < before and turns[lo - 1].session == m.session:
            lo -= 1
        while hi < len(turns) - 1 and hi - i < after and turns[hi + 1].session == m.session:
            hi += 1
        out.append("\n".join(message_index.embedding_text(t, limit) for t in turns[lo : hi + 1])[:limit])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dbs", default="bench-results/dbs12-{unit}/memories/{unit}/nemori-unbuilt.db")
    parser.add_argument("--samples", default="conv-26,conv-30,conv-41,conv-43")
    parser.add_argument("--questions", type=Path, default=DATA)
    parser.add_argument("--user", default="bench")
    parser.add_argument("--budget", type=int, default=450)
    args = parser.parse_args()
    data = {s["sample_id"]: s for s in json.loads(args.questions.read_text())}
    rows: dict[str, list[float]] = {}
    shipped_search = message_index.vector_search
    for unit in args.samples.split(","):
        path = Path(args.dbs.format(unit=unit))
        if not path.exists():
            parser.error(f"{path}: no unbuilt database for {unit} (make it as this script's docstring says)")
        asked = [q for q in data[unit]["qa"] if q.get("category") in (1, 2, 3, 4) and q.get("evidence")]
        with Memory(path, user=args.user) as memory:
            session = memory._session("read")
            turns = message_sql.all_messages(session.db, args.user)
            embedder = session.embedder
            limit = max_chars(embedder)  # as the shipped index cuts a turn
            single = embedder.embed_documents([message_index.embedding_text(t, limit) for t in turns])
            ids = np.array([t.id for t in turns])
            variants: dict[str, np.ndarray | None] = {"shipped (the turn alone, stored vectors)": None, "the turn alone, here": single}
            for before, after in ((1, 0), (1, 1), (2, 0)):
                context = embedder.embed_documents(texts(turns, before, after, limit))
                variants[f"turn with {before} before, {after} after"] = context
                mixed = single + context
                variants[f"turn alone + with {before} before, {after} after"] = mixed / np.linalg.norm(mixed, axis=1, keepdims=True)

            def brute(vectors: np.ndarray, ids: np.ndarray) -> Callable[..., list[tuple[int, float]]]:
                def vector_search(db, user, query, k, *, as_of=None, reads_after=False):  # noqa: ARG001 - the shipped signature
                    scores = vectors @ np.asarray(query, dtype=np.float32)
                    best = np.argsort(-scores)[:k]
                    return [(int(ids[i]), float(scores[i])) for i in best]

                return vector_search

            for name, vectors in variants.items():
                search_module.message_index.vector_search = shipped_search if vectors is None else brute(vectors, ids)  # type: ignore[method-assign]
                for q in asked:
                    hits = memory.search(q["question"], profile="budget", budget=args.budget, k=0)
                    got = [m.source_id for h in hits for m in h.messages if m.source_id]
                    row = rows.setdefault(name, [0.0, 0, 0])
                    row[0] += evidence_recall(q["evidence"], got) or 0.0
                    row[1] += 1
                    row[2] += estimate_tokens(render(hits)) if hits else 0
            search_module.message_index.vector_search = shipped_search  # type: ignore[method-assign]
        print(f"{unit}: {len(asked)} questions, {len(turns)} turns", flush=True)
    for name, (recall, count, tokens) in rows.items():
        print(f"{name:44s} recall {100 * recall / max(1, count):5.1f}%  tokens {tokens / max(1, count):6.0f}  ({int(count)} questions)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
