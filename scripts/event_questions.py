"""When-questions about events no LoCoMo dev question asks about: a temporal confirmation set no run has read.

    python scripts/event_questions.py make                 # writes docs/bench/event-questions.jsonl (seconds, no model)
    python scripts/event_questions.py assemble OUT.json [--samples conv-26,conv-41,conv-43]

Why: the observation set (scripts/observation_questions.py) is single-hop; where a built memory should show what
raw chunks cannot is time ("when did ..."). LoCoMo's annotators wrote, for each session, the events of each
speaker with the session's date (`event_summary`: "Jon loses his job as a banker.", 20 January, 2023). LoCoMo's
own temporal questions were made from many of them; the others nobody has asked about.

`make` turns each event into "When did Jon lose his job as a banker?" by rule, with no model, so every question
and every drop can be re-read from the record:

- the event must open with its speaker's name and a verb in the present tense ("loses", "is inspired");
  the verb is put back to its plain form by the rules of English spelling (`plain`), "is" becomes "was";
- the answer is the month and year of the session ("January 2023"), not its day: an event is told as
  "yesterday" or "last week", so its day is not the session's. Sessions in the first seven days of a month are
  left out, as their "last week" may lie in the month before;
- the event must be found in its session: a turn of that session shares at least two word stems with it
  (beside the person's name); the best such turn is the question's evidence (an approximation, said as such);
- nobody has asked when: no dev question of the conversation that asks about time (category 2, or opening with
  "When") shares two stems with the event or names that turn as its evidence. A single-hop question may have
  read the same turn ("What did Jon lose?"); its time was not what it asked.

Set F1 on "January 2023" gives an answer of "19 January 2023" 0.8 and "January 2023" 1.0. What it is not:
LoCoMo's held-out temporal questions (no "how long after", no relative golds such as "the week before 9 June").

Known limits of the rule, kept as they are because the fourteenth round read the set it makes (docs/BEYOND.md):
only the first verb is put back ("When did John join a new job and works with ..."); an event told as "last month"
gets the session's month; a dev question that asks the same time in other words and names a neighbouring turn is
not seen; a double space after the name drops the event. A next version should mend these and be read as a new set.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import datetime
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from scripts.observation_questions import DATA, write_set  # noqa: E402  (one writer of LoCoMo-format sets)
from scripts.observation_questions import STOP as OBSERVATION_STOP  # noqa: E402

OUT = REPO / "docs/bench/event-questions.jsonl"
WORD = re.compile(r"[a-z0-9]+")
STOP = OBSERVATION_STOP | {"new", "some", "more", "has", "have", "had"}  # words that say which event, not what
# Verbs whose plain form the spelling rules below would get wrong.
IRREGULAR = {"has": "have", "does": "do", "goes": "go", "is": "was", "are": "were", "was": "was", "were": "were", "focuses": "focus"}


def plain(verb: str) -> str | None:
    """The plain form of a present-tense verb of the third person ("loses" -> "lose"), or None if it is not one."""
    if verb in IRREGULAR:
        return IRREGULAR[verb]
    if not verb.endswith("s") or verb.endswith("ss") or len(verb) < 3:
        return None
    if verb.endswith("ies") and len(verb) > 4:
        return verb[:-3] + "y"  # tries, carries
    if verb.endswith(("sses", "shes", "ches", "xes", "zes", "oes")):
        return verb[:-2]  # finishes, watches, fixes
    return verb[:-1]  # loses, takes, begins, starts


def question_of(event: str, person: str) -> tuple[str | None, str]:
    """("When did Jon lose his job as a banker?", "") or (None, why not)."""
    text = event.strip().rstrip(".").strip()
    if not text.startswith(person + " "):
        return None, "does not open with its speaker's name"
    verb, _, rest = text[len(person) + 1 :].partition(" ")
    form = plain(verb)
    if form is None:
        return None, f"{verb!r} is not a present-tense verb of the third person"
    if verb in ("is", "are", "was", "were"):
        return f"When was {person} {rest}?", ""
    return f"When did {person} {form}{' ' + rest if rest else ''}?", ""


@cache
def _stem(word: str) -> str:
    return _porter().stem(word)


@cache
def _porter():
    from nltk.stem import PorterStemmer  # LoCoMo's own scorer stems with it too (nemori_cli/bench/metrics.py)

    return PorterStemmer()  # one for the whole run: every event is compared with every turn of its session


def stems(text: str, leave: set[str] = frozenset()) -> set[str]:
    return {_stem(w) for w in WORD.findall(text.lower()) if w not in STOP and w not in leave}


def month_of(date: str) -> tuple[str | None, str]:
    """("January 2023", "") from "20 January, 2023", or (None, why not)."""
    day = datetime.strptime(date.replace(",", ""), "%d %B %Y")
    if day.day <= 7:
        return None, f"session on {date}: 'last week' may be the month before"
    return day.strftime("%B %Y"), ""


def events(sample: dict) -> list[dict]:
    """Every event of the conversation with its session and date, in file order."""
    out = []
    for key, value in sample["event_summary"].items():
        session = int(key.rsplit("_", 1)[1])
        for person, items in value.items():
            if person == "date":
                continue
            out.extend(
                {"sample": sample["sample_id"], "session": session, "date": value["date"], "person": person, "event": e} for e in items
            )
    return out


def judge(item: dict, sample: dict) -> dict:
    """The record of one event: its question, answer and evidence, or why it is dropped."""
    speakers = {sample["conversation"]["speaker_a"].lower(), sample["conversation"]["speaker_b"].lower()}
    record = {**item, "question": None, "answer": None, "evidence": [], "dropped": ""}
    question, why = question_of(item["event"], item["person"])
    answer, why_date = month_of(item["date"])
    said = stems(item["event"], speakers)
    turns = sample["conversation"].get(f"session_{item['session']}", [])
    best = max(turns, key=lambda t: len(said & stems(t.get("text", ""), speakers)), default=None)
    shared = len(said & stems(best.get("text", ""), speakers)) if best else 0
    asked = [  # "when" questions: what a single-hop question read of the turn was not its time
        q["question"]
        for q in sample["qa"]
        if (q.get("category") == 2 or q["question"].lower().startswith("when"))
        and (
            len(said & stems(q["question"] + " " + str(q.get("answer", "")), speakers)) >= 2
            or (best is not None and best["dia_id"] in q.get("evidence", []))
        )
    ]
    if question is None:
        record["dropped"] = why
    elif answer is None:
        record["dropped"] = why_date
    elif shared < 2:
        record["dropped"] = f"not found in session {item['session']}'s turns ({shared} stem shared)"
    elif asked:
        record["dropped"] = f"a dev question asks about it: {asked[0]!r}"
    if not record["dropped"]:
        record.update(question=question, answer=answer, evidence=[best["dia_id"]])
    return record


def make() -> int:
    if not DATA.is_file():
        print(f"{DATA}: LoCoMo's development file not found (../shared beside the project)", file=sys.stderr)
        return 2
    data = json.loads(DATA.read_text())
    records = [judge(item, sample) for sample in data for item in events(sample)]
    OUT.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    kept = [r for r in records if not r["dropped"]]
    per = {s["sample_id"]: sum(r["sample"] == s["sample_id"] for r in kept) for s in data}
    print(f"{OUT}: {len(kept)} of {len(records)} events kept ({', '.join(f'{k} {v}' for k, v in per.items())})")
    return 0


def assemble(path: Path, samples: set[str] | None) -> int:
    if not OUT.exists():
        print(f"{OUT}: no records yet; run `python scripts/event_questions.py make` first", file=sys.stderr)
        return 2
    kept: dict[str, list[dict]] = {}
    for line in OUT.read_text().splitlines():
        r = json.loads(line)
        if not r["dropped"] and (samples is None or r["sample"] in samples):
            kept.setdefault(r["sample"], []).append(
                {"question": r["question"], "answer": r["answer"], "evidence": r["evidence"], "category": 2}
            )
    return write_set(path, kept)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("make")
    a = sub.add_parser("assemble")
    a.add_argument("out", type=Path)
    a.add_argument("--samples")
    args = parser.parse_args()
    if args.command == "make":
        return make()
    return assemble(args.out, set(args.samples.split(",")) if args.samples else None)


if __name__ == "__main__":
    raise SystemExit(main())
