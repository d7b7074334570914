"""Issue 40's bench: long histories from other conversations, the unbuilt state as a system, paired intervals, splits."""

from __future__ import annotations

import copy
import json

import pytest
from typer.testing import CliRunner

from nemori_cli.bench import catalog, haystack, locomo, paired, report, report_markdown
from nemori_cli.bench.metrics import chat_line
from nemori_cli.bench.results import ResultLog
from nemori_cli.bench.run import BenchRunner, Silent
from nemori_cli.cli.app import app
from tests.support.bench_world import CONFIG, IDENTITY, SAMPLE

GROUPS = tuple(locomo.CATEGORIES.values())
KEYS = ("set_f1", "official_f1", "bleu1", "evidence_recall")


def _other(sample_id: str, month: str, names: tuple[str, str]) -> dict:
    """A distractor sample: other people, other dates, dia_ids that collide with the target's."""
    a, b = names
    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": a,
            "speaker_b": b,
            "session_1_date_time": f"9:00 am on 1 {month}, 2023",
            "session_1": [
                {"speaker": a, "dia_id": "D1:1", "text": f"{a} here, the plumber came about the sink today."},
                {"speaker": b, "dia_id": "D1:2", "text": "Did he fix the leak under the counter?"},
            ],
            "session_2_date_time": f"9:00 am on 15 {month}, 2023",
            "session_2": [
                {"speaker": b, "dia_id": "D2:1", "text": "My brother is visiting from Lisbon next week."},
                {"speaker": a, "dia_id": "D2:2", "text": "Take him to the river market on Sunday."},
            ],
        },
        "qa": [{"question": f"What did {a}'s plumber fix?", "answer": "the sink", "evidence": ["D1:1"], "category": 4}],
    }


@pytest.fixture
def three(tmp_path):
    path = tmp_path / "three.json"
    # May (target s1 has sessions on 8 and 20 May), April and June: the others fall before, between and after.
    path.write_text(json.dumps([SAMPLE, _other("s2", "April", ("Cleo", "Dan")), _other("s3", "May", ("Eve", "Finn"))]))
    return path


def test_the_haystack_interleaves_whole_sessions_by_date_and_keeps_the_targets_evidence_ids(three):
    (unit,) = locomo.units(three, ["s1"], None, None, False, ["s2", "s3"])
    assert len(unit.messages) == 8 + 4 + 4
    starts = [m.timestamp for m in unit.messages]
    assert starts == sorted(starts)  # by date (sessions are days apart)
    sessions = [m.session for m in unit.messages]
    # Whole sessions: each session's turns are contiguous.
    assert all(sessions.index(s) + sessions.count(s) - 1 == len(sessions) - 1 - sessions[::-1].index(s) for s in set(sessions))
    assert sessions[:2] == ["s2:1", "s2:1"] and "s3:1" in sessions and "1" in sessions
    ids = [m.source_id for m in unit.messages]
    assert len(set(ids)) == len(ids)  # the distractors' D1:1 no longer collides with the target's
    assert "D1:1" in ids and "s2:D1:1" in ids and "s3:D2:2" in ids
    # Only the target's questions, with ids that name it; their evidence still names its turns.
    assert {q.meta["sample"] for q in unit.questions} == {"s1"}
    assert {q.qid for q in unit.questions} == {"s1:0", "s1:1", "s1:2"}
    assert all(e in ids for q in unit.questions for e in q.evidence)


def test_whole_conversations_make_one_memory_whichever_is_the_target(three):
    units = locomo.units(three, ["s1", "s2", "s3"], None, None, False, ["s1", "s2", "s3"])
    assert {u.key for u in units} == {"haystack:s1+s2+s3"}
    assert len({len(u.messages) for u in units}) == 1
    # A session range makes the target's messages its own, so its key says so.
    assert haystack.unit_key("s1", ["s2", "s3"], (1, 1)) == "haystack:s1[1-1]+s2+s3"


def test_an_unknown_haystack_sample_is_refused_by_name(three):
    from nemori_cli.errors import InputError

    with pytest.raises(InputError, match="no sample 'nope'"):
        locomo.units(three, ["s1"], None, None, False, ["s2", "nope"])


def test_the_bench_builds_a_shared_haystack_once_and_scores_evidence_only_on_the_target(tmp_path, shared, three):
    log = ResultLog(tmp_path / "out", CONFIG, identity_keys=IDENTITY)
    units = locomo.units(three, ["s1", "s2"], None, None, False, ["s1", "s2", "s3"])
    systems = catalog.resolve("nemori-unbuilt,full-context")
    BenchRunner("locomo", log, shared, systems, locomo.score, None, Silent()).run(units)
    builds = log.of_kind("build")
    assert sorted(b["build_key"] for b in builds) == ["nemori-unbuilt", "raw-messages"]  # one each, for both targets
    answers = log.of_kind("answer")
    assert len(answers) == 2 * (3 + 1)
    full = [a for a in answers if a["system"] == "full-context"]
    assert all(a["evidence_recall"] == 1.0 for a in full)  # everything fits; the target's ids are found among 16 turns


