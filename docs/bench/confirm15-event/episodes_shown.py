"""How many episodes the row nemori-s450-ep3 shows for each when-question: its search, budget included, no model.

    python docs/bench/confirm15-event/episodes_shown.py DBS

DBS holds a copy of each built memory as SAMPLE.db (from bench-results/build15-SAMPLE/memories/SAMPLE/*.db); run
from the repository root, with bench-results/eventq14.json made by scripts/event_questions.py.
"""

import collections
import json
import sys
from dataclasses import replace
from pathlib import Path

from nemori_cli.api import Memory
from nemori_cli.retrieval.search import PROFILES

# The short road's options as retrieval/core_answer.py sets them for this row: ~450 tokens, 3 episodes, no facts.
OPTIONS = replace(PROFILES["core"], core=False, budget=450, k=3, layout="timeline", facts=0)


def main(dbs: Path) -> None:
    with open("bench-results/eventq14.json") as f:
        samples = json.load(f)
    shown: collections.Counter[int] = collections.Counter()
    for sample in samples:
        memory = Memory(dbs / f"{sample['sample_id']}.db", user="bench")
        for qa in sample["qa"]:
            shown[sum(h.kind == "episode" for h in memory.search(qa["question"], options=OPTIONS))] += 1
    print("episodes shown: questions", dict(sorted(shown.items())))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
