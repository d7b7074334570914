"""The benchmark runner with fake models: systems, scores, resuming, the context cut, chunks, reports, judges."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime

import pytest

from nemori_cli.bench import catalog, locomo, longmemeval, report, report_markdown
from nemori_cli.bench.baselines import FullContextSystem, RagSystem
from nemori_cli.bench.judge import judge_locomo, judge_longmemeval
from nemori_cli.bench.results import ResultLog
from nemori_cli.bench.run import USER, BenchRunner, Silent, judge_missing
from nemori_cli.bench.systems import AnsweredBy
from nemori_cli.cli.progress import BenchBar
from nemori_cli.domain import IncomingMessage
from nemori_cli.errors import ConfigError
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.llm.fake import FakeBackend
from nemori_cli.store.sqlite import SqliteStore
from tests.support.bench_world import CONFIG, IDENTITY


def run_locomo(out, shared, path, names, judge=None, config=CONFIG):
    log = ResultLog(out, config, identity_keys=IDENTITY)
    units = locomo.units(path, [], None, None, adversarial=False)
    BenchRunner("locomo", log, shared, catalog.resolve(names), locomo.score, judge, Silent()).run(units)
    return log


def test_each_memory_is_built_once_and_every_system_answers_every_question(tmp_path, shared, locomo_path):
    log = run_locomo(tmp_path / "out", shared, locomo_path, "nemori,nemori-no-episodic,full-context,rag-256")
    builds = log.of_kind("build")
    # nemori and nemori-no-episodic differ only in retrieval: one memory serves both.
    assert sorted(b["build_key"] for b in builds) == sorted(["nemori-native-prediction-int-narrative", "raw-messages", "rag-256"])
    answers = log.of_kind("answer")
    assert len(answers) == 4 * 3  # category 5 is left out by default
    for a in answers:
        if a["system"] == "nemori-no-episodic" and a["memories"] == 0:
            # No facts were distilled in this world: with nothing retrieved, the answer is "not mentioned", without the model.
            assert a["answer"].startswith("Not mentioned") and a["abstained"]
            continue
        if a["qid"] == "0":
            assert a["answer"] == "Paris" and a["set_f1"] == 1.0 and a["official_f1"] == 1.0
        if a["qid"] == "1":
            assert a["set_f1"] == pytest.approx(2 * (1 / 4) * 1 / (1 / 4 + 1))  # "her name is luna" vs "luna"
    full = [a for a in answers if a["system"] == "full-context"]
    assert all(a["evidence_recall"] == 1.0 for a in full)  # nothing had to be cut
    nemori_build = next(b for b in builds if b["build_key"].startswith("nemori"))
    assert nemori_build["storage"]["episodes"] >= 2 and nemori_build["db_bytes"] > 0
    assert {s["stage"] for s in nemori_build["stages"]} >= {"narration"}


def test_a_rerun_resumes_without_calling_any_model(tmp_path, shared, locomo_path, backend):
    run_locomo(tmp_path / "out", shared, locomo_path, "nemori,full-context")
    calls = len(backend.history)
    log = run_locomo(tmp_path / "out", shared, locomo_path, "nemori,full-context")
    assert len(backend.history) == calls
    assert len(log.of_kind("answer")) == 6 and len(log.of_kind("build")) == 2


def test_a_half_written_last_line_is_dropped_and_that_question_redone(tmp_path, shared, locomo_path, backend):
    out = tmp_path / "out"
    run_locomo(out, shared, locomo_path, "full-context")
    lines = (out / "results.jsonl").read_text().splitlines()
    (out / "results.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    calls = len(backend.history)
    log = run_locomo(out, shared, locomo_path, "full-context")
    assert log.dropped_lines == 1
    assert len(backend.history) == calls + 1  # exactly the lost answer, asked again
    assert len(log.of_kind("answer")) == 3


def test_a_folder_from_another_model_is_refused(tmp_path, shared, locomo_path):
    run_locomo(tmp_path / "out", shared, locomo_path, "full-context")
    other = {**CONFIG, "model": {"name": "base"}}
    with pytest.raises(ConfigError, match="another model"):
        ResultLog(tmp_path / "out", other, identity_keys=IDENTITY)


def test_an_out_path_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        ResultLog(tmp_path / "file", CONFIG, identity_keys=IDENTITY)


def test_a_judge_labels_every_answer(tmp_path, shared, locomo_path, backend):
    judge_llm = StructuredLLM(FakeBackend(default={"reason": "same place", "label": "CORRECT"}))
    log = run_locomo(tmp_path / "out", shared, locomo_path, "full-context", judge=locomo.judge_with(judge_llm, "fake-judge"))
    labels = log.of_kind("judgement")
    assert [(j["qid"], j["label"], j["judge"]) for j in labels] == [
        ("0", True, "fake-judge"),
        ("1", True, "fake-judge"),
        ("2", True, "fake-judge"),
    ]
    built = report.build(log.records, CONFIG, benchmark="locomo", groups=tuple(locomo.CATEGORIES.values()), score_keys=("set_f1",))
    assert built["judge"] == "fake-judge" and built["systems"]["full-context"]["overall"]["judge"] == 1.0


def test_a_finished_run_can_be_judged_later_and_only_once(tmp_path, shared, locomo_path):
    log = run_locomo(tmp_path / "out", shared, locomo_path, "full-context,rag-256")
    grader = FakeBackend(default={"reason": "off", "label": "WRONG"})
    judge = locomo.judge_with(StructuredLLM(grader), "later")
    assert judge_missing(log, "locomo", judge) == 6
    assert judge_missing(log, "locomo", judge) == 0 and len(grader.history) == 6
    built = report.build(log.records, CONFIG, benchmark="locomo", groups=tuple(locomo.CATEGORIES.values()), score_keys=("set_f1",))
    assert built["systems"]["rag-256"]["overall"]["judge"] == 0.0 and built["systems"]["rag-256"]["overall"]["judged"] == 3


def test_full_context_leaves_out_the_oldest_messages_to_fit_the_window(tmp_path, shared, locomo_path):
    log = run_locomo(tmp_path / "out", shared, locomo_path, "full-context")
    db = SqliteStore(tmp_path / "out" / "memories" / "s1" / "raw-messages.db")
    try:
        small = replace(shared, context_window=430)
        reply = FullContextSystem().answer(db, USER, "Where did Ann travel for the art fair?", None, small)
        other = FullContextSystem().answer(db, USER, "What is the cat called?", None, small)
    finally:
        db.close()
    assert reply.note.startswith("left out the oldest") and reply.note.endswith("of 8 messages to fit 430 tokens")
    assert "D1:1" not in reply.turns and "D2:4" in reply.turns  # the newest are kept
    assert reply.prompt_tokens <= 430
    assert other.turns == reply.turns  # one cut for every question: one prompt prefix, read once
    assert log.of_kind("answer")


def test_rag_chunks_hold_whole_messages_up_to_their_size_and_answer_from_top_k(tmp_path, shared, locomo_path):
    system = RagSystem(30, 2)
    db = SqliteStore(tmp_path / "rag.db")
    try:
        units = locomo.units(locomo_path, [], None, None, adversarial=False)
        system.build(db, USER, units[0].messages, shared, None)
        chunks = db.query("SELECT narrative FROM episodes WHERE boundary = 'chunk' ORDER BY id")
        assert len(chunks) >= 3
        assert all(len(c["narrative"].split()) <= 30 or "\n" not in c["narrative"] for c in chunks)
        reply = system.answer(db, USER, "What is the name of Bob's cat Luna?", None, shared)
        assert reply.memories == 2 and "D2:3" in reply.turns
    finally:
        db.close()


def test_system_names_groups_and_unknown_names():
    assert [s.name for s in catalog.resolve("rag,nemori,rag-256")] == ["rag-4096", "rag-256", "nemori"]
    assert "nemori-naive-rag" in catalog.available() and "nemori-summary" in catalog.available()
    with pytest.raises(ConfigError, match="unknown system 'bogus'"):
        catalog.resolve("nemori,bogus")


def test_report_scores_by_category_and_costs(tmp_path, shared, locomo_path):
    log = run_locomo(tmp_path / "out", shared, locomo_path, "nemori,full-context")
    keys = ("set_f1", "official_f1", "bleu1", "evidence_recall")
    groups = tuple(locomo.CATEGORIES.values())
    built = report.build(log.records, {**CONFIG, "systems": ["nemori", "full-context"]}, benchmark="locomo", groups=groups, score_keys=keys)
    full = built["systems"]["full-context"]
    assert full["groups"]["single-hop"]["questions"] == 2 and full["groups"]["temporal"]["questions"] == 1
    assert full["overall"]["set_f1"] == pytest.approx((1.0 + 0.4 + 0.0) / 3)
    assert built["systems"]["nemori"]["costs"]["llm_calls"] > 0 and full["costs"]["llm_calls"] == 0
    text = report_markdown.markdown(built, groups=groups, score_keys=keys, title="LoCoMo")
    assert "| `nemori` |" in text and "| `full-context` |" in text and "single-hop" in text


def test_percentiles_are_nearest_rank():
    values = list(range(1, 11))
    assert report.percentile(values, 50) == 5 and report.percentile(values, 95) == 10 and report.percentile([], 50) is None


LME = [
    {
        "question_id": "q1",
        "question_type": "single-session-user",
        "question": "What is the name of my cat?",
        "answer": "Luna",
        "question_date": "2023/06/01 (Thu) 10:00",
        "haystack_dates": ["2023/05/20 (Sat) 09:00"],
        "haystack_session_ids": ["sess_a"],
        "haystack_sessions": [
            [
                {"role": "user", "content": "My cat Luna knocked over a plant."},
                {"role": "assistant", "content": "Cats love plants; try a spray."},
                {"role": "user", "content": "Luna is my first cat.", "has_answer": True},
            ]
        ],
        "answer_session_ids": ["sess_a"],
    },
    {
        "question_id": "q2_abs",
        "question_type": "single-session-user",
        "question": "What is the name of my hamster?",
        "answer": "You did not mention a hamster.",
        "question_date": "2023/06/01 (Thu) 10:00",
        "haystack_dates": ["2023/05/20 (Sat) 09:00"],
        "haystack_session_ids": ["sess_b"],
        "haystack_sessions": [[{"role": "user", "content": "My cat Luna is grey."}, {"role": "assistant", "content": "Nice."}]],
        "answer_session_ids": ["sess_b"],
    },
]


def test_longmemeval_gives_each_question_its_own_memory_and_its_date(tmp_path, shared, backend):
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(LME))
    units = longmemeval.units(path, None)
    assert [u.key for u in units] == ["q1", "q2_abs"] and units[0].questions[0].evidence == ("sess_a:2",)
    log = ResultLog(tmp_path / "out", {**CONFIG, "benchmark": "longmemeval"}, identity_keys=IDENTITY)
    BenchRunner("longmemeval", log, shared, catalog.resolve("full-context"), longmemeval.score, None, Silent()).run(units)
    answers = {a["qid"]: a for a in log.of_kind("answer")}
    assert answers["q1"]["match"] is True and answers["q1"]["evidence_recall"] == 1.0
    assert answers["q2_abs"]["match"] is True  # "I do not know" abstains
    assert (tmp_path / "out" / "memories" / "q1").is_dir() and (tmp_path / "out" / "memories" / "q2_abs").is_dir()
    prompts = backend.prompts_for("Answer")
    assert all("Today is 1 June 2023 10:00." in p[-1]["content"] for p in prompts)
    built = report.build(log.records, {"systems": []}, benchmark="longmemeval", groups=longmemeval.TYPES, score_keys=("match",))
    overall = built["systems"]["full-context"]["overall"]
    assert overall["match_task_averaged"] == 1.0 and overall["match_abstention"] == 1.0 and overall["abstention_questions"] == 1


def test_longmemeval_per_type_keeps_every_kind_of_question(tmp_path):
    records = [{**LME[0], "question_id": f"u{i}"} for i in range(3)] + [
        {**LME[0], "question_id": "t1", "question_type": "temporal-reasoning"},
        {**LME[1], "question_id": "a1_abs"},
        {**LME[1], "question_id": "a2_abs"},
    ]
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(records))
    assert [u.key for u in longmemeval.units(path, None, per_type=1)] == ["u0", "t1", "a1_abs"]
    assert [u.key for u in longmemeval.units(path, 2)] == ["u0", "u1"]


def test_judges_read_bad_answers_leniently_or_not_at_all():
    strict = StructuredLLM(FakeBackend(default={"reason": "same", "label": "WRONG"}))
    assert judge_locomo(strict, "q", "gold", "pred") is False
    sloppy = StructuredLLM(FakeBackend(default="The answer is CORRECT."))
    assert judge_locomo(sloppy, "q", "gold", "pred") is True
    confused = StructuredLLM(FakeBackend(default="maybe"))
    assert judge_locomo(confused, "q", "gold", "pred") is None
    assert judge_longmemeval(StructuredLLM(FakeBackend(default="Yes.")), "temporal-reasoning", False, "q", "g", "p") is True
    assert judge_longmemeval(StructuredLLM(FakeBackend(default={"answer": "no"})), "knowledge-update", False, "q", "g", "p") is False


def test_every_ablation_builds_its_own_way_and_answers(tmp_path, shared, locomo_path, backend):
    log = run_locomo(tmp_path / "out", shared, locomo_path, "nemori-ablations")
    names = [s.name for s in catalog.resolve("nemori-ablations")]
    assert {a["system"] for a in log.of_kind("answer")} == set(names) and len(log.of_kind("answer")) == 3 * len(names)
    builds = {b["build_key"]: b for b in log.of_kind("build")}
    # nemori-paper, nemori-text, nemori-narratives and nemori-no-episodic read nemori's memory
    # nemori, its six core variants, its five short-road and two lean-road variants, budget, paper, text, narratives
    # and no-episodic read one memory; the twelve unbuilt systems read another.
    assert len(builds) == len(names) - 29
    assert builds["nemori-native-nofacts-int-narrative"]["storage"]["facts"] == 0
    assert builds["nemori-summary-nofacts-int-narrative"]["storage"]["summary"] == 1
    assert "prediction" not in {s["stage"] for s in builds["nemori-native-direct-int-narrative"]["stages"]}
    no_episodes = [a for a in log.of_kind("answer") if a["system"] == "nemori-no-episodic"]
    assert all(a["evidence_recall"] == 0.0 for a in no_episodes)  # no episode retrieved, so no raw turn either


def test_the_progress_bar_runs_without_a_terminal(tmp_path, shared, locomo_path):
    log = ResultLog(tmp_path / "out", CONFIG, identity_keys=IDENTITY)
    bar = BenchBar(True)
    BenchRunner("locomo", log, shared, catalog.resolve("full-context"), locomo.score, None, bar).run(
        locomo.units(locomo_path, [], None, None, adversarial=False)
    )
    bar.close()
    assert len(log.of_kind("answer")) == 3


def test_reports_rescore_old_records_from_their_answers():
    old = {
        "kind": "answer",
        "benchmark": "longmemeval",
        "answer": "38",
        "gold": "38 subjects",
        "question_type": "single-session-assistant",
        "abstention": False,
        "match": False,
        "set_f1": 0.0,
    }
    assert longmemeval.rescore(old)["match"] is True
    stale = {"kind": "answer", "answer": "Paris", "gold": "Paris", "category": 4, "set_f1": 0.0, "official_f1": 0.0, "bleu1": 0.0}
    fresh = locomo.rescore(stale)
    assert fresh["set_f1"] == 1.0 and fresh["official_f1"] == 1.0 and fresh["bleu1"] > 0.9


def test_amem_systems_build_notes_and_count_their_own_storage(tmp_path, shared, locomo_path, backend):
    """amem: a note per message; nemori+amem-notes shares nemori+amem's memory but keeps only its notes."""
    world = backend.default
    world.answers["NoteAttributes"] = {"keywords": ["Ann"], "context": "Ann and Bob talk about their news.", "tags": ["news"]}
    world.answers["LinkDecision"] = {"links": [], "updates": []}
    world.facts = [["Ann flew to Paris on 7 May 2023."], ["Bob adopted a kitten named Luna."]]
    log = run_locomo(tmp_path / "out", shared, locomo_path, "amem-all")
    builds = {b["build_key"]: b for b in log.of_kind("build")}
    assert len(builds) == 2  # amem, and one memory for both nemori+amem systems
    amem = next(b for k, b in builds.items() if "amem-nofacts" in k)
    assert amem["storage"]["notes"] == 8 and amem["storage"]["episodes"] == 0
    own = {r["system"]: r["storage"] for r in log.of_kind("storage")}
    assert own["nemori+amem"]["episodes"] >= 1 and own["nemori+amem"]["notes"] == 2
    assert own["nemori+amem-notes"]["episodes"] == 0 and own["nemori+amem-notes"]["entries"] == 2
    keys, groups = ("set_f1", "evidence_recall"), tuple(locomo.CATEGORIES.values())
    rep = report.build(
        log.records, {**CONFIG, "systems": ["amem", "nemori+amem", "nemori+amem-notes"]}, benchmark="locomo", groups=groups, score_keys=keys
    )
    assert "note links / evolved notes" in report_markdown.markdown(rep, groups=groups, score_keys=keys, title="LoCoMo")
    assert rep["systems"]["nemori+amem-notes"]["costs"]["storage"]["entries"] == 2
    assert rep["systems"]["nemori+amem"]["costs"]["storage"]["entries"] == own["nemori+amem"]["entries"]
    paris = [a for a in log.of_kind("answer") if a["system"] == "amem" and a["qid"] == "0"]
    assert paris[0]["evidence_recall"] == 1.0  # a note's message counts as a retrieved turn


