"""A-MEM mode with fake models: notes, links by id, evolution written through, forgetting."""

from __future__ import annotations

from datetime import datetime, timedelta

import pydantic
import pytest

from nemori_cli.domain import IncomingMessage
from nemori_cli.errors import ConfigError, StoreError
from nemori_cli.memory import modes
from nemori_cli.memory.amem import Amem, AmemSettings, NoteSource
from nemori_cli.memory.method import resolve
from nemori_cli.memory.profile import Profile
from nemori_cli.pipeline.runner import Pipeline
from nemori_cli.prompts import amem as prompt
from nemori_cli.retrieval.search import SearchOptions, search
from nemori_cli.store import forget, telemetry
from nemori_cli.store import notes as note_sql
from nemori_cli.store.sqlite import SqliteStore
from tests.conftest import foreign_key_violations

DAY = datetime(2023, 5, 8, 10, 0)


def attributes(context="Ann talks about her plans.", tags=("plans",), keywords=("ann",)):
    return {"keywords": list(keywords), "context": context, "tags": list(tags)}


def offered_ids(messages) -> list[int]:
    """The note ids listed in a link prompt, in the order shown."""
    user = messages[-1]["content"].split("Nearby memories:\n", 1)[1]
    return [int(line[1:].split("]", 1)[0]) for line in user.splitlines() if line.startswith("[")]


class Script:
    """Answers by schema title; link decisions come from a function of the offered ids."""

    def __init__(self, backend, decide=None, attrs=None):
        self.decide = decide or (lambda ids: {"links": [], "updates": []})
        self.attrs = attrs or (lambda messages: attributes())
        self.offers: list[list[int]] = []
        backend.default = self.answer

    def answer(self, messages, schema):
        title = schema["title"]
        if title == "NoteAttributes":
            return self.attrs(messages)
        if title == "LinkDecision":
            ids = offered_ids(messages)
            self.offers.append(ids)
            return self.decide(ids)
        raise AssertionError(title)


def add_notes(db, llm, embedder, texts, settings=AmemSettings()):
    amem = Amem(llm, embedder, settings)
    ids = []
    for i, text in enumerate(texts):
        with db.transaction():
            ids.append(amem.remember(db, "u", NoteSource(text, DAY + timedelta(minutes=i))))
    return ids


# -- links ------------------------------------------------------------------


def test_links_hold_the_chosen_note_ids_both_ways_and_survive_a_restart(tmp_path, llm, backend, embedder):
    path = tmp_path / "m.db"
    db = SqliteStore(path)
    db.bind_embedder("fake-bow:64", 64)
    # Link to the *last* offered neighbour: a position-based store would pick another.
    Script(backend, decide=lambda ids: {"links": [ids[-1]], "updates": []})
    first = add_notes(db, llm, embedder, ["Ann sails to Malta in June", "Ann bought a boat for sailing", "Bob cooks pasta"])
    db.close()

    reopened = SqliteStore(path)
    notes = {n.id: n for n in note_sql.list_all(reopened, "u")}
    a, b, c = first
    # b was offered only a; c was offered a and b, in similarity order.
    assert notes[b].links == (a,) and b in notes[a].links
    rows = reopened.query("SELECT note_id, linked_id FROM note_links ORDER BY note_id, linked_id")
    assert all(r["note_id"] in notes and r["linked_id"] in notes for r in rows)
    assert {(r["note_id"], r["linked_id"]) for r in rows} == {(x, y) for n in notes.values() for x, y in ((n.id, i) for i in n.links)}
    reopened.close()


def test_a_decision_can_only_name_offered_ids():
    schema = prompt.decision_schema((3, 7))
    assert schema.model_validate_json('{"links": [7], "updates": [{"id": 3, "context": "Ann moved to Rome.", "tags": ["Move"]}]}')
    for bad in ('{"links": [4]}', '{"updates": [{"id": 1, "context": "Ann moved.", "tags": []}]}'):
        with pytest.raises(pydantic.ValidationError):
            schema.model_validate_json(bad)


