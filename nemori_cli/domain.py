"""The nouns of the product, shared by every layer.

Plain frozen dataclasses: the store maps rows to them, the pipeline builds
them, the CLI renders them. Timestamps are timezone-aware when the input said
so and naive otherwise; ``epoch`` orders both (naive read as UTC).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, get_args

# The largest id a store can hold (SQLite's and PostgreSQL's integers are 64-bit): a larger one is a usage
# error, refused by the CLI, the API and the MCP server before any store sees it, not a crash in the driver.
MAX_ID = 2**63 - 1

# The names a user gives, declared here once: the CLI's choices, the API's types and the lookups below them
# read these (here, so that --help and `import nemori_cli` load no mode and no importer).
# How memory is kept (memory/modes.py holds the mode of each name).
MemoryName = Literal["native", "summary", "naive-rag", "amem", "nemori+amem"]
MEMORY_MODES: tuple[str, ...] = get_args(MemoryName)
# What an input is: "auto" tells it from the first bytes (importers/detect.py), the others name a reader (importers/formats.py).
InputFormatName = Literal["auto", "jsonl", "locomo", "chatgpt", "claude", "whatsapp", "telegram", "openai", "longmemeval"]
INPUT_FORMATS: tuple[str, ...] = get_args(InputFormatName)


def to_epoch(ts: datetime) -> float:
    """Seconds since 1970 for ordering; a naive timestamp is read as UTC."""
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return ts.timestamp()


@dataclass(frozen=True)
class IncomingMessage:
    """One message as read from an input, before it is stored."""

    speaker: str
    content: str
    timestamp: datetime
    source_id: str | None = None  # the id it came with (LoCoMo dia_id, JSONL id)
    session: str | None = None
    line: int = 0  # where it was read from, for error messages


@dataclass(frozen=True)
class Message:
    """A stored message. ``episode_id`` is None while it is pending."""

    id: int
    user: str
    key: str  # stable identity: re-ingesting the same input adds nothing
    speaker: str
    content: str
    timestamp: datetime
    source_id: str | None
    session: str | None
    episode_id: int | None = None


@dataclass(frozen=True)
class Episode:
    id: int
    user: str
    title: str
    narrative: str
    start: datetime  # first message's time
    end: datetime  # last message's time
    created_at: str
    boundary: str  # how its group was found: "model", "similarity", "time-gap", "fallback", "flush", "merged"
    messages: tuple[Message, ...] = field(default_factory=tuple)
    status: str = "active"  # active | superseded (merged into a later episode)
    superseded_by: int | None = None
    superseded_reason: str | None = None


@dataclass(frozen=True)
class Fact:
    """A durable statement distilled from episodes (semantic memory)."""

    id: int
    user: str
    text: str
    created_at: str
    status: str  # active | superseded
    source_episode_ids: tuple[int, ...] = ()
    superseded_by: int | None = None
    superseded_reason: str | None = None
    superseded_at: str | None = None
    origin: str = "new"  # how it came to be: new | merge | conflict
    # In conversation time (see store/migrations.py, schema 7): known from the
    # end of the episode it was distilled from until its successor's
    # valid_from. None: not known (a fact older than the record).
    episode_id: int | None = None  # the episode it was distilled from
    valid_from: datetime | None = None
    valid_until: datetime | None = None


@dataclass(frozen=True)
class PredictionRecord:
    """What the prediction step made of one episode: why its facts exist (schema 7)."""

    episode_id: int
    method: str  # predicted | nothing-evoked | prediction-failed | direct (memory/semantic.py)
    predicted: str | None  # the prediction; None when none was made
    evoked: tuple[str, ...]  # the known facts it was predicted from
    missed: tuple[str, ...] | None  # what the distillation found the prediction missed; None: no usable answer
    dropped: tuple[str, ...]  # of those, dropped for naming what the messages never say
    created_at: str


@dataclass(frozen=True)
class Note:
    """An A-MEM note: one memory with the attributes the model gave it, and its links."""

    id: int
    user: str
    content: str
    timestamp: datetime  # when what it says happened
    keywords: tuple[str, ...]
    tags: tuple[str, ...]
    context: str
    origin: str  # model | fallback: where the attributes came from
    message_id: int | None  # made from this message (--memory amem)
    episode_id: int | None  # made from a fact of this episode (--memory nemori+amem)
    created_at: str
    updated_at: str | None = None  # last evolved
    links: tuple[int, ...] = ()  # ids of the notes it is linked to


@dataclass(frozen=True)
class NoteChange:
    """One change memory evolution made to a note: which field, from what, to what, and why (which new note)."""

    id: int
    note_id: int
    made_by: int | None
    field: str  # context | tags
    before: str
    after: str
    created_at: str


@dataclass(frozen=True)
class Hit:
    """One retrieved memory with its fused score and the ranks that made it."""

    kind: str  # "episode" | "fact" | "summary" | "note" | "message" (a raw turn, with its neighbours in messages)
    id: int
    score: float
    title: str
    text: str
    start: datetime
    end: datetime
    vector_rank: int | None = None
    text_rank: int | None = None
    similarity: float | None = None  # cosine similarity, when the vector index found it
    messages: tuple[Message, ...] = field(default_factory=tuple)
    linked_from: int | None = None  # a note retrieved because a top note links to it
    context: str = ""  # a note's one-sentence context


@dataclass(frozen=True)
class Usage:
    """What one LLM call cost."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    ms: float = 0.0


@dataclass(frozen=True)
class Answer:
    question: str
    answer: str
    hits: tuple[Hit, ...]
    usage: Usage
    search_ms: float
    answer_ms: float
    cited: tuple[int, ...] = ()  # episode ids the answer comes from
    failed: bool = False  # the model gave no usable answer (the text says so)
    abstained: bool = False  # the answer says the memories do not hold it
    model: str = ""  # the model that answered (its id), filled in by the API
    problem: str = ""  # when failed: why, in the LLM layer's words (a fallback's detail)


# What the LLM layer logs (llm/base.CallLog) and store/telemetry.py writes.
@dataclass(frozen=True)
class CallRecord:
    stage: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    ms: float
    attempts: int
    outcome: str  # ok | failed


@dataclass(frozen=True)
class EventRecord:
    stage: str
    kind: str  # repaired | fallback | decision
    detail: str


@dataclass(frozen=True)
class Backlog:
    """Stored messages a memory mode has not made memory of yet."""

    messages: int
    characters: int