def test_an_answer_model_of_its_own_reads_the_same_memory_and_is_reported_as_its_own_system(tmp_path, shared, locomo_path):
    other = FakeBackend(default={"answer": "Paris"}, model_id="other")
    shared.answer_llm = StructuredLLM(other)
    log = ResultLog(tmp_path / "out", CONFIG, identity_keys=IDENTITY)
    units = locomo.units(locomo_path, [], None, None, adversarial=False)
    chosen = [AnsweredBy(s, "other") for s in catalog.resolve("nemori,full-context")]
    BenchRunner("locomo", log, shared, chosen, locomo.score, None, Silent()).run(units)
    assert {a["system"] for a in log.of_kind("answer")} == {"nemori@other", "full-context@other"}
    assert {b["build_key"] for b in log.of_kind("build")} == {"nemori-native-prediction-int-narrative", "raw-messages"}
    assert all(a["answer"] == "Paris" for a in log.of_kind("answer"))  # every answer came from the other model
    assert len(other.history) == len(log.of_kind("answer"))
    memory_calls = [schema["title"] for _, schema in shared.llm.backend.history]
    assert "Answer" not in memory_calls and "Narrative" in memory_calls  # the memory model built, never answered


# -- memories kept in PostgreSQL (bench --db) --------------------------------------


