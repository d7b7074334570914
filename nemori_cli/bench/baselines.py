"""The alternatives a user would pick instead of a memory: the whole conversation, or chunks of it.

full-context: every message in the prompt, grouped by session, the oldest
left out when the answer model's window is too small (how many is reported).
rag-N: the conversation cut into chunks of about N tokens at message
boundaries, embedded, and the nearest chunks given to the model; the
Nemori paper's RAG-4096 (one chunk) and a small-chunk setting (256 tokens,
four chunks). Both keep their text in the same SQLite store as Nemori, as
episodes with boundary 'chunk' or as plain messages, so database size and
search time compare like for like.
"""

from __future__ import annotations

import time

from nemori_cli.bench.systems import ANSWER_TOKENS, Listing, Progress, Reply, Shared, Storage, System, reply
from nemori_cli.domain import Hit, IncomingMessage, Message
from nemori_cli.embed.base import identity
from nemori_cli.prompts import answer as answer_prompt
from nemori_cli.prompts.render import message_lines
from nemori_cli.retrieval.answer import Layout, answer_hits
from nemori_cli.store import episodes as episode_sql
from nemori_cli.store import messages as message_sql
from nemori_cli.store.contract import Store
from nemori_cli.store.episodes import EpisodeDraft

RAW_LIMIT = 4000  # characters per message shown: raw baselines see messages whole
PROMPT_MARGIN = 64  # tokens kept free for the chat template around the prompt
QUESTION_RESERVE = 96  # tokens kept for the question itself (a longer one gets its own size)
RAW_LAYOUT = Layout("messages", message_limit=RAW_LIMIT)  # blocks of raw messages, as the paper's baselines read them
OFFERED = Listing()  # the systems and groups below; bench/catalog.py registers them by name
register, register_group = OFFERED.register, OFFERED.register_group


def _store_messages(db: Store, user: str, messages: list[IncomingMessage]) -> list[Message]:
    with db.transaction():
        message_sql.insert_messages(db, user, messages)
    return message_sql.all_messages(db, user)


def _by_session(messages: list[Message]) -> list[Hit]:
    """One citable block per session (the conversation's own structure), in time order."""
    blocks: list[list[Message]] = []
    for m in messages:
        if blocks and blocks[-1][-1].session == m.session:
            blocks[-1].append(m)
        else:
            blocks.append([m])
    return [
        Hit(
            kind="episode",
            id=i,
            score=0.0,
            title=f"session {b[0].session or i}",
            text="",
            start=b[0].timestamp,
            end=b[-1].timestamp,
            messages=tuple(b),
        )
        for i, b in enumerate(blocks, start=1)
    ]


class FullContextSystem(System):
    name = "full-context"
    description = "the whole conversation in the prompt, oldest messages left out beyond the context window"
    build_key = "raw-messages"

    def build(self, db: Store, user: str, messages: list[IncomingMessage], shared: Shared, progress: Progress | None) -> None:
        _store_messages(db, user, messages)
        if progress:
            progress(len(messages), len(messages))

    def _fit(self, question: str, messages: list[Message], today: str | None, shared: Shared) -> tuple[list[Message], int]:
        """The most recent messages that fit the window, and how many were left out.

        The cut is the same for every question of a conversation (the question
        gets a fixed reserve): the kept messages are then one prompt prefix
        that llama.cpp reads once, as a user keeping the whole chat in the
        prompt would arrange it. Cut per question, every question would read
        the whole window again.
        """
        reserve = max(QUESTION_RESERVE, shared.count_tokens(question) + 8)
        budget = shared.context_window - ANSWER_TOKENS - PROMPT_MARGIN - reserve

        def size(kept: list[Message]) -> int:
            prompt = answer_prompt.render("", _by_session(kept), raw_for_top=0, now=today, context="messages", message_limit=RAW_LIMIT)
            return sum(shared.count_tokens(m["content"]) for m in prompt)

        if size(messages) <= budget:
            return messages, 0
        lo, hi = 0, len(messages)  # binary search for the fewest messages to drop
        while lo < hi:
            mid = (lo + hi) // 2
            if size(messages[mid:]) <= budget:
                hi = mid
            else:
                lo = mid + 1
        return messages[lo:], lo

    def answer(self, db: Store, user: str, question: str, today: str | None, shared: Shared) -> Reply:
        started = time.perf_counter()
        everything = message_sql.all_messages(db, user)
        kept, dropped = self._fit(question, everything, today, shared)
        hits = _by_session(kept)
        search_ms = (time.perf_counter() - started) * 1000
        answer = answer_hits(shared.answerer, question, hits, RAW_LAYOUT, today=today, gate=False)
        note = f"left out the oldest {dropped} of {len(everything)} messages to fit {shared.context_window} tokens" if dropped else ""
        turns = tuple(m.source_id for m in kept if m.source_id)
        return reply(shared, answer, search_ms=search_ms, turns=turns, memories=len(hits), note=note)

    def storage(self, db: Store, user: str, shared: Shared) -> Storage:
        texts = [f"{m.speaker}: {m.content}" for m in message_sql.all_messages(db, user)]
        return Storage(len(texts), sum(len(t) for t in texts), sum(shared.count_tokens(t) for t in texts), {"messages": len(texts)})


