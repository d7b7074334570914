"""What indexing the raw messages costs at ingest: storing a LoCoMo conversation without the index, with it (each
turn embedded alone), and with turn vectors that read their neighbours (memory/profile.Profile.turn_vectors).

    .venv/bin/python scripts/bench_message_index.py ../shared/data/locomo/locomo-dev.json --sample conv-26 --out docs/bench/message-index.json

No LLM is involved: the message index is an embedding and a full-text row per
message, written in the same transaction as the messages. Each setting is
timed `--repeat` times on a fresh database; the median is reported beside the
LLM time per message that the same conversation's ingest needs (from a bench
record, when one is given), so the share is a ratio measured on this machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from nemori_cli import deps
from nemori_cli.bench.locomo import units
from nemori_cli.config import Settings
from nemori_cli.embed.base import identity, max_chars
from nemori_cli.store import message_index
from nemori_cli.store import messages as message_sql
from nemori_cli.store.sqlite import SqliteStore


def _store(path: Path, messages, embedder, with_index: bool, how: str = "turn") -> float:
    db = SqliteStore(path)
    try:
        started = time.perf_counter()
        with db.transaction():
            db.bind_embedder(identity(embedder), embedder.dimensions)
            message_sql.insert_messages(db, "u", messages)
            if with_index:
                message_index.index_all(db, "u", embedder.embed_documents, max_chars(embedder), how=how)
        return time.perf_counter() - started
    finally:
        db.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("file", type=Path)
    parser.add_argument("--sample", default="conv-26")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--ingest-record", type=Path, help="a bench results.jsonl whose nemori build of the same messages gives the LLM time"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    unit = units(args.file, [args.sample], None, None, adversarial=False)[0]
    embedder = deps.build_embedder(Settings.from_env())
    embedder.embed_documents(["warm up"])
    # "with": turns embedded alone (the default); "with neighbours": turn_vectors "neighbours" (docs/BEYOND.md, thirteenth round).
    times: dict[str, list[float]] = {"without": [], "with": [], "with neighbours": []}
    for _ in range(args.repeat):
        for setting in times:
            with tempfile.TemporaryDirectory() as tmp:
                how = "neighbours" if setting == "with neighbours" else "turn"
                times[setting].append(_store(Path(tmp) / "m.db", unit.messages, embedder, setting != "without", how))
    without, with_index = statistics.median(times["without"]), statistics.median(times["with"])
    with_neighbours = statistics.median(times["with neighbours"])
    result = {
        "sample": args.sample,
        "messages": len(unit.messages),
        "store_s": round(without, 3),
        "store_and_index_s": round(with_index, 3),
        "store_and_index_neighbours_s": round(with_neighbours, 3),
        "index_ms_per_message": round((with_index - without) * 1000 / len(unit.messages), 2),
        "index_neighbours_ms_per_message": round((with_neighbours - without) * 1000 / len(unit.messages), 2),
        "neighbours_over_turn": round((with_neighbours - without) / max(1e-9, with_index - without), 2),
        "runs": times,
    }
    if args.ingest_record:
        builds = [json.loads(line) for line in args.ingest_record.read_text().splitlines() if '"kind": "build"' in line]
        nemori = next((b for b in builds if b["build_key"].startswith("nemori-native")), None)
        if nemori:
            per_message = nemori["seconds"] / nemori["messages"]
            result["ingest_s_per_message"] = round(per_message, 3)
            result["index_share_of_ingest"] = round((with_index - without) / len(unit.messages) / per_message, 4)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
