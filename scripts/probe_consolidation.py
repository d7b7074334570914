"""How well does each local model answer the memory-management questions? Labelled pairs, accuracy, seconds.

Asks the production prompts about hand-labelled pairs and reports, per model
and question: accuracy, the positives it caught, the negatives it got wrong
(facts it would wrongly retire, episodes it would wrongly merge), whether it
passes the self-check the pipeline uses, and seconds per question.

- consolidation (nemori_cli/prompts/consolidate.py): does the newer fact make
  the older one outdated?
- integration (nemori_cli/prompts/integrate.py): does the new episode continue
  the earlier one?

    .venv/bin/python scripts/probe_consolidation.py --models small,base
"""

from __future__ import annotations

import argparse
import time
from datetime import datetime

from nemori_cli import deps
from nemori_cli.config import Settings
from nemori_cli.errors import LLMOutputError
from nemori_cli.prompts import consolidate as prompt
from nemori_cli.prompts import integrate
from nemori_cli.stages import Stage

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


D1, D2 = datetime(2024, 5, 10, 9, 0), datetime(2024, 5, 10, 13, 0)
# (earlier title, earlier narrative, new title, new narrative, continues?)
EPISODES = [
    (
        "Nina and Omar plan a hike",
        "On 10 May 2024 Nina and Omar agreed to hike Mount Tamalpais on Saturday from the Pantoll trailhead at 8.",
        "Nina and Omar choose the trail",
        "Later on 10 May 2024 Nina and Omar chose the Matt Davis trail for their Saturday hike on Mount Tamalpais.",
        True,
    ),
    (
        "Priya looks for a flat",
        "On 10 May 2024 Priya told Sam she was visiting two flats in Leith that week.",
        "Priya picks a flat",
        "On 10 May 2024 Priya told Sam she had chosen the second flat in Leith and would sign on Monday.",
        True,
    ),
    (
        "Caroline's support group",
        "On 8 May 2023 Caroline told Melanie about the LGBTQ support group she attended the day before.",
        "Melanie's painting",
        "On 8 May 2023 Melanie showed Caroline the lake sunrise she painted last year.",
        False,
    ),
    (
        "Priya looks for a flat",
        "On 10 May 2024 Priya told Sam she was visiting two flats in Leith that week.",
        "Sam's job offer",
        "On 10 May 2024 Sam told Priya he had received a job offer from Northwind.",
        False,
    ),
]


def _rate(answers: list[tuple[bool | None, bool]]) -> tuple[str, str, str, int]:
    positives = sum(e for _, e in answers)
    right = sum(g is e for g, e in answers)
    caught = sum(bool(g) and e for g, e in answers)
    wrong = sum(bool(g) and not e for g, e in answers)
    failed = sum(g is None for g, _ in answers)
    return f"{right}/{len(answers)}", f"{caught}/{positives}", f"{wrong}/{len(answers) - positives}", failed


def _ask(llm, messages, schema, field):
    try:
        return getattr(llm.complete(messages, schema=schema, stage=Stage("probe", 16)).value, field)
    except LLMOutputError:
        return None


def probe(model: str) -> list[dict]:
    llm = deps.build_llm(Settings.from_env(model=model))
    rows = []
    started = time.perf_counter()
    answers = [(_ask(llm, prompt.render(o, n), prompt.Outdated, "outdated"), e) for o, n, e in PAIRS]
    seconds = (time.perf_counter() - started) / len(PAIRS)
    check = all(_ask(llm, prompt.render(o, n), prompt.Outdated, "outdated") is e for o, n, e in prompt.SELF_CHECK)
    rows.append(("consolidation: outdated?", answers, check, seconds))
    started = time.perf_counter()
    answers = [
        (_ask(llm, integrate.render_pair((t0, n0, D1), (t1, n1, D2)), integrate.Continuation, "same_event"), e)
        for t0, n0, t1, n1, e in EPISODES
    ]
    seconds = (time.perf_counter() - started) / len(EPISODES)
    d = integrate.CHECK_DATE
    check = all(
        _ask(llm, integrate.render_pair((t0, n0, d), (t1, n1, d)), integrate.Continuation, "same_event") is e
        for t0, n0, t1, n1, e in integrate.SELF_CHECK
    )
    rows.append(("integration: continues?", answers, check, seconds))
    out = []
    for question, answers, check, seconds in rows:
        accuracy, caught, wrong, failed = _rate(answers)
        out.append(
            {
                "model": model,
                "question": question,
                "accuracy": accuracy,
                "yes when yes": caught,
                "yes when no": wrong,
                "unusable": failed,
                "passes self-check": check,
                "s per question": round(seconds, 2),
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="small,base")
    args = parser.parse_args()
    rows = [row for m in args.models.split(",") for row in probe(m)]
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in rows:
        print("| " + " | ".join(str(r[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
