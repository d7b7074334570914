"""How much memory-building input cheap filters would take away, before any model runs.

Issue 32 part 3 asks to measure filters that run before any LLM call (greetings,
acknowledgements, duplicates, very short turns) and report what each would save
before making one a default. The memory-building prompts read each message's first
``stages.MESSAGE_CHARS_READ`` characters (narration, then prediction and
distillation read them again), so what a filter can save is bounded by the share of
those characters it removes, and, for a call to be saved whole, by the episodes
that would be left with nothing but filtered turns.

For each corpus this prints, per filter: messages caught, their share of the
characters the prompts read, and the stretches (runs of messages without a gap of
``--gap-minutes``) left with nothing to narrate. No model is loaded.

    python scripts/measure_filters.py --out docs/bench/filters-measured.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nemori_cli import stages  # noqa: E402
from nemori_cli.bench.datasets import longmemeval_items  # noqa: E402
from nemori_cli.importers import formats  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"

# Whole turns that carry no memory on their own: greetings, thanks, assent,
# farewells. Matched on the whole turn, lower-cased, punctuation and emoji dropped.
_SMALL_TALK = {
    "hi",
    "hey",
    "hello",
    "hiya",
    "yo",
    "morning",
    "good morning",
    "good night",
    "goodnight",
    "evening",
    "thanks",
    "thank you",
    "thx",
    "ty",
    "thanks a lot",
    "thank you so much",
    "thanks so much",
    "cheers",
    "ok",
    "okay",
    "k",
    "kk",
    "sure",
    "yes",
    "yeah",
    "yep",
    "no",
    "nope",
    "cool",
    "nice",
    "great",
    "awesome",
    "got it",
    "sounds good",
    "perfect",
    "lol",
    "haha",
    "hahaha",
    "wow",
    "bye",
    "see you",
    "see ya",
    "later",
    "talk soon",
    "take care",
    "you too",
    "same",
    "right",
    "true",
    "agreed",
    "alright",
    "all right",
    "ok thanks",
    "okay thanks",
    "great thanks",
    "thanks bye",
    "np",
    "no problem",
    "you're welcome",
    "youre welcome",
}
_WORD = re.compile(r"[a-z0-9']+")


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def small_talk(text: str, seen: set[str]) -> bool:
    return " ".join(_words(text)) in _SMALL_TALK


def short(text: str, seen: set[str]) -> bool:
    return len(_words(text)) <= 3


def duplicate(text: str, seen: set[str]) -> bool:
    return " ".join(_words(text)) in seen


FILTERS: dict[str, Callable[[str, set[str]], bool]] = {
    "small-talk": small_talk,
    "at-most-3-words": short,
    "duplicate-in-conversation": duplicate,
}


@dataclass
class Turn:
    conversation: str
    time: datetime
    text: str


def _read(fmt: str, path: Path, **kw) -> list[Turn]:
    with path.open("rb") as stream:
        imported = formats.read(fmt, stream, str(path), **kw)
    return [Turn(m.session or "", m.timestamp, m.content) for m in imported.messages]


def corpora(export: Path | None) -> dict[str, list[Turn]]:
    out: dict[str, list[Turn]] = {"examples/chat.jsonl": _read("jsonl", ROOT / "examples" / "chat.jsonl")}
    locomo = SHARED / "locomo" / "locomo-dev.json"
    if locomo.exists():
        for sample in ("conv-26", "conv-30"):
            out[f"locomo {sample}"] = _read("locomo", locomo, sample=sample)
    lme = SHARED / "longmemeval" / "longmemeval-oracle-dev.json"
    if lme.exists():
        with lme.open("rb") as stream:
            items = longmemeval_items(stream, str(lme))
        out["longmemeval oracle dev"] = [
            Turn(f"{item.question_id}:{sid}", m.timestamp, m.content) for item in items for sid, _, ms in item.sessions for m in ms
        ]
    if export is not None:
        out[f"chatgpt export ({export.name})"] = _read("chatgpt", export)
    return out


def measure(turns: list[Turn], gap: timedelta) -> dict:
    read = [min(len(t.text), stages.MESSAGE_CHARS_READ) for t in turns]
    total = sum(read)
    result: dict = {"messages": len(turns), "chars_read": total, "filters": {}}
    for name, caught in FILTERS.items():
        # A turn is a duplicate of an earlier one in its own conversation only: the same
        # question asked in another conversation is about that conversation's subject.
        seen: dict[str, set[str]] = {}
        hits: list[bool] = []
        for t in turns:
            earlier = seen.setdefault(t.conversation, set())
            hits.append(caught(t.text, earlier))
            earlier.add(" ".join(_words(t.text)))
        stretches = empty = 0
        start = 0
        for i in range(1, len(turns) + 1):
            ends = i == len(turns) or turns[i].conversation != turns[i - 1].conversation or turns[i].time - turns[i - 1].time >= gap
            if ends:
                stretches += 1
                empty += all(hits[start:i])
                start = i
        chars = sum(r for r, h in zip(read, hits) if h)
        result["filters"][name] = {
            "messages": sum(hits),
            "messages_share": round(sum(hits) / len(turns), 4) if turns else 0.0,
            "chars_read": chars,
            "chars_share": round(chars / total, 4) if total else 0.0,
            "stretches": stretches,
            "stretches_all_caught": empty,
            "examples": [t.text[:60] for t, h in zip(turns, hits) if h][:5],
        }
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--export", type=Path, help="a ChatGPT export (scripts/make_chatgpt_export.py) to measure too")
    ap.add_argument("--gap-minutes", type=float, default=120.0, help="the partition's gap (PartitionSettings.gap_minutes)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    record = {
        "command": "scripts/measure_filters.py " + " ".join(sys.argv[1:]),
        "message_chars_read": stages.MESSAGE_CHARS_READ,
        "corpora": {name: measure(turns, timedelta(minutes=args.gap_minutes)) for name, turns in corpora(args.export).items()},
    }
    for name, r in record["corpora"].items():
        print(f"{name}: {r['messages']} messages, {r['chars_read']:,} characters read")
        for f, m in r["filters"].items():
            print(
                f"  {f:16} {m['messages']:5} messages ({m['messages_share']:.1%}), {m['chars_share']:.2%} of characters read,"
                f" {m['stretches_all_caught']} of {m['stretches']} stretches left empty"
            )
    if args.out:
        args.out.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