# -- evolution ----------------------------------------------------------------


def test_evolution_edits_exactly_the_notes_the_model_chose(db, llm, backend, embedder):
    db.bind_embedder("fake-bow:64", 64)
    Script(backend)
    ids = add_notes(db, llm, embedder, ["Ann sails to Malta", "Ann sails a boat", "Ann sails with Bob", "Ann sails at dawn"])
    before = {n.id: n for n in note_sql.list_all(db, "u")}
    chosen = {}

    def decide(offered):
        chosen["id"] = offered[2]  # neither the first nor the last offered: an index mix-up would show
        return {
            "links": [],
            "updates": [{"id": offered[2], "context": "Ann's sailing now includes a regatta.", "tags": ["sailing", "regatta"]}],
        }

    Script(backend, decide=decide)
    (new,) = add_notes(db, llm, embedder, ["Ann sails in a regatta"])
    after = {n.id: n for n in note_sql.list_all(db, "u")}
    target = chosen["id"]
    assert after[target].context == "Ann's sailing now includes a regatta." and after[target].tags == ("sailing", "regatta")
    for other in ids:
        if other != target:
            assert after[other].context == before[other].context and after[other].tags == before[other].tags
    history = note_sql.history(db, target)
    assert [(c.field, c.made_by) for c in history] == [("context", new), ("tags", new)]
    assert history[0].before == before[target].context
    assert target in after[new].links  # an evolved neighbour is linked as well


def test_evolved_context_is_searchable_at_once(db, llm, backend, embedder):
    db.bind_embedder("fake-bow:64", 64)
    Script(backend)
    (old,) = add_notes(db, llm, embedder, ["Ann sails to Malta"])
    assert note_sql.text_search(db, "u", "zanzibar", 5) == []
    Script(
        backend, decide=lambda ids: {"links": ids, "updates": [{"id": ids[0], "context": "Ann later sailed on to Zanzibar.", "tags": []}]}
    )
    add_notes(db, llm, embedder, ["Ann sails on from Malta"])
    assert [i for i, _ in note_sql.text_search(db, "u", "zanzibar", 5)] == [old]
    evolved = note_sql.get(db, "u", old)
    assert evolved.tags == ("plans",)  # no tags given: the old ones are kept
    expected = embedder.embed_documents([note_sql.embedding_text(evolved.content, evolved.keywords, evolved.tags, evolved.context)])[0]
    ((top, similarity),) = note_sql.vector_search(db, "u", expected, 1)
    assert top == old and similarity == pytest.approx(1.0, abs=1e-5)


def test_unusable_decisions_fall_back_to_a_similarity_rule_and_evolve_nothing(db, llm, backend, embedder):
    db.bind_embedder("fake-bow:64", 64)
    Script(backend)
    ids = add_notes(db, llm, embedder, ["Ann sails to Malta", "Bob cooks pasta tonight"])
    Script(backend, decide=lambda ids: "not json at all")
    (new,) = add_notes(db, llm, embedder, ["Ann sails to Malta"], settings=AmemSettings(link_floor=0.9))
    note = note_sql.get(db, "u", new)
    assert note.links == (ids[0],)  # identical content: above the floor; the pasta note is not
    calls, events = llm.log.drain()
    assert any(e.kind == "fallback" and e.stage == "linking" for e in events)
    assert not db.query("SELECT * FROM note_evolutions")


def test_nonsense_attributes_get_deterministic_ones_and_are_counted(db, llm, backend, embedder):
    db.bind_embedder("fake-bow:64", 64)
    Script(backend, attrs=lambda messages: {"keywords": "oops"})
    (nid,) = add_notes(db, llm, embedder, ["Caroline went to the LGBTQ support group in Boston"])
    note = note_sql.get(db, "u", nid)
    assert note.origin == "fallback" and "Caroline" in note.keywords and "Boston" in note.keywords
    _, events = llm.log.drain()
    assert [e.stage for e in events if e.kind == "fallback"] == ["note"]


# -- forgetting ------------------------------------------------------------------


