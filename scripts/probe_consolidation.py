"""How well does each local model answer the consolidation question? Labelled pairs, accuracy, seconds.

Asks the production prompt (nemori_cli/prompts/consolidate.py: "does the newer
fact make the older one outdated?") about hand-labelled (older, newer) pairs
and reports, per model: accuracy, how many outdated pairs it caught, how many
still-true facts it would wrongly retire, whether it passes the self-check the
pipeline uses, and seconds per question.

    .venv/bin/python scripts/probe_consolidation.py --models small,base
"""

from __future__ import annotations

import argparse
import time

from nemori_cli import deps
from nemori_cli.config import Settings
from nemori_cli.errors import LLMOutputError
from nemori_cli.prompts import consolidate as prompt

# (older, newer, outdated?) — written for this probe, not taken from any benchmark.
PAIRS = [
    ("Lea lives in Paris.", "Lea moved to Berlin in September 2024.", True),
    ("Lea lives in Paris.", "Lea lives in Berlin now, in Kreuzberg.", True),
    ("John works at Google.", "John started a new job at Meta in May 2023.", True),
    ("Caroline is single.", "Caroline has been dating Mark since June 2023.", True),
    ("Tim's favourite band is Muse.", "Tim says his favourite band is now Radiohead.", True),
    ("Ava is planning a trip to Rome in July.", "Ava cancelled her trip to Rome.", True),
    ("Lea lives in Paris.", "Lea has a sister called Ines.", False),
    ("Melanie has two kids.", "Melanie took her kids camping in July 2023.", False),
    ("John works at Google.", "John plays tennis on Sundays.", False),
    ("Caroline likes painting.", "Caroline painted a sunset on 3 May 2023.", False),
    ("Tim's favourite band is Muse.", "Tim saw Muse live in London in 2022.", False),
    ("Ava is planning a trip to Rome in July.", "Ava booked a hotel near the Colosseum.", False),
]


def probe(model: str) -> dict:
    llm = deps.build_llm(Settings.from_env(model=model))
    right = caught = wrong_retire = failed = 0
    started = time.perf_counter()
    for older, newer, expected in PAIRS:
        try:
            got = llm.complete(prompt.render(older, newer), schema=prompt.Outdated, stage="probe", max_tokens=16).value.outdated
        except LLMOutputError:
            failed += 1
            continue
        right += got is expected
        caught += got and expected
        wrong_retire += got and not expected
    seconds = (time.perf_counter() - started) / len(PAIRS)
    check = all(
        llm.complete(prompt.render(o, n), schema=prompt.Outdated, stage="probe", max_tokens=16).value.outdated is e
        for o, n, e in prompt.SELF_CHECK
    )
    positives = sum(e for _, _, e in PAIRS)
    return {
        "model": model,
        "accuracy": f"{right}/{len(PAIRS)}",
        "outdated caught": f"{caught}/{positives}",
        "true facts wrongly retired": f"{wrong_retire}/{len(PAIRS) - positives}",
        "unusable answers": failed,
        "passes self-check": check,
        "s per question": round(seconds, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="small,base")
    args = parser.parse_args()
    rows = [probe(m) for m in args.models.split(",")]
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(str(r[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