def test_the_unbuilt_system_stores_and_indexes_only_and_answers_from_raw_turns(tmp_path, shared, three, backend):
    log = ResultLog(tmp_path / "out", CONFIG, identity_keys=IDENTITY)
    units = locomo.units(three, ["s1"], None, None, False)
    BenchRunner("locomo", log, shared, catalog.resolve("nemori-unbuilt"), locomo.score, None, Silent()).run(units)
    (build,) = log.of_kind("build")
    assert build["stages"] == [] or all(s["calls"] == 0 for s in build["stages"] if s["stage"] != "answer")
    assert build["storage"]["episodes"] == 0 and build["storage"]["facts"] == 0
    prompts = [json.dumps(h) for h in backend.history]
    assert prompts and not any('"Summary"' in p or "narrative" in p.lower() for p in prompts[:1])  # the first call answers
    paris = next(a for a in log.of_kind("answer") if a["qid"] == "0")
    assert paris["answer"] == "Paris" and paris["evidence_recall"] == 1.0


def test_paired_bootstrap_interval_and_counts():
    mine = {i: 1.0 for i in range(30)}
    theirs = {i: 0.0 for i in range(30)}
    clear = paired.compare("a", "b", mine, theirs)
    assert clear.mean_difference == 1.0 and clear.low == clear.high == 1.0 and clear.excludes_zero
    assert (clear.wins, clear.ties, clear.losses) == (30, 0, 0)
    noisy = paired.compare("a", "b", {i: float(i % 2) for i in range(40)}, {i: float((i + 1) % 2) for i in range(40)})
    assert noisy.mean_difference == 0.0 and noisy.low < 0 < noisy.high and not noisy.excludes_zero
    assert (noisy.wins, noisy.losses) == (20, 20)
    # Only questions both answered are paired; the interval is the same for the same records.
    assert paired.compare("a", "b", {1: 0.5, 2: 0.5}, {2: 0.0, 3: 1.0}).questions == 1
    assert paired.compare("a", "b", {1: 1.0}, {2: 1.0}) is None
    assert paired.bootstrap([0.1, -0.3, 0.5, 0.0]) == paired.bootstrap([0.1, -0.3, 0.5, 0.0])


def _answer(system: str, qid: str, f1: float, answer: str = "x") -> dict:
    return {
        "kind": "answer",
        "benchmark": "locomo",
        "unit": "u",
        "system": system,
        "qid": qid,
        "set_f1": f1,
        "group": "single-hop",
        "category": 4,
        "question": f"q{qid}?",
        "gold": "g",
        "answer": answer,
        "evidence_recall": 1.0,
    }


def test_the_report_pairs_every_system_with_the_first_baseline_and_lists_its_largest_losses():
    records = [_answer("nemori", str(i), 0.0 if i < 3 else 1.0, "Sure, I would love to!" if i == 0 else "x") for i in range(10)]
    records += [_answer("rag-256", str(i), 1.0) for i in range(10)]
    config = {"systems": ["nemori", "rag-256"], "split": "tune"}
    built = report.build(records, config, benchmark="locomo", groups=GROUPS, score_keys=KEYS, baselines=("rag-256", "full-context"))
    assert built["against"] == "rag-256"
    got = built["paired"]["nemori"]
    assert got["mean_difference"] == pytest.approx(-0.3) and got["losses"] == 3 and got["ties"] == 7
    assert got["ci95"][1] <= 0 and len(got["largest_losses"]) == 3
    assert got["largest_losses"][0]["reference_answer"] == "x"
    assert built["systems"]["nemori"]["costs"]["chat_share"] == pytest.approx(0.1)
    text = report_markdown.markdown(built, groups=GROUPS, score_keys=KEYS, title="LoCoMo")
    assert "## Against `rag-256`" in text and "Split: **tune**" in text and "## Largest losses against `rag-256`" in text
    assert "Sure, I would love to!" in text
    # --against names another reference; one not in the run is refused.
    other = report.build(records, config, benchmark="locomo", groups=GROUPS, score_keys=KEYS, against="nemori")
    assert other["against"] == "nemori" and other["paired"]["rag-256"]["mean_difference"] == pytest.approx(0.3)
    from nemori_cli.errors import ConfigError

    with pytest.raises(ConfigError, match="--against 'ghost'"):
        report.build(records, config, benchmark="locomo", groups=GROUPS, score_keys=KEYS, against="ghost")


def test_chat_lines_are_told_from_answers():
    assert chat_line("Sure Sam, Evan would be glad to help", "What suggestions did Evan give?")
    assert chat_line("Kayaking sounds awesome", "Where did Sam plan to try kayaking?")
    assert chat_line("Our family means the world to me", "What is the motto of Evan's family?")
    assert chat_line("Wow, that's amazing!", "What did Mel paint?")
    assert not chat_line("Swimming, yoga, walking", "What suggestions did Evan give for low-impact exercises?")
    assert not chat_line("Lake Tahoe", "Where did Sam and his mate plan to try kayaking?")
    assert not chat_line("Not mentioned", "What is my name?")
    assert not chat_line("Caroline read my book", "Who read my book?")  # the question's own "my"


