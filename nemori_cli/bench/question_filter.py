"""Which of a LoCoMo sample's questions a run asks: not those earlier runs read, and only those a pattern matches.

Why the first: a setting chosen on some questions scores too well on them,
and a confirmation split read round after round turns into a tuning split
(docs/BEYOND.md, eighth round: +5.4 on questions earlier rounds had asked,
+0.6 on the others, same run). ``--unasked FOLDER`` leaves out every
question a results folder answered, so a confirmation run reads only
questions no earlier run did. Why the second: a change that only touches
questions of one shape (those that name a date) is measured on them alone,
in the time the rest would have cost. ``--asked FOLDER`` is the first's
complement: only questions already read, for tuning.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from nemori_cli.bench.results import RESULTS
from nemori_cli.errors import InputError


@dataclass(frozen=True)
class QuestionFilter:
    asked: frozenset[tuple[str, int]] = field(default_factory=frozenset)  # (sample, question index) left out
    matching: re.Pattern[str] | None = None
    only: frozenset[tuple[str, int]] | None = None  # None: any question; else only these (a tuning split of read ones)

    def keeps(self, sample: str, index: int, text: str) -> bool:
        return (
            (sample, index) not in self.asked
            and (self.only is None or (sample, index) in self.only)
            and (self.matching is None or self.matching.search(text) is not None)
        )

    def active(self) -> bool:
        return bool(self.asked) or self.only is not None or self.matching is not None

    def key(self) -> dict:
        """What a results folder's identity records of this filter (bench/run_config.IDENTITY's scope_key): a folder
        resumed with other questions left out, or another pattern, would mix two question sets."""
        out: dict = {}
        if self.asked:
            out["left_out"] = _digest(self.asked)
        if self.only is not None:
            out["only"] = _digest(self.only)
        if self.matching is not None:
            out["matching"] = self.matching.pattern
        return out


def _digest(questions: frozenset[tuple[str, int]]) -> dict:
    listed = ",".join(f"{s}:{i}" for s, i in sorted(questions))
    return {"questions": len(questions), "sha256": hashlib.sha256(listed.encode()).hexdigest()[:16]}


def asked_in(folders: list[Path], option: str = "--unasked") -> frozenset[tuple[str, int]]:
    """Every LoCoMo question (sample, index) that a system answered in these results folders."""
    asked: set[tuple[str, int]] = set()
    for folder in folders:
        path = folder / RESULTS if folder.is_dir() else folder
        if not path.is_file():
            raise InputError(f"{option} {folder}: no {RESULTS} there (a `nemori bench` output folder holds one)")
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            try:
                record = json.loads(line) if line.strip() else {}
            except ValueError:
                continue  # a line cut short by an interrupted run (bench/results.py drops it the same way)
            if not isinstance(record, dict):
                continue
            if record.get("kind") != "answer" or record.get("benchmark", "locomo") != "locomo" or "sample" not in record:
                continue
            qid = str(record.get("qid", ""))
            index = qid.rsplit(":", 1)[-1]  # a haystack's ids name their sample: "conv-26:31"
            if not index.isdigit():
                raise InputError(f"{option} {path}:{n}: question id {qid!r} is not a LoCoMo question index")
            asked.add((str(record["sample"]), int(index)))
    if folders and not asked:
        # Leaving out nothing without a word would ask again what the option was given to keep out. One folder of
        # another benchmark among several is fine (`--unasked docs/bench/*/results.jsonl` names LongMemEval's too).
        raise InputError(f"{option}: no LoCoMo question was answered in {', '.join(str(f) for f in folders)}")
    return frozenset(asked)


def pattern(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text, re.IGNORECASE)
    except re.error as e:
        raise InputError(f"--matching {text!r} is not a regular expression: {e}") from None