def test_forgetting_a_note_leaves_no_dangling_links_and_undoes_its_evolution(db, llm, backend, embedder):
    db.bind_embedder("fake-bow:64", 64)
    Script(backend)
    a, b = add_notes(db, llm, embedder, ["Ann sails to Malta", "Ann sails with Bob"])
    original = note_sql.get(db, "u", a).context
    Script(backend, decide=lambda ids: {"links": ids, "updates": [{"id": a, "context": "Ann plans a secret trip.", "tags": ["secret"]}]})
    (c,) = add_notes(db, llm, embedder, ["Ann sails to Malta in secret"])
    assert note_sql.get(db, "u", a).context == "Ann plans a secret trip."
    with db.transaction():
        counts = forget.forget_note(db, "u", c, reembed=lambda text: embedder.embed_documents([text])[0])
    assert counts["notes"] == 1 and counts["evolutions_undone"] == 2
    assert db.query("SELECT * FROM note_links WHERE note_id = ? OR linked_id = ?", (c, c)) == []
    assert db.query("SELECT * FROM note_evolutions WHERE note_id = ? OR made_by = ?", (c, c)) == []
    assert foreign_key_violations(db) == []
    restored = note_sql.get(db, "u", a)
    assert restored.context == original and restored.tags == ("plans",) and c not in restored.links
    assert note_sql.text_search(db, "u", "secret", 5) == []  # the undone context left the index too


def test_forgetting_without_an_embedder_refuses_when_an_evolution_must_be_undone(db, llm, backend, embedder):
    db.bind_embedder("fake-bow:64", 64)
    Script(backend, decide=lambda ids: {"links": ids, "updates": [{"id": ids[0], "context": "Changed by the new note.", "tags": []}]})
    a, b = add_notes(db, llm, embedder, ["Ann sails", "Ann sails far"])
    with pytest.raises(StoreError, match="embedder"), db.transaction():
        forget.forget_note(db, "u", b)
    assert note_sql.get(db, "u", b) is not None  # rolled back: nothing lost


# -- the pipeline ------------------------------------------------------------------


def chat(n, start=DAY):
    topics = ["sailing to Malta", "a new boat", "cooking pasta", "the job offer", "a climbing gym", "a painting class"]
    return [
        IncomingMessage(
            "Ann" if i % 2 == 0 else "Bob",
            f"I keep thinking about {topics[i % len(topics)]} ({i})",
            start + timedelta(minutes=i),
            source_id=f"D1:{i}",
        )
        for i in range(n)
    ]


def test_amem_mode_makes_one_note_per_message_resumably_and_idempotently(db, llm, backend, embedder):
    Script(backend, decide=lambda ids: {"links": ids[:1], "updates": []})
    pipe = Pipeline(db, "u", llm, embedder, profile=resolve(db, {"memory": "amem"}))
    assert pipe.add_messages(chat(7)) == 7
    report = pipe.process(flush=False, max_tokens=1)  # the first note is always made
    assert report.notes == 1 and report.pending == 6 and report.stopped_by_budget
    report = pipe.process(flush=False)  # no lookahead needed: flush changes nothing
    assert report.notes == 6 and report.pending == 0 and report.episodes == 0
    assert pipe.add_messages(chat(7)) == 0 and pipe.process(flush=True).notes == 0
    notes = note_sql.list_all(db, "u")
    assert [n.content for n in notes][:2] == [
        "Ann: I keep thinking about sailing to Malta (0)",
        "Bob: I keep thinking about a new boat (1)",
    ]
    assert len({n.message_id for n in notes}) == 7
    stages = {s["stage"] for s in telemetry.stage_stats(db, "u")}
    assert {"note", "linking"} <= stages