def test_the_cli_refuses_a_bad_split_an_empty_haystack_and_a_foreign_reference(three, tmp_path):
    runner = CliRunner()
    base = ["bench", "locomo", str(three), "--sample", "s1", "--out", str(tmp_path / "o")]
    for extra, said in (
        (["--split", "later"], "--split 'later'"),
        (["--haystack", " , "], "--haystack"),
        (["--systems", "nemori,rag-256", "--against", "full-context"], "--against 'full-context'"),
    ):
        refused = runner.invoke(app, [*base, *extra])
        # main() prints a NemoriError as one line with its exit code (2: bad input); the runner hands it back raised.
        assert refused.exception is not None and getattr(refused.exception, "exit_code", None) == 2, refused.output
        assert said in str(refused.exception)
    assert not (tmp_path / "o").exists()


def test_a_report_rebuilt_with_against_changes_only_the_reference(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    config = copy.deepcopy({**CONFIG, "systems": ["nemori", "rag-256"], "split": "confirm"})
    (out / "config.json").write_text(json.dumps(config))
    # Text scores are recomputed from the answers: "g" is the gold (1.0), "x" is not (0.0).
    records = [_answer("nemori", str(i), 1.0, "g") for i in range(4)] + [_answer("rag-256", str(i), 0.0, "x") for i in range(4)]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    done = CliRunner().invoke(app, ["bench", "report", str(out), "--against", "nemori", "--json"])
    assert done.exit_code == 0, done.output
    got = json.loads(done.output)
    assert got["against"] == "nemori" and got["paired"]["rag-256"]["mean_difference"] == pytest.approx(-1.0)
    assert "Split: **confirm**" in (out / "report.md").read_text()


def test_longmemeval_questions_inside_other_questions_sessions_and_none_from_their_future(tmp_path):
    from nemori_cli.bench import longmemeval
    from tests.unit.test_bench_run import LME

    later = {
        **copy.deepcopy(LME[0]),
        "question_id": "q3",
        "question_date": "2023/08/01 (Tue) 10:00",
        "haystack_dates": ["2023/05/10 (Wed) 09:00", "2023/07/01 (Sat) 09:00"],
        "haystack_session_ids": ["sess_c", "sess_d"],
        "haystack_sessions": [[{"role": "user", "content": "I started pottery."}], [{"role": "user", "content": "I sold a bowl."}]],
    }
    path = tmp_path / "lme.json"
    path.write_text(json.dumps([*LME, later]))
    units = {u.key: u for u in longmemeval.units(path, None, None, haystack=5)}
    q1 = units["q1+haystack5"]
    ids = [m.source_id for m in q1.messages]
    # q1 is asked on 1 June: q3's July session is its future and stays out; the May ones come in, by date.
    assert "q3:sess_d:0" not in ids and ids[0] == "q3:sess_c:0" and "q2_abs:sess_b:0" in ids
    assert q1.questions[0].evidence == ("sess_a:2",) and "sess_a:2" in ids
    starts = [m.timestamp for n, m in enumerate(q1.messages) if n == 0 or m.session != q1.messages[n - 1].session]
    assert starts == sorted(starts)  # whole sessions by their start (two may start the same minute)
    assert len(units["q3+haystack5"].messages) == 2 + 3 + 2  # everything is before 1 August
    assert len(longmemeval.units(path, None, None, haystack=1)[0].messages) == 3 + 2  # one other question only


def test_the_short_road_reads_no_core_beyond_the_window_and_the_core_where_it_fits(tmp_path, shared, locomo_path, monkeypatch):
    from nemori_cli.retrieval import core_answer

    # A core of 60 tokens cannot hold the sample's 8 turns: the history is "beyond the window".
    small = core_answer.CoreBudget(60, beyond="short")
    monkeypatch.setattr(core_answer, "budget_for", lambda window, *tail, beyond=None: small)
    log = ResultLog(tmp_path / "out", CONFIG, identity_keys=IDENTITY)
    units = locomo.units(locomo_path, [], None, None, False)
    BenchRunner("locomo", log, shared, catalog.resolve("nemori-unbuilt-short"), locomo.score, None, Silent()).run(units)
    answers = {a["qid"]: a for a in log.of_kind("answer")}
    assert answers["0"]["answer"] == "Paris" and not answers["0"]["note"]  # answered, and no core was read
    db = _open(tmp_path)
    core = core_answer.build_core(db, "bench", shared.answerer, small, core_answer.PROFILES["core"])
    assert not core.holds_everything and not core_answer.reads_core(core, small)
    assert core_answer.reads_core(core, core_answer.CoreBudget(60, beyond="core"))
    roomy = core_answer.CoreBudget(4000, beyond="short")
    whole = core_answer.build_core(db, "bench", shared.answerer, roomy, core_answer.PROFILES["core"])
    assert whole.holds_everything and core_answer.reads_core(whole, roomy)


def _open(tmp_path):
    from nemori_cli.store.sqlite import SqliteStore

    (path,) = (tmp_path / "out" / "memories").glob("*/nemori-unbuilt.db")
    return SqliteStore(path)
