"""Evidence recall of the short road's retrieval under other settings, with no model: a cheap filter before a bench run.

    python scripts/recall_sweep.py RESULTS_FOLDER[:SYSTEM] [...] --set turns=1 --set text_weight=2 [--budget 450]
        [--db nemori-native-prediction-int-narrative-similarity.db --base facts=0]

Each folder's results.jsonl names the questions (unit, qid, question) that SYSTEM (default nemori-unbuilt)
answered, and its memories/ hold the unbuilt databases they were asked of. Every question is searched again
as the short road searches (profile "budget", no episodes, ``--budget`` estimated tokens), once with the
road's own settings and once with each --set changed, and the share of the gold evidence turns the context
holds is averaged (bench/metrics.evidence_recall, as the bench counts it), with the context's estimated tokens.
A setting that finds more evidence in the same tokens is worth a bench run; recall is not an answer's score.
--db names another database of each unit's memories/ folder (a built one); --base sets what every setting shares
(facts=0: turns alone, as `ask` reads a built memory beyond the window).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nemori_cli import Memory
from nemori_cli.bench.metrics import evidence_recall
from nemori_cli.errors import NemoriError
from nemori_cli.prompts.timeline import estimate_tokens, render

DATA = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo-dev.json"


def evidence() -> dict[tuple[str, str], list[str]]:
    out = {}
    for sample in json.loads(DATA.read_text()):
        for n, q in enumerate(sample["qa"]):
            out[(sample["sample_id"], str(n))] = q.get("evidence") or []
    return out


def database(folder: Path, unit: str, file: str = "nemori-unbuilt.db") -> Path:
    name = unit.replace("haystack:", "haystack_").replace("+", "_")
    return folder / "memories" / name / file


def value(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--set", action="append", default=[], help="FIELD=VALUE[,FIELD=VALUE]: one setting to try")
    parser.add_argument("--budget", type=int, default=450)
    parser.add_argument("--user", default="bench")
    parser.add_argument("--db", default="nemori-unbuilt.db", help="the database file in each unit's memories/ folder")
    parser.add_argument("--base", default="", help="FIELD=VALUE[,FIELD=VALUE]: settings every row shares")
    args = parser.parse_args()
    gold = evidence()

    def parsed(spec: str, flag: str) -> dict:
        pairs = [kv.partition("=") for kv in spec.split(",")]
        if any(not name or not eq for name, eq, _ in pairs):
            parser.error(f"{flag} {spec!r}: expected FIELD=VALUE[,FIELD=VALUE]")
        return {name: value(text) for name, _, text in pairs}

    base = parsed(args.base, "--base") if args.base else {}
    settings: list[dict] = [{}, *(parsed(spec, "--set") for spec in args.set)]
    totals = [[0.0, 0, 0] for _ in settings]  # recall sum, questions, tokens sum
    for spec in args.folders:
        folder, _, system = spec.partition(":")
        system = system or "nemori-unbuilt"
        asked = {}
        for line in (Path(folder) / "results.jsonl").read_text().splitlines():
            r = json.loads(line)
            if r.get("kind") == "answer" and r["system"] == system:
                asked[(r["unit"], str(r["qid"]))] = r
        for unit in sorted({u for u, _ in asked}):
            if not database(Path(folder), unit, args.db).exists():
                parser.error(f"{database(Path(folder), unit, args.db)}: no such database for {unit} (is {folder} a bench --out folder?)")
            with Memory(database(Path(folder), unit, args.db), user=args.user) as memory:
                for (u, qid), r in sorted(asked.items()):
                    if u != unit:
                        continue
                    sample, _, n = qid.rpartition(":")
                    wanted = gold.get((sample or r["sample"], n), [])
                    if not wanted:
                        continue
                    for i, extra in enumerate(settings):
                        hits = memory.search(r["question"], profile="budget", **{"budget": args.budget, "k": 0, **base, **extra})
                        turns = [m.source_id for h in hits for m in h.messages]
                        recall = evidence_recall(wanted, turns)
                        totals[i][0] += recall or 0.0
                        totals[i][1] += 1
                        totals[i][2] += estimate_tokens(render(hits))
    for extra, (recall, n, tokens) in zip(settings, totals):
        name = ",".join(f"{k}={v}" for k, v in extra.items()) or "as shipped"
        print(f"{name:40s} recall {100 * recall / max(1, n):5.1f}%  tokens {tokens / max(1, n):6.0f}  ({n} questions)")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except NemoriError as e:  # an unknown --set field, a database of another embedder: one line, not a traceback
        print(f"recall_sweep.py: {e}", file=sys.stderr)
        raise SystemExit(2) from None
