"""`nemori ask --questions FILE`: many questions, one loaded model, one answer a line as each is read (issue 41)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from nemori_cli.cli.app import app
from nemori_cli.errors import InputError
from tests.support.schemas import REGISTRY, schema_files
from tests.unit.fake_ingest import ingested, nemori, use_fake_answers

QUESTIONS = ["What about the kayak?", "Who plays the piano?", "What grows in the garden?"]  # topics the fake conversation has


@pytest.fixture
def alice(tmp_path, monkeypatch):
    """A database with alice's conversation (built by the fake LLM), and the fake answer models `ask` builds on it."""
    return ingested(tmp_path, monkeypatch, "--user", "alice"), use_fake_answers(monkeypatch)


def _valid_ask_lines(stdout: str) -> list[dict]:
    """Each stdout line is one JSON object valid against ask.schema.json (JSON Lines)."""
    from jsonschema import Draft202012Validator

    validator = Draft202012Validator(schema_files()["ask.schema.json"], registry=REGISTRY)
    replies = [json.loads(line) for line in stdout.splitlines()]
    for reply in replies:
        assert not list(validator.iter_errors(reply))
    return replies


def _asked(backends) -> list[str]:
    """The last user message of every answer prompt, in order."""
    return [prompt[-1]["content"] for b in backends for prompt in b.prompts_for("Answer")]


def test_a_file_of_questions_is_answered_line_by_line_with_one_model(alice, tmp_path):
    db, answers = alice
    questions = tmp_path / "q.txt"
    questions.write_text(f"{QUESTIONS[0]}\n\n  {QUESTIONS[1]}  \n{QUESTIONS[2]}", encoding="utf-8")  # a blank line, no final newline
    result = nemori("ask", "--questions", questions, "--db", db, "--user", "alice", "--json")
    assert result.exit_code == 0, result.output
    replies = _valid_ask_lines(result.stdout)
    assert [r["question"] for r in replies] == QUESTIONS
    assert all(r["answer"] == "the kayak" for r in replies)
    assert len(answers) == 1  # the answer model was built once, not once a question
    asked = _asked(answers)
    assert len(asked) == 3 and all(q in prompt for q, prompt in zip(QUESTIONS, asked))


def test_questions_on_stdin_and_plain_output_name_each_question(alice):
    db, _ = alice
    result = CliRunner().invoke(app, ["ask", "--questions", "-", "--db", str(db), "--user", "alice"], input="\n".join(QUESTIONS[:2]) + "\n")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    for question in QUESTIONS[:2]:
        at = lines.index(question)
        assert lines[at + 1] == "the kayak"  # each question, then its answer


def test_one_question_alone_is_still_one_pretty_printed_document(alice):
    db, _ = alice
    result = nemori("ask", QUESTIONS[0], "--db", db, "--user", "alice", "--json")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("{\n  ") and json.loads(result.stdout)["question"] == QUESTIONS[0]


def test_a_byte_order_mark_is_not_part_of_the_first_question(alice, tmp_path):
    db, _ = alice
    questions = tmp_path / "q.txt"
    questions.write_bytes(b"\xef\xbb\xbf" + QUESTIONS[0].encode() + b"\r\n")  # as an editor on Windows saves it
    result = nemori("ask", "--questions", questions, "--db", db, "--user", "alice", "--json")
    assert [r["question"] for r in _valid_ask_lines(result.stdout)] == [QUESTIONS[0]]


def test_an_error_mid_run_is_one_line_naming_the_question_after_the_answers_before_it(alice, tmp_path, monkeypatch):
    from nemori_cli import deps
    from nemori_cli.errors import ModelError
    from nemori_cli.llm.base import StructuredLLM
    from nemori_cli.llm.fake import FakeBackend
    from tests.support.cli import run_nemori

    db, _ = alice
    calls = []

    def answering(messages, schema):
        calls.append(schema.get("title"))
        if len(calls) == 2:
            raise ModelError("the endpoint at http://127.0.0.1:9/v1 went away")
        return {"answer": "the kayak", "sources": []}

    monkeypatch.setattr(deps, "build_answer_llm", lambda settings, memory_llm=None: StructuredLLM(FakeBackend(default=answering)))
    questions = tmp_path / "q.txt"
    questions.write_text("\n".join(QUESTIONS) + "\n", encoding="utf-8")
    code, out, err = run_nemori(["ask", "--questions", str(questions), "--db", str(db), "--user", "alice", "--json"], env={})
    assert code == ModelError.exit_code
    assert [r["question"] for r in _valid_ask_lines(out)] == [QUESTIONS[0]]
    [line] = err.strip().splitlines()
    assert line.startswith("nemori: error: question 2 ('Who plays the piano?'): the endpoint") and "went away" in line


def test_an_empty_file_name_is_refused_not_read_as_stdin(alice):
    db, answers = alice
    result = CliRunner().invoke(app, ["ask", "--questions", "", "--db", str(db), "--user", "alice"], input=QUESTIONS[0] + "\n")
    assert isinstance(result.exception, InputError) and "needs a file name" in str(result.exception)
    assert answers == []


def test_one_question_and_a_file_together_or_neither_is_refused(alice, tmp_path):
    db, answers = alice
    questions = tmp_path / "q.txt"
    questions.write_text(QUESTIONS[0] + "\n", encoding="utf-8")
    both = nemori("ask", QUESTIONS[1], "--questions", questions, "--db", db, "--user", "alice")
    neither = nemori("ask", "--db", db, "--user", "alice")
    for result in (both, neither):
        assert isinstance(result.exception, InputError) and "not both and not neither" in str(result.exception)
    assert answers == []  # refused before any model was built


def test_a_missing_or_empty_file_is_one_error_before_any_model(alice, tmp_path):
    db, answers = alice
    missing = nemori("ask", "--questions", tmp_path / "nope.txt", "--db", db, "--user", "alice")
    assert isinstance(missing.exception, InputError) and "nope.txt" in str(missing.exception)
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n", encoding="utf-8")
    empty = nemori("ask", "--questions", blank, "--db", db, "--user", "alice")
    assert isinstance(empty.exception, InputError) and "no questions" in str(empty.exception)
    assert answers == []


def test_a_line_that_is_not_utf8_stops_there_after_answering_the_lines_before(alice, tmp_path):
    db, answers = alice
    questions = tmp_path / "q.txt"
    questions.write_bytes(QUESTIONS[0].encode() + b"\n" + b"caf\xe9?\n" + QUESTIONS[2].encode() + b"\n")
    result = nemori("ask", "--questions", questions, "--db", db, "--user", "alice", "--json")
    assert isinstance(result.exception, InputError) and "line 2 is not UTF-8" in str(result.exception)
    assert [r["question"] for r in _valid_ask_lines(result.stdout)] == [QUESTIONS[0]]  # the first answer stands
    assert len(_asked(answers)) == 1
