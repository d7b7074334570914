"""Whether two bench runs wrote the same records, timings aside: what a refactor must leave unchanged.

    python scripts/same_records.py BEFORE_DIR AFTER_DIR [--out FILE]

Each run's results.jsonl is read, keyed by (kind, system, unit, qid), and
compared field by field. Wall-clock fields (seconds, answer_ms, search_ms, a
stage's seconds), the file size of the memory (SQLite pages depend on
timing-free but order-sensitive allocation) and `resumed` are left out; every
answer, score, token count, call count, repair and fallback must match.
Exits 1 when anything differs, and says what.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

TIMINGS = {"seconds", "answer_ms", "search_ms", "db_bytes", "resumed", "ms"}
# A note may say how long something took ("core of 1380 tokens read in 5.7 s"): its words must match, not its clock.
_SECONDS_IN_TEXT = re.compile(r"\b\d+(?:\.\d+)? s\b")


def _strip(value):
    if isinstance(value, dict):
        return {
            k: _SECONDS_IN_TEXT.sub("N s", v) if k == "note" and isinstance(v, str) else _strip(v)
            for k, v in value.items()
            if k not in TIMINGS
        }
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def records(folder: Path) -> dict[tuple, dict]:
    out = {}
    for line in (folder / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        out[(row["kind"], row["system"], row.get("unit"), row.get("qid"))] = _strip(row)
    return out


def compare(before: dict, after: dict) -> list[str]:
    problems = [f"only before: {k}" for k in before.keys() - after.keys()]
    problems += [f"only after: {k}" for k in after.keys() - before.keys()]
    for key in sorted(before.keys() & after.keys(), key=str):
        a, b = before[key], after[key]
        for field in sorted(a.keys() | b.keys()):
            if a.get(field) != b.get(field):
                problems.append(f"{key} {field}: {json.dumps(a.get(field))[:120]} -> {json.dumps(b.get(field))[:120]}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    before, after = records(args.before), records(args.after)
    problems = compare(before, after)
    kinds = {}
    for kind, *_ in before:
        kinds[kind] = kinds.get(kind, 0) + 1
    print(f"{len(before)} records before ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}), {len(after)} after")
    for p in problems:
        print(p)
    print("same records, timings aside" if not problems else f"{len(problems)} differences")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
