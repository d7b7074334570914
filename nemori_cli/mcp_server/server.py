"""An MCP server over stdio with four tools: remember, recall, ask and forget.

Built on the official SDK (`mcp` 2.x, its MCPServer): each tool's input
schema comes from its signature, its output schema from the pydantic model it
returns, and each carries the spec's annotations, so a client can let recall
and ask run unprompted and ask before forget.

Scoping: the server is started for one user (``--user``) and one database.
A tool call may name a ``user`` only when the server was started with
``--any-user``; otherwise naming another user is refused, so an agent given
Priya's memory cannot read Sam's.

Errors: a NemoriError (bad messages, unknown id, a model that failed) becomes
an MCP tool error whose text is nemori's one line, and a call with arguments
that do not fit the schema is refused by the SDK before our code runs; in both
cases nothing is written (the API checks everything before its first write).
Models load on the first call that needs them and stay loaded.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, TypedDict

from pydantic import BaseModel, Field

from nemori_cli import __version__
from nemori_cli.api import Memory
from nemori_cli.domain import MAX_ID
from nemori_cli.errors import ConfigError, NemoriError

INSTRUCTIONS = (
    "Long-term memory of conversations. `remember` stores timestamped messages and makes episodes and facts of them; "
    "`recall` searches memory without an LLM; `ask` answers a question from memory, citing episodes (messages not built into memory yet are read as raw turns, and `built` says how much is); "
    "`forget` deletes an episode, fact or note for good."
)


# -- what the tools take and give (their JSON schemas) ---------------------
# At module level: the SDK reads the tools' annotations by name from here.

AsOf = Annotated[
    str | None,
    Field(
        default=None,
        description="Read memory as it stood at this point of the conversation (ISO date, meaning the end of that day, or date-time).",
    ),
]
UserArg = Annotated[
    str | None, Field(default=None, description="Whose memory (only if the server allows any user; default: the server's).")
]


class MessageIn(BaseModel):
    speaker: Annotated[str, Field(min_length=1, description="Who said it, e.g. a name, 'user' or 'assistant'.")]
    content: Annotated[str, Field(min_length=1, description="What was said.")]
    timestamp: Annotated[str, Field(description="When, ISO 8601, e.g. 2024-06-02T10:00:00 (a trailing Z means UTC).")]
    id: Annotated[str | None, Field(default=None, description="Your id for it: the same id is never stored twice.")] = None
    session: Annotated[str | None, Field(default=None, description="The conversation it belongs to.")] = None


class Remembered(BaseModel):
    added: int = Field(description="Messages stored that were new.")
    changed: int = Field(description="Messages already stored under their id with other text (kept as stored).")
    episodes: int = Field(description="Episodes made from them in this call.")
    facts: int = Field(description="Facts distilled in this call.")
    notes: int = Field(description="A-MEM notes made in this call.")
    pending: int = Field(description="Messages stored but not yet made into memory.")
    seconds: float
    built: Built | None = Field(default=None, description="How much of the memory is built, when something is pending.")


class MemoryItem(BaseModel):
    kind: Literal["episode", "fact", "summary", "note", "message"]
    id: int
    title: str
    text: str
    start: str = Field(description="When it happened (ISO 8601).")
    end: str
    score: float


class Recalled(BaseModel):
    query: str
    memories: list[MemoryItem]


class Built(BaseModel):
    pending: int = Field(description="Messages stored (searchable as raw turns) but not yet built into episodes and facts.")
    built_through: str | None = Field(description="Everything said up to this moment is built (ISO 8601; null: nothing is).")
    pending_from: str | None = Field(description="The oldest message not built yet (ISO 8601; null: all are built).")
    eta_seconds: float | None = Field(description="Model time the rest needs, at the best rates known.")
    building: bool = Field(description="A `nemori build` is running on this database.")


class Answered(BaseModel):
    question: str
    answer: str
    abstained: bool = Field(description="The memory does not hold the answer.")
    failed: bool = Field(description="The model gave no usable answer.")
    cited_episodes: list[int]
    memories: list[MemoryItem]
    built: Built = Field(description="How much of the memory is built; an answer about messages not built yet read their raw turns only.")


class Forgotten(BaseModel):
    kind: str
    id: int
    deleted: dict[str, int] = Field(description="Rows deleted, table by table.")


def _memory_out(hit) -> MemoryItem:
    return MemoryItem(
        kind=hit.kind, id=hit.id, title=hit.title, text=hit.text, start=_iso(hit.start), end=_iso(hit.end), score=round(hit.score, 6)
    )


def _iso(value: datetime) -> str:
    return value.isoformat()


# -- the server ---------------------------------------------------------------


class _Presets(TypedDict):
    model: str | None
    embedder: str | None
    answer_model: str | None


class Memories:
    """One Memory per user, opened on first use; the bound user unless --any-user allows others."""

    def __init__(self, db_path: str, user: str, *, any_user: bool, model: str | None, embedder: str | None, answer_model: str | None):
        self.db_path, self.user, self.any_user = db_path, user, any_user
        self.presets: _Presets = {"model": model, "embedder": embedder, "answer_model": answer_model}
        self._open: dict[str, Memory] = {}

    def of(self, user: str | None) -> Memory:
        name = self.user if user is None or user == self.user else user
        if name != self.user and not self.any_user:
            raise ConfigError(f"this server serves user {self.user!r} only; start it with --any-user to let a call name another")
        if name not in self._open:
            self._open[name] = Memory(self.db_path, user=name, **self.presets)
        return self._open[name]

    def close(self) -> None:
        for memory in self._open.values():
            memory.close()


def build(memories: Memories):
    """The MCPServer with nemori's tools (separate from `serve` so a test can list them in process)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    server = MCPServer("nemori", instructions=INSTRUCTIONS, version=__version__)

    def tool(title: str, *, read_only: bool, destructive: bool):
        """Register a tool with its title and the spec's hints: every nemori tool is idempotent and touches only the local file."""
        hints = ToolAnnotations(
            title=title, read_only_hint=read_only, destructive_hint=destructive, idempotent_hint=True, open_world_hint=False
        )
        return server.tool(title=title, annotations=hints, structured_output=True)

    def run(call):
        try:
            return call()
        except NemoriError as e:  # one line, as the CLI prints it; the SDK marks the result isError
            raise ToolError(e.message) from None

    @tool("Remember messages", read_only=False, destructive=False)
    def remember(
        messages: Annotated[list[MessageIn], Field(min_length=1, description="Messages in time order.")],
        flush: Annotated[bool, Field(description="Make episodes of the last messages too (true), or keep them pending for more.")] = True,
        build: Annotated[
            bool,
            Field(
                description="Build episodes and facts now (true), or only store the messages: searchable at once, built later by `nemori build`."
            ),
        ] = True,
        user: UserArg = None,
    ) -> Remembered:
        """Store timestamped messages and make episodes and facts of them. A message already stored under its id is not stored again."""

        def call():
            memory = memories.of(user)
            result = memory.ingest([m.model_dump() for m in messages], flush=flush, build=build)
            state = memory.build_state().as_json() if result.pending else None
            return Remembered(
                added=result.added,
                changed=result.changed,
                episodes=result.episodes,
                facts=result.facts,
                notes=result.notes,
                pending=result.pending,
                seconds=round(result.seconds, 2),
                built=Built(**{k: state[k] for k in Built.model_fields}) if state else None,
            )

        return run(call)

    @tool("Recall memories", read_only=True, destructive=False)
    def recall(
        query: Annotated[str, Field(min_length=1, description="What to look for.")],
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many memories.")] = 10,
        as_of: AsOf = None,
        user: UserArg = None,
    ) -> Recalled:
        """Search memory (episodes, facts, notes, raw messages) without any LLM; best first, each with its date."""
        return run(lambda: Recalled(query=query, memories=[_memory_out(h) for h in memories.of(user).search(query, as_of=as_of)[:limit]]))

    # It writes only the answer's cost to the usage log; what is remembered is unchanged.
    @tool("Ask memory", read_only=True, destructive=False)
    def ask(
        question: Annotated[str, Field(min_length=1, description="A question about what was said, e.g. 'When did Priya move to Berlin?'")],
        today: Annotated[
            str | None, Field(default=None, description="Date to treat as today for 'how long ago' questions (ISO 8601).")
        ] = None,
        as_of: AsOf = None,
        user: UserArg = None,
    ) -> Answered:
        """Answer a question from memory with the local model, citing the episodes used."""

        def call():
            memory = memories.of(user)
            answer = memory.ask(question, today=today, as_of=as_of)
            state = memory.build_state().as_json()
            return Answered(
                question=answer.question,
                answer=answer.answer,
                abstained=answer.abstained,
                failed=answer.failed,
                cited_episodes=list(answer.cited),
                memories=[_memory_out(h) for h in answer.hits],
                built=Built(**{k: state[k] for k in Built.model_fields}),
            )

        return run(call)

    @tool("Forget a memory", read_only=False, destructive=True)
    def forget(
        kind: Annotated[Literal["episode", "fact", "note"], Field(description="What to delete.")],
        id: Annotated[
            int,
            # strict: "1" is not an id (lax pydantic would read it as 1 and delete that item);
            # le: SQLite's integers are 64-bit, a larger one is refused here, not by the driver.
            Field(ge=1, le=MAX_ID, strict=True, description="Its id, as recall gives it."),
        ],
        user: UserArg = None,
    ) -> Forgotten:
        """Delete one episode (with its messages and the facts only it supports), fact or note, for good: it is scrubbed from the file."""
        return run(lambda: Forgotten(kind=kind, id=id, deleted=memories.of(user).forget(kind, id)))

    return server


def serve(
    db_path: str,
    user: str,
    *,
    any_user: bool = False,
    model: str | None = None,
    embedder: str | None = None,
    answer_model: str | None = None,
) -> None:
    """Run the server on stdin/stdout until the client closes it."""
    memories = Memories(db_path, user, any_user=any_user, model=model, embedder=embedder, answer_model=answer_model)
    try:
        build(memories).run("stdio")
    finally:
        memories.close()