class RagSystem(System):
    def __init__(self, chunk_tokens: int, top_k: int):
        self.chunk_tokens, self.top_k = chunk_tokens, top_k
        self.name = f"rag-{chunk_tokens}"
        self.description = f"chunks of about {chunk_tokens} tokens of the raw conversation, dense retrieval, top {top_k}"
        self.build_key = f"rag-{chunk_tokens}"

    def chunks(self, messages: list[Message], shared: Shared) -> list[list[Message]]:
        """Consecutive messages up to the chunk size; a longer message is a chunk of its own."""
        out: list[list[Message]] = []
        size = 0
        for m in messages:
            tokens = shared.count_tokens(message_lines([m], numbered=False, limit=RAW_LIMIT))
            if out and size + tokens <= self.chunk_tokens:
                out[-1].append(m)
                size += tokens
            else:
                out.append([m])
                size = tokens
        return out

    def build(self, db: Store, user: str, messages: list[IncomingMessage], shared: Shared, progress: Progress | None) -> None:
        stored = _store_messages(db, user, messages)
        chunks = self.chunks(stored, shared)
        texts = [message_lines(c, numbered=False, limit=RAW_LIMIT) for c in chunks]
        vectors = shared.embedder.embed_documents(texts)
        with db.transaction():
            db.bind_embedder(identity(shared.embedder), shared.embedder.dimensions)
            for n, (chunk, text, vector) in enumerate(zip(chunks, texts, vectors), start=1):
                draft = EpisodeDraft(f"chunk {n}", text, chunk[0].timestamp, chunk[-1].timestamp, "chunk", tuple(m.id for m in chunk))
                episode_sql.add(db, user, draft, vector)
        if progress:
            progress(len(messages), len(messages))

    def answer(self, db: Store, user: str, question: str, today: str | None, shared: Shared) -> Reply:
        started = time.perf_counter()
        nearest = episode_sql.vector_search(db, user, shared.embedder.embed_query(question), self.top_k)
        found = episode_sql.by_ids(db, user, [i for i, _ in nearest], with_messages=True)
        hits = [
            Hit(kind="episode", id=ep.id, score=similarity, title=ep.title, text="", start=ep.start, end=ep.end, messages=ep.messages)
            for i, similarity in nearest
            if (ep := found.get(i)) is not None
        ]
        search_ms = (time.perf_counter() - started) * 1000
        answer = answer_hits(shared.answerer, question, hits, RAW_LAYOUT, today=today, gate=False)
        turns = tuple(m.source_id for h in hits for m in h.messages if m.source_id)
        return reply(shared, answer, search_ms=search_ms, turns=turns, memories=len(hits))

    def storage(self, db: Store, user: str, shared: Shared) -> Storage:
        texts = episode_sql.chunk_texts(db, user)
        return Storage(len(texts), sum(len(t) for t in texts), sum(shared.count_tokens(t) for t in texts), {"chunks": len(texts)})


register(FullContextSystem())
# RAG-4096 is the Nemori paper's baseline (one chunk of that size); 256-token
# chunks, top 4, are the small-chunk setting measured in ../shared/BENCHMARKS.md.
register(RagSystem(4096, 1))
register(RagSystem(256, 4))
register_group("rag", ("rag-4096", "rag-256"))
register_group("baselines", ("full-context", "rag-4096", "rag-256"))