def _schemas(url: str) -> set[str]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return {r[0] for r in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'nemori_bench_%'")}


def test_memories_kept_in_postgresql_get_a_schema_each_and_a_rerun_resumes(tmp_path, shared, locomo_path, backend):
    from nemori_cli.bench.stores import SchemaStores
    from tests.support.postgres import new_database

    url = new_database()
    out = tmp_path / "out"
    log = ResultLog(out, CONFIG, identity_keys=IDENTITY)
    units = locomo.units(locomo_path, [], None, None, adversarial=False)
    stores = SchemaStores(url, out)
    BenchRunner("locomo", log, shared, catalog.resolve("nemori,full-context"), locomo.score, None, Silent(), stores).run(units)
    builds = log.of_kind("build")
    assert sorted(b["build_key"] for b in builds) == sorted(["nemori-native-prediction-int-narrative", "raw-messages"])
    assert _schemas(url) == {stores.schema("s1", b["build_key"]) for b in builds}
    assert not (out / "memories").exists()  # nothing went to SQLite files
    nemori = next(b for b in builds if b["build_key"].startswith("nemori"))
    assert nemori["storage"]["episodes"] >= 2 and nemori["db_bytes"] > 0
    answers = {(a["system"], a["qid"]): a for a in log.of_kind("answer")}
    assert len(answers) == 6 and answers[("full-context", "0")]["answer"] == "Paris"

    # The same rows as a run on SQLite files: the episodes of the memory, read back from its schema.
    sqlite_log = run_locomo(tmp_path / "sqlite", shared, locomo_path, "nemori")
    assert sqlite_log.of_kind("build")[0]["storage"]["episodes"] == nemori["storage"]["episodes"]

    calls = len(backend.history)
    again = ResultLog(out, CONFIG, identity_keys=IDENTITY)
    BenchRunner("locomo", again, shared, catalog.resolve("nemori,full-context"), locomo.score, None, Silent(), SchemaStores(url, out)).run(
        units
    )
    assert len(backend.history) == calls  # every memory and answer was found, nothing asked again
    assert len(again.of_kind("build")) == 2

    # Another output folder never shares a memory with this one.
    other = SchemaStores(url, tmp_path / "elsewhere")
    assert other.schema("s1", "raw-messages") != stores.schema("s1", "raw-messages")
    assert not other.exists("s1", "raw-messages")


def test_a_memory_half_built_in_postgresql_is_built_again_from_nothing(tmp_path, shared, locomo_path):
    from nemori_cli.bench.stores import SchemaStores
    from nemori_cli.store import messages as message_sql
    from tests.support.postgres import new_database

    url = new_database()
    out = tmp_path / "out"
    stores = SchemaStores(url, out)
    # A raw-messages memory left by a run killed before its build was recorded: stray rows that must not count.
    db = stores.open("s1", "raw-messages")
    with db.transaction():
        message_sql.insert_messages(db, USER, [IncomingMessage("Zed", "a stray message", datetime(2020, 1, 1))])
    db.close()
    log = ResultLog(out, CONFIG, identity_keys=IDENTITY)
    units = locomo.units(locomo_path, [], None, None, adversarial=False)
    BenchRunner("locomo", log, shared, catalog.resolve("full-context"), locomo.score, None, Silent(), stores).run(units)
    db = stores.open("s1", "raw-messages")
    try:
        speakers = {m.speaker for m in message_sql.all_messages(db, USER)}
    finally:
        db.close()
    assert speakers == {"Ann", "Bob"}


def test_bench_db_takes_only_a_postgresql_url(tmp_path):
    from nemori_cli.bench.stores import bench_stores
    from nemori_cli.errors import InputError, StoreError

    with pytest.raises(InputError, match="postgresql:// URL"):
        bench_stores(str(tmp_path / "x.db"), tmp_path / "out")
    with pytest.raises(StoreError, match=r"PostgreSQL at postgresql://u:\*\*\*@127.0.0.1:1/x"):
        bench_stores("postgresql://u:secret@127.0.0.1:1/x", tmp_path / "out")


def test_a_folder_of_sqlite_memories_is_not_resumed_into_postgresql(tmp_path):
    from nemori_cli.bench.results import check_resumable

    out = tmp_path / "out"
    out.mkdir()
    (out / "config.json").write_text(json.dumps({"benchmark": "locomo"}))  # written before bench --db existed
    check_resumable(out, {"benchmark": "locomo", "store_engine": "sqlite"}, ("benchmark", "store_engine"))
    with pytest.raises(ConfigError, match="another store_engine"):
        check_resumable(out, {"benchmark": "locomo", "store_engine": "postgresql"}, ("benchmark", "store_engine"))