def test_an_amem_memory_is_read_by_its_raw_turns_until_its_first_note(db, llm, backend, embedder):
    """An interrupted first ingest leaves messages without notes: ask still reads them, then reads notes instead."""
    Script(backend, decide=lambda ids: {"links": [], "updates": []})
    pipe = Pipeline(db, "u", llm, embedder, profile=resolve(db, {"memory": "amem"}))
    pipe.add_messages(chat(3))
    options = SearchOptions(k=0, facts=0, notes=5, messages=5, mode="text")
    hits, _ = search(db, "u", embedder, "Malta", options)
    assert [h.kind for h in hits] == ["message"]
    pipe.process(flush=True)
    hits, _ = search(db, "u", embedder, "Malta", options)
    assert [h.kind for h in hits] == ["note"]  # each note is one raw message: no turn twice


def test_a_memory_built_as_amem_refuses_other_methods(db, llm, backend, embedder):
    Pipeline(db, "u", llm, embedder, profile=resolve(db, {"memory": "amem"})).add_messages(chat(1))
    assert resolve(db, {}) == Profile(memory="amem")
    with pytest.raises(ConfigError, match="--memory amem"):
        resolve(db, {"memory": "native"})
    with pytest.raises(ConfigError):
        resolve(db, {"memory": "amem", "facts": True})


def test_search_returns_top_notes_then_their_links_once_each(db, llm, backend, embedder):
    db.bind_embedder("fake-bow:64", 64)
    Script(backend)
    a, b = add_notes(db, llm, embedder, ["Ann sails to Malta", "Bob cooks pasta in Rome"])
    Script(backend, decide=lambda ids: {"links": ids, "updates": []})
    (c,) = add_notes(db, llm, embedder, ["Ann likes Malta"])  # linked to both
    hits, _ = search(db, "u", embedder, "Malta", SearchOptions(notes=1, linked=5, mode="vector"), modes.NEMORI_AMEM)
    kinds = [(h.kind, h.id, h.linked_from) for h in hits]
    assert kinds[0][0] == "note" and kinds[0][2] is None
    top = kinds[0][1]
    expected_links = set(note_sql.get(db, "u", top).links)
    assert {i for _, i, src in kinds[1:]} == expected_links and all(src == top for _, _, src in kinds[1:])
    hits, _ = search(db, "u", embedder, "Malta", SearchOptions(notes=1, linked=1, mode="vector"), modes.NEMORI_AMEM)
    assert len(hits) == 2  # the bound holds


def test_nemori_plus_amem_stores_facts_as_notes_and_predicts_from_them(db, llm, backend, embedder):
    known = "On 8 May 2023 Ann talked about sailing with Bob."

    def answer(messages, schema):
        title = schema["title"]
        if title == "Partition":
            return {"boundaries": []}
        if title == "Narrative":
            return {"title": "Ann sails", "narrative": known}
        if title == "Prediction":
            return {"prediction": "PREDICTED"}
        if title == "Distilled":
            return {"facts": [known]}
        if title == "NoteAttributes":
            return attributes()
        if title == "LinkDecision":
            return {"links": offered_ids(messages), "updates": []}
        raise AssertionError(title)

    backend.default = answer
    from tests.conftest import make_messages

    for topic in ("sailing", "more-sailing"):
        pipe = Pipeline(db, "u", llm, embedder, profile=resolve(db, {"memory": "nemori+amem", "integrate": False}))
        pipe.add_messages(make_messages(4, topic=topic))
        report = pipe.process(flush=True)
        assert report.notes == 1 and report.facts == 1
    notes = note_sql.list_all(db, "u")
    assert [n.episode_id for n in notes] == [1, 2] and notes[1].links == (notes[0].id,)
    assert db.one("SELECT count(*) AS n FROM facts")["n"] == 0  # the notes take the facts' place
    assert backend.prompts_for("Prediction"), "the second episode is predicted from the first one's note"
    with db.transaction():
        counts = forget.forget_episode(db, "u", 2, reembed=lambda t: embedder.embed_documents([t])[0])
    assert counts["notes"] == 1 and note_sql.get(db, "u", notes[0].id).links == ()
    with db.transaction():
        forget.forget_user(db, "u")
    assert db.query("SELECT * FROM notes") == [] and db.query("SELECT * FROM note_links") == []


