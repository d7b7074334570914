"""Every LLM stage, named once, with the most output tokens one of its calls may use.

The name is what the call log records and what reports and rates group by;
the cap bounds each call's decoding (the schemas keep answers well under it:
a cap is a guard against a model that rambles, not a length target).
The order is the method's, as the Nemori paper's cost table lists stages.
"""

from __future__ import annotations

from dataclasses import dataclass

# What the memory-building prompts read of one message: its first 400
# characters (partition reads 240). A chat export's long assistant turns
# (often 2,000+ characters) then cost what a short turn does, and the
# estimates count characters as read (store/messages.py), not as stored.
# The raw message is always kept whole; only the prompt is clipped.
MESSAGE_CHARS_READ = 400


@dataclass(frozen=True)
class Stage:
    name: str
    max_tokens: int
    ingest: bool = True  # spent while building memory (not while asking or grading)


PARTITION = Stage("partition", 48)  # a few boundary indices
NARRATION = Stage("narration", 360)  # a title and a narrative paragraph
INTEGRATION = Stage("integration", 16)  # yes/no: does an episode continue an earlier one
MERGE = Stage("integration", 420)  # the two narratives rewritten as one (logged under integration)
PREDICTION = Stage("prediction", 160)  # what known facts predict of an episode
DISTILLATION = Stage("distillation", 320)  # the facts the prediction missed
CONSOLIDATION = Stage("consolidation", 16)  # yes/no: does a new fact outdate an older one
SUMMARY = Stage("summary", 420)  # --memory summary: the running summary rewritten
NOTE = Stage("note", 110)  # A-MEM: a note's keywords, context and tags
LINKING = Stage("linking", 200)  # A-MEM: links to neighbours and their evolution
ANSWER = Stage("answer", 120, ingest=False)  # a few words, cited (full-context prompts keep this much free)
JUDGE = Stage("judge", 96, ingest=False)  # the bench's LLM grader (LoCoMo)
JUDGE_YES_NO = Stage("judge", 12, ingest=False)  # the bench's LLM grader (LongMemEval)

_ALL = (
    PARTITION,
    NARRATION,
    INTEGRATION,
    MERGE,
    PREDICTION,
    DISTILLATION,
    CONSOLIDATION,
    SUMMARY,
    NOTE,
    LINKING,
    ANSWER,
    JUDGE,
    JUDGE_YES_NO,
)

ORDER: tuple[str, ...] = tuple(dict.fromkeys(s.name for s in _ALL))  # each name once, in the method's order
INGEST: tuple[str, ...] = tuple(dict.fromkeys(s.name for s in _ALL if s.ingest))


def rank(name: str) -> tuple[int, str]:
    """Sort key: the method's order, then unknown names alphabetically."""
    return (ORDER.index(name) if name in ORDER else len(ORDER), name)
