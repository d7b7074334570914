"""Paired comparisons over a whole split: every unit's questions pooled, as the tune/confirm protocol reads them.

    python scripts/pooled.py FOLDER [FOLDER ...] --pair A:B [--pair A:B ...] [--units conv-26,conv-41] [--json]
        [--merge NEW=A,B]

--merge names one system for the answers of several, each on its own units: a split's whole conversations
and its haystack ran as `nemori` and `nemori-unbuilt`, and ``--merge shipped=nemori,nemori-unbuilt`` pools
them (a unit answered by two of them is refused).

A system named ``NAME@N`` takes its answers from the N-th folder given (from 0) alone: the same system
run twice, e.g. with a setting changed (``--pair nemori-unbuilt@1:nemori-unbuilt@0``).

With --respell, every system also has a row ``NAME+respelled``: its recorded answers with their ISO
dates written out as ``ask`` now writes them (dates.spell_iso_dates), scored again. A mend that is a
function of the answer's text alone is measured on the records this way, without running a model.

A bench report pairs systems within one folder and prints each unit's rows;
a decision is made on a split (two conversations, 90 questions), so this
pools the answers of every named folder, keyed by (unit, question), and
pairs A against B over the questions both answered: the mean set-F1
difference (x100), the same paired bootstrap as the report's (bench/paired.py),
and wins / ties / losses. Also the means of A and B over those questions.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nemori_cli.bench import paired
from nemori_cli.bench.metrics import set_f1
from nemori_cli.dates import spell_iso_dates


def scores(folders: list[Path], units: set[str] | None, respell: bool = False) -> dict[str, dict[tuple[str, str], float]]:
    """system -> (unit, question) -> set F1; a later folder's record of the same question wins.

    A question is its id and its text: two question files for one conversation (LoCoMo's and the observation
    set) both number theirs from 0, and pooling them must not take one for the other.
    """
    out: dict[str, dict[tuple[str, str], float]] = {}
    for folder in folders:
        for line in (folder / "results.jsonl").read_text().splitlines():
            r = json.loads(line)
            if r.get("kind") != "answer" or (units and r["unit"] not in units):
                continue
            key = (r["unit"], f"{r['qid']}\x1f{r.get('question', '')}")
            out.setdefault(r["system"], {})[key] = float(r["set_f1"])
            if respell and not r.get("failed"):
                said = spell_iso_dates(r["answer"])  # unchanged: the recorded score stands (bench scores may differ in kind)
                again = set_f1(said, str(r["gold"])) if said != r["answer"] else float(r["set_f1"])
                out.setdefault(f"{r['system']}+respelled", {})[key] = again
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--pair", action="append", required=True, help="A:B, A paired against B")
    parser.add_argument("--units", help="comma-separated units to pool (default: all)")
    parser.add_argument("--respell", action="store_true", help="add NAME+respelled rows: ISO dates written out, scored again")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--merge", action="append", default=[], help="NEW=A,B: one system for the answers of A and B")
    args = parser.parse_args()
    units = set(args.units.split(",")) if args.units else None
    table = scores(args.folders, units, args.respell)
    for n, folder in enumerate(args.folders):
        table.update({f"{name}@{n}": answers for name, answers in scores([folder], units, args.respell).items()})
    for spec in args.merge:
        new, _, members = spec.partition("=")
        if not new or not members:
            print(f"pooled.py: --merge {spec!r}: expected NEW=A,B", file=sys.stderr)
            return 2
        merged: dict = {}
        for name in members.split(","):
            if name not in table:
                print(f"pooled.py: no answers of {name} in {', '.join(map(str, args.folders))}", file=sys.stderr)
                return 2
            if {u for u, _ in merged} & {u for u, _ in table[name]}:
                print(f"pooled.py: --merge {spec}: {name} answered a unit another member answered", file=sys.stderr)
                return 2
            merged.update(table[name])
        table[new] = merged
    rows = []
    for pair in args.pair:
        a, sep, b = pair.partition(":")
        if not (a and sep and b) or ":" in b:
            print(f"pooled.py: --pair {pair!r}: expected A:B", file=sys.stderr)
            return 2
        if a not in table or b not in table:
            print(f"pooled.py: no answers of {a if a not in table else b} in {', '.join(map(str, args.folders))}", file=sys.stderr)
            return 2
        p = paired.compare(a, b, table[a], table[b])
        if p is None:
            print(f"pooled.py: {a} and {b} answered no question in common", file=sys.stderr)
            return 2
        both = set(table[a]) & set(table[b])
        mean_a = 100 * sum(table[a][k] for k in both) / len(both)
        mean_b = 100 * sum(table[b][k] for k in both) / len(both)
        rows.append({**p.as_dict(), "units": sorted({u for u, _ in both}), "mean_system": mean_a, "mean_against": mean_b})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print("| comparison | units | questions | means | difference | 95% interval | wins / ties / losses |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        low, high = r["ci95"]
        print(
            f"| `{r['system']}` − `{r['against']}` | {', '.join(r['units'])} | {r['questions']} | "
            f"{r['mean_system']:.1f} / {r['mean_against']:.1f} | {100 * r['mean_difference']:+.1f} | "
            f"[{100 * low:+.1f}, {100 * high:+.1f}] | {r['wins']} / {r['ties']} / {r['losses']} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