def test_small_model_habits_are_repaired_and_counted(db, llm, backend, embedder):
    """Copying the prompt's example into a note, or a memory's own words into a neighbour's context."""
    db.bind_embedder("fake-bow:64", 64)
    Script(backend, attrs=lambda m: attributes(tags=("work", "career", "sailing"), keywords=("Mia", "Acme", "boat")))
    (a,) = add_notes(db, llm, embedder, ["Ann: I sail my boat at work"])
    note = note_sql.get(db, "u", a)
    assert note.keywords == ("boat",) and note.tags == ("work", "sailing")  # "work" is in the memory; "career" is not
    Script(backend, decide=lambda ids: {"links": ids, "updates": [{"id": ids[0], "context": "I sail my boat at work", "tags": []}]})
    add_notes(db, llm, embedder, ["Ann: the boat is fast"])
    assert note_sql.get(db, "u", a).context == note.context and not note_sql.history(db, a)
    _, events = llm.log.drain()
    details = [e.detail for e in events if e.kind == "repaired"]
    assert any("example" in d for d in details) and any("copied memories" in d for d in details)


def test_a_plan_made_before_the_lock_never_writes_over_newer_changes(db, llm, backend, embedder):
    """The model's calls run outside the transaction; what changed meanwhile wins."""
    db.bind_embedder("fake-bow:64", 64)
    Script(backend)
    a, b = add_notes(db, llm, embedder, ["Ann sails to Malta", "Ann sails a boat"])
    Script(
        backend, decide=lambda ids: {"links": ids, "updates": [{"id": i, "context": "Ann's plans changed again.", "tags": []} for i in ids]}
    )
    amem = Amem(llm, embedder)
    plan = amem.plan(db, "u", NoteSource("Ann sails to Malta by boat", DAY))
    assert set(plan.decision.links) == {a, b}
    with db.transaction():
        forget.forget_note(db, "u", a, reembed=lambda t: embedder.embed_documents([t])[0])
        note_sql.evolve(
            db,
            "u",
            note_sql.get(db, "u", b),
            context="Someone else changed this.",
            tags=["x"],
            made_by=None,
            embedding=embedder.embed_documents(["x"])[0],
        )
    with db.transaction():
        new = amem.write(db, "u", plan)
    assert note_sql.get(db, "u", new).links == (b,)  # the forgotten neighbour is not linked
    assert note_sql.get(db, "u", b).context == "Someone else changed this."  # the newer change stands
    assert foreign_key_violations(db) == []


def test_an_interrupted_amem_ingest_keeps_whole_notes_and_resumes(db, llm, backend, embedder):
    script = Script(backend, decide=lambda ids: {"links": ids[:1], "updates": []})
    calls = {"n": 0}

    def flaky(messages, schema):
        calls["n"] += 1
        if calls["n"] == 6:  # the fourth note's construction (the first note has no link call)
            raise KeyboardInterrupt
        return script.answer(messages, schema)

    backend.default = flaky
    pipe = Pipeline(db, "u", llm, embedder, profile=resolve(db, {"memory": "amem"}))
    pipe.add_messages(chat(5))
    with pytest.raises(KeyboardInterrupt):
        pipe.process(flush=True)
    assert note_sql.count(db, "u") == 3 and note_sql.count_unnoted(db, "u") == 2
    report = Pipeline(db, "u", llm, embedder, profile=resolve(db, {})).process(flush=True)
    assert report.notes == 2 and note_sql.count_unnoted(db, "u") == 0
    assert foreign_key_violations(db) == []


def test_a_tag_list_copied_into_a_context_is_cut_off():
    """Qwen2.5-1.5B wrote "… recently. | tags: life, adventure" as a neighbour's new context."""
    schema = prompt.decision_schema((4,))
    value = schema.model_validate_json(
        '{"links": [4], "updates": [{"id": 4, "context": "Mel asks about news. | tags: life, adventure", "tags": []}]}'
    )
    assert value.updates[0].context == "Mel asks about news."
    assert prompt.strip_tag_list("Ann lists her tags: none") == "Ann lists her tags: none"  # only the listing's layout is cut
