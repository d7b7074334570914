"""New single-hop questions about turns no LoCoMo dev question asks about: a confirmation set no run has read.

    python scripts/observation_questions.py make [--limit N]          # writes docs/bench/observation-questions.jsonl
    python scripts/observation_questions.py assemble OUT.json [--samples conv-26,conv-41,conv-43]

Why: by the eleventh round every LoCoMo dev question had been read by several runs (docs/BEYOND.md), so a
choice tuned on one split could no longer be confirmed on questions nothing had seen. LoCoMo's annotators also
wrote, for every session, observations about each speaker with the turn that shows them (the `observation` field,
e.g. "Melanie painted a lake sunrise last year.", D1:14). Most of the dev questions were made from such lines;
many observations point at turns no dev question uses as evidence. `make` asks the `base` model (greedy) to turn
each such observation, with its turn, into one question and a short answer, and keeps only what passes
mechanical checks (`check`, applied again by `assemble`). `assemble` writes a LoCoMo-format file: the dev conversations unchanged, with these
questions (category 4, single-hop) in place of their own, for `nemori bench locomo`.

What it is not: the held-out LoCoMo questions. Its questions are all single-hop, were written by a 1.5B model,
and their answers are phrases copied from the observation or the turn; it measures whether a road puts one
unasked-about turn in front of the reader and the reader answers from it. Records carry every rejected draft and
why, so the checks can be read.

`make` is resumable: it appends one line per observation and skips those already written.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared/data/locomo/locomo-dev.json"
OUT = REPO / "docs/bench/observation-questions.jsonl"
DIA = re.compile(r"D\d+:\d+")
WORD = re.compile(r"[a-z0-9]+")
_STOP_WORDS = (
    "a an the of to in on at for and or but is are was were be been his her their its my your our with by from as "
    "that this these those it he she they them him i you we me us do did does what which who whom when where why how "
    "about into over after before up out"
)
STOP = set(_STOP_WORDS.split(" "))

SYSTEM = (
    "You write reading-comprehension questions about a chat between two friends. "
    "Given one fact about a person and the chat line it comes from, write one question that the line answers, "
    "in the third person, naming the person, and its answer: a short phrase of one to five words copied from "
    "the line or the fact. Do not put the answer in the question. Reply with JSON only."
)
EXAMPLES = [
    (
        "Fact: Melanie painted a lake sunrise last year which holds special meaning to her.\n"
        "Line (Melanie): Yeah, I painted that lake sunrise last year! It's special to me.",
        {"question": "What did Melanie paint last year?", "answer": "a lake sunrise"},
    ),
    (
        "Fact: Jon lost his job as a banker and decided to start his own dance studio.\n"
        "Line (Jon): Lost my job as a banker yesterday, so I'm gonna take a shot at starting my own business.",
        {"question": "What job did Jon lose?", "answer": "banker"},
    ),
]


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def content(text: str) -> set[str]:
    return {w for w in words(text) if w not in STOP}


def observations() -> list[dict]:
    """Every observation whose turns no dev question (any category) names as evidence, in file order."""
    out = []
    for sample in json.loads(DATA.read_text()):
        asked = {d for q in sample["qa"] for e in q.get("evidence") or [] for d in DIA.findall(str(e))}
        turns = {
            t["dia_id"]: t
            for key, session in sample["conversation"].items()
            if key.startswith("session_") and isinstance(session, list)
            for t in session
        }
        for key, people in sample["observation"].items():
            for person, items in people.items():
                for n, (text, evidence) in enumerate(items):
                    ids = DIA.findall(json.dumps(evidence))
                    if not ids or set(ids) & asked or any(i not in turns for i in ids):
                        continue
                    out.append(
                        {
                            "id": f"{sample['sample_id']}:{key}:{person}:{n}",
                            "sample": sample["sample_id"],
                            "person": person,
                            "fact": text,
                            "evidence": ids,
                            "lines": [f"{turns[i]['speaker']}: {turns[i]['text']}" for i in ids],
                        }
                    )
    return out


def check(draft: dict, item: dict) -> str | None:
    """Why a draft is not kept, or None. Mechanical on purpose: what a reader can verify from the record."""
    question, answer = str(draft.get("question", "")).strip(), str(draft.get("answer", "")).strip()
    if not question.endswith("?"):
        return "not a question"
    if len(words(question)) < 5:  # "What did Caroline do?" has no one answer
        return "question under 5 words"
    if not 1 <= len(words(answer)) <= 6:
        return "answer not 1-6 words"
    if item["person"].lower() not in question.lower():
        return "question does not name the person"
    said = " ".join(item["lines"]).lower()
    source = set(words(item["fact"].lower() + " " + said))
    if not set(words(answer)) <= source:
        return "answer has words neither the fact nor the line has"
    if not content(answer) & set(words(said)):
        return "answer has no word of the line"
    if content(answer) and content(answer) <= content(question):
        return "question holds the answer"
    return None


def make(limit: int | None) -> int:
    import llama_cpp  # the model only for `make`

    found = sorted((Path.home() / ".cache/nemori/models").glob("base-*.gguf"))
    if not found:
        print("no `base` model in ~/.cache/nemori/models: run `make install` (it assembles it)", file=sys.stderr)
        return 2
    model = found[0]
    done = set()
    if OUT.exists():
        done = {json.loads(line)["id"] for line in OUT.read_text().splitlines() if line.strip()}
    todo = [o for o in observations() if o["id"] not in done][:limit]
    llm = llama_cpp.Llama(model_path=str(model), n_ctx=2048, n_threads=2, n_batch=512, verbose=False, seed=0)
    schema = {
        "type": "object",
        "properties": {"question": {"type": "string"}, "answer": {"type": "string"}},
        "required": ["question", "answer"],
    }
    for number, item in enumerate(todo, 1):
        messages = [{"role": "system", "content": SYSTEM}]
        for shown, reply in EXAMPLES:
            messages += [{"role": "user", "content": shown}, {"role": "assistant", "content": json.dumps(reply)}]
        line = " / ".join(item["lines"])
        messages.append({"role": "user", "content": f"Fact: {item['fact']}\nLine ({item['person']}): {line}"})
        out = llm.create_chat_completion(
            messages=messages, temperature=0.0, max_tokens=80, response_format={"type": "json_object", "schema": schema}
        )
        text = out["choices"][0]["message"]["content"] or ""
        try:
            draft = json.loads(text)
        except json.JSONDecodeError:
            draft = {}
        why = check(draft, item) if draft else "not JSON"
        record = {**item, "draft": draft or text, "kept": why is None, "why": why}
        with OUT.open("a") as f:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
        print(f"{number}/{len(todo)} {'kept' if why is None else why}: {draft.get('question') if draft else text[:60]!r}", flush=True)
    return 0


def assemble(path: Path, samples: set[str] | None) -> int:
    if not OUT.exists():
        print(f"{OUT}: no records yet; run `python scripts/observation_questions.py make` first", file=sys.stderr)
        return 2
    kept: dict[str, list[dict]] = {}
    for line in OUT.read_text().splitlines():
        r = json.loads(line)
        # The checks are applied again, so that the file follows them as they are now, whatever `make` recorded.
        if isinstance(r["draft"], dict) and check(r["draft"], r) is None and (samples is None or r["sample"] in samples):
            kept.setdefault(r["sample"], []).append(
                {"question": r["draft"]["question"], "answer": r["draft"]["answer"], "evidence": r["evidence"], "category": 4}
            )
    return write_set(path, kept)


def write_set(path: Path, kept: dict[str, list[dict]]) -> int:
    """A LoCoMo-format file at ``path``: each dev conversation with questions, unchanged, with ``kept`` as its `qa`."""
    data = [{**sample, "qa": kept[sample["sample_id"]]} for sample in json.loads(DATA.read_text()) if sample["sample_id"] in kept]
    path.write_text(json.dumps(data, ensure_ascii=False))
    counts = ", ".join(f"{sample['sample_id']} {len(sample['qa'])}" for sample in data)
    print(f"{path}: {counts} questions")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make")
    m.add_argument("--limit", type=int)
    a = sub.add_parser("assemble")
    a.add_argument("out", type=Path)
    a.add_argument("--samples")
    args = parser.parse_args()
    if args.command == "make":
        return make(args.limit)
    return assemble(args.out, set(args.samples.split(",")) if args.samples else None)


if __name__ == "__main__":
    raise SystemExit(main())
