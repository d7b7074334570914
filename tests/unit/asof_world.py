"""A conversation in which Ann moves from Lisbon (March) to Berlin (June), built with the fake model.

Consolidation is scripted to find the Berlin fact outdating the Lisbon one,
so the store holds F1 (Lisbon, superseded by F2) and F2 (Berlin, active),
from episodes E1 (March) and E2 (June).
"""

from __future__ import annotations

from datetime import datetime

from nemori_cli.memory.profile import Profile
from nemori_cli.memory.semantic import SemanticSettings
from nemori_cli.pipeline.runner import Pipeline
from tests.unit.fakeworld import World, chat

MARCH = datetime(2024, 3, 5, 9, 0)
JUNE = datetime(2024, 6, 10, 9, 0)
LISBON = "Ann lives in Lisbon."
BERLIN = "Ann lives in Berlin."
PREDICTED = "Ann still lives in Lisbon and talked about her flat."


def outdated(messages, schema) -> dict:
    """Passes consolidation's self-check; says Berlin outdates Lisbon and nothing else."""
    text = messages[-1]["content"]
    older = text.split("OLDER fact: ")[1].split("\n")[0]
    newer = text.split("NEWER fact: ")[1].split("\n")[0]
    if older.startswith("Sam works as a nurse"):
        return {"outdated": "pilot" in newer}
    return {"outdated": (older, newer) == (LISBON, BERLIN)}


def build(db, llm, backend, embedder, *, user: str = "u", profile: Profile = Profile(facts=True, integrate=False)) -> World:
    world = World(backend, Outdated=outdated, Prediction={"prediction": PREDICTED}, Answer={"answer": "Lisbon"})
    world.facts = [[LISBON], [BERLIN]]
    # Any known fact is evoked, so the June episode is predicted from the Lisbon fact.
    pipe = Pipeline(db, user, llm, embedder, profile=profile, semantic=SemanticSettings(threshold=-1.0))
    pipe.add_messages(chat(["Ann", "lives", "in", "Lisbon", "flat"], start=MARCH))
    pipe.process(flush=True)
    pipe.add_messages(chat(["Ann", "moved", "and", "lives", "in", "Berlin", "now"], start=JUNE, tag="again"))
    pipe.process(flush=True)
    return world
