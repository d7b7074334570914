"""The two A-MEM modes: notes from raw messages (amem), and Nemori's facts kept as notes (nemori+amem).

amem makes no episodes: every stored message becomes one note, linked and
evolved (memory/amem.py), one transaction each. nemori+amem keeps Nemori's
episodes and distils facts as native does, but stores each fact as a note,
and what memory already knows is evoked from the notes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nemori_cli.domain import Backlog, Message, to_epoch
from nemori_cli.errors import ConfigError
from nemori_cli.memory import amem, semantic
from nemori_cli.memory.amem import NotePlan, NoteSource
from nemori_cli.memory.mode import MemoryAdded, MemoryMode, NewEpisode, Worker, WorkerInputs
from nemori_cli.store import messages as message_sql
from nemori_cli.store import notes as note_sql
from nemori_cli.store.contract import Store

if TYPE_CHECKING:
    from nemori_cli.memory.profile import Profile

_NOTE_STAGES = (amem.CONSTRUCTION.name, amem.LINKING.name)


class _MessageNotes(Worker):
    def __init__(self, inputs: WorkerInputs):
        self.inputs = inputs
        self.notes = amem.Amem(inputs.llm, inputs.embedder, inputs.notes)

    def plan_message(self, message: Message) -> NotePlan:
        source = NoteSource(
            amem.message_content(message.speaker, message.content, message.timestamp), message.timestamp, message_id=message.id
        )
        return self.notes.plan(self.inputs.db, self.inputs.user, source)  # both model calls

    def write_message(self, plan: NotePlan) -> MemoryAdded | None:
        message_id = plan.source.message_id
        if message_id is None:  # plan_message always names it
            raise ValueError("a message's note plan names no message")
        if note_sql.has_note(self.inputs.db, message_id):
            return None  # another process made this note meanwhile
        self.notes.write(self.inputs.db, self.inputs.user, plan)
        return MemoryAdded(notes=1)


class Amem(MemoryMode):
    """A-MEM notes from raw messages (one per message), no episodes."""

    name = "amem"
    makes_episodes = False
    distils_facts = False
    kinds = frozenset({"note"})
    # Its memory is the notes (their keywords, context and links are what the mode is): a core of the
    # raw turns would answer around them, as reading the whole chat does. `ask` retrieves notes instead.
    reads_core = False

    def normalise(self, profile: Profile) -> Profile:
        # No episodes, so no episode flag applies; its raw turns are indexed like any memory's.
        return type(profile)(memory=self.name, turn_vectors=profile.turn_vectors)

    def flags(self, profile: Profile) -> list[str]:
        return [f"--memory {self.name}"]

    def stages(self, profile: Profile) -> tuple[str, ...]:
        return _NOTE_STAGES

    def message_calls(self, messages: int) -> dict[str, int]:
        # Every message is a note; every note but the first has neighbours to link.
        return {_NOTE_STAGES[0]: messages, _NOTE_STAGES[1]: max(messages - 1, 0)}

    def backlog(self, db: Store, user: str) -> Backlog:
        return note_sql.unnoted_backlog(db, user)  # a message waits for its note, not an episode

    def waiting(self, db: Store, user: str, limit: int) -> list[int]:
        return note_sql.unnoted_messages(db, user, limit=limit)

    def unbuilt(self, db: Store, user: str, limit: int | None = None) -> list[Message]:
        ids = note_sql.unnoted_messages(db, user, limit=limit)
        found = message_sql.by_ids(db, user, ids)
        return [found[i] for i in ids if i in found]

    def first_waiting(self, db: Store, user: str) -> float | None:
        ids = self.waiting(db, user, limit=1)  # oldest first
        found = message_sql.by_ids(db, user, ids)
        return to_epoch(found[ids[0]].timestamp) if ids and ids[0] in found else None

    def start(self, profile: Profile, inputs: WorkerInputs) -> Worker:
        return _MessageNotes(inputs)

    def searches_raw_turns(self, db: Store, user: str) -> bool:
        # Each note is one raw message, with its attributes and links (what this mode is measured on);
        # before any note is made (an interrupted first ingest), the raw turns are all there is.
        return not note_sql.any_from_messages(db, user)


class _FactNotes(Worker):
    def __init__(self, profile: Profile, inputs: WorkerInputs):
        self.profile, self.inputs = profile, inputs
        self.notes = amem.Amem(inputs.llm, inputs.embedder, inputs.notes)

    def after_episode(self, episode: NewEpisode) -> MemoryAdded:
        t = self.inputs
        # What memory already knows lives in the notes here.
        made = semantic.distill(
            t.db, t.user, t.llm, episode.draft.title, list(episode.messages), episode.vector, t.semantic, evoke=amem.evoke
        )
        semantic.record(t.db, t.user, episode.id, made)  # what the prediction (from notes) missed, with the notes it made
        texts = made.facts
        for text in texts:
            self.notes.remember(t.db, t.user, NoteSource(text, episode.draft.start, episode_id=episode.id))
        return MemoryAdded(facts=len(texts), notes=len(texts))


class NemoriAmem(MemoryMode):
    """Nemori's episodes, its facts stored as A-MEM notes."""

    name = "nemori+amem"
    kinds = frozenset({"note"})

    def normalise(self, profile: Profile) -> Profile:
        if not profile.facts:
            raise ConfigError("--memory nemori+amem stores Nemori's facts as notes; drop --no-facts")
        return profile

    def episode_stages(self, profile: Profile) -> tuple[str, ...]:
        run = ["prediction"] if profile.distill == "prediction" else []
        return (*run, "distillation", *_NOTE_STAGES)

    def start(self, profile: Profile, inputs: WorkerInputs) -> Worker:
        return _FactNotes(profile, inputs)
