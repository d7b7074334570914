"""Faulty OpenAI-compatible endpoints: every fault class through the adapter and through `nemori ingest` / `ask`.

A real HTTP server on 127.0.0.1 (tests/support/fault_server.py) answers each
request as scripted; no model is loaded (the embedder is the fake one). The
presets' timeouts are small and the backoff is capped, so the file runs in
seconds. The CLI runs in-process through its real entry point (`main`: the
exit code and the stderr line are the user's), and twice as a real process.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest
from pydantic import BaseModel

from nemori_cli import deps
from nemori_cli.cli import app as cli_app
from nemori_cli.embed.fake import FakeEmbedder
from nemori_cli.errors import LLMOutputError, ModelError
from nemori_cli.llm import openai_compat
from nemori_cli.llm.base import ContextOverflow, StructuredLLM
from nemori_cli.llm.openai_compat import OpenAICompatBackend
from nemori_cli.stages import Stage
from nemori_cli.store.sqlite import SqliteStore
from tests.conftest import REPO
from tests.support.fault_server import FaultServer
from tests.unit.fake_ingest import answer, conversation, isolate, write_jsonl

TIMEOUT = 0.4  # seconds: the read timeout of a backend or preset whose server hangs (the test waits it out)
# Every other one gets room: a loaded CI machine once took more than 0.4 s to answer a healthy
# GET /models, and a fixture's build failed (stop 56).
ROOMY = 10.0
CHAT = [{"role": "user", "content": "Reply, please."}]
STAGE = Stage("probe", 64)


class Reply(BaseModel):
    answer: str
    count: int


@pytest.fixture(autouse=True)
def _fresh(monkeypatch):
    openai_compat._working_format.clear()
    monkeypatch.setattr(openai_compat, "MAX_WAIT_S", 0.02)  # the retries, without their waiting
    monkeypatch.setattr(deps, "_backends", {})


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed


def wait_for(*faults: str) -> float:
    """The read timeout for a server scripted with these faults: the short one only where one of them hangs."""
    return TIMEOUT if "hang" in faults else ROOMY


def backend(url: str, timeout: float = ROOMY, **kw) -> OpenAICompatBackend:
    return OpenAICompatBackend(
        name="faulty", base_url=url, model="fault-model", timeout=timeout, connect_timeout=timeout, backoff=0.01, **kw
    )


def complete(server: FaultServer, timeout: float = ROOMY):
    """(the LLM, its value or None, the NemoriError or None) for one StructuredLLM call."""
    llm = StructuredLLM(backend(server.url, timeout))
    try:
        return llm, llm.complete(CHAT, schema=Reply, stage=STAGE).value, None
    except (LLMOutputError, ModelError) as e:
        return llm, None, e


# -- one call: StructuredLLM(OpenAICompatBackend).complete --------------------

BAD_ANSWERS = [  # fault -> what the message names; each is a failed attempt, retried once, then the stage's fallback
    ("malformed", "Invalid JSON"),
    ("truncated", "EOF while parsing"),
    ("empty", "EOF while parsing"),
    ("refusal", "I'm sorry"),
    ("refusal_field", "the model refused"),
    ("wrong_shape", "without choices[0].message"),
    ("body_malformed", "malformed or truncated JSON"),
    ("body_truncated", "malformed or truncated JSON"),
    ("body_empty", "an empty body"),
    ("html", "answered HTML"),
]


@pytest.mark.parametrize("fault, named", BAD_ANSWERS)
def test_an_unusable_answer_is_an_output_error_after_one_retry(fault, named):
    with FaultServer(default=fault) as server:
        llm, value, error = complete(server)
    assert value is None and type(error) is LLMOutputError
    assert named in error.message and "\n" not in error.message
    assert len(server.requests) == 2  # StructuredLLM's one retry
    (call,) = llm.log.calls
    assert (call.outcome, call.attempts) == ("failed", 2)


def test_a_context_overflow_falls_back_at_once():
    with FaultServer(default="overflow") as server:
        llm, value, error = complete(server)
    assert isinstance(error, ContextOverflow) and "longer than the model's context" in error.message
    assert len(server.requests) == 1  # asking again cannot shorten the prompt
    assert (llm.log.calls[0].outcome, llm.log.calls[0].attempts) == ("failed", 1)


UNUSABLE_ENDPOINT = [  # fault -> requests made, what the message says; the command stops (exit 3)
    ("http502", 3, "HTTP 502 on /chat/completions after 3 attempts"),
    ("http429", 3, "HTTP 429 on /chat/completions after 3 attempts"),
    ("http503", 3, "HTTP 503 on /chat/completions after 3 attempts"),
    ("http500", 3, "no structured-output format accepted (3 tried; last HTTP 500: internal server error)"),
    ("close", 3, "connection closed (RemoteDisconnected)"),
    ("body_cut", 3, "connection closed (IncompleteRead)"),
    ("hang", 2, f"no answer to /chat/completions within {TIMEOUT:g} s (2 attempts)"),
    ("http404", 1, "HTTP 404 on /chat/completions"),
    ("http401", 1, "HTTP 401, the API key was refused"),
]


@pytest.mark.parametrize("fault, requests, says", UNUSABLE_ENDPOINT)
def test_an_unusable_endpoint_is_a_model_error_after_bounded_retries(fault, requests, says):
    with FaultServer(default=fault, hang_s=2) as server:
        started = time.perf_counter()
        llm, value, error = complete(server, wait_for(fault))
        seconds = time.perf_counter() - started
    assert type(error) is ModelError and says in error.message and "\n" not in error.message
    assert len(server.requests) == requests
    assert llm.log.calls[0].outcome == "failed"  # logged before it stops the command
    assert seconds < requests * TIMEOUT + 1


@pytest.mark.parametrize(
    "script",
    [
        ("http503", "ok"),
        ("http429", "http502", "ok"),
        ("close", "ok"),
        ("body_cut", "ok"),
        ("hang", "ok"),
        ("malformed", "ok"),
        ("html", "ok"),
    ],
)
def test_a_transient_fault_is_retried_and_the_answer_kept(script):
    with FaultServer(*script, hang_s=2) as server:
        llm, value, error = complete(server, wait_for(*script))
    assert error is None and value == Reply(answer="x", count=0)
    assert len(server.requests) == len(script)
    assert llm.log.calls[0].outcome == "ok"


def test_a_500_while_the_format_is_unknown_tries_the_next_format_and_after_that_is_retried():
    with FaultServer("http500") as server:
        first = complete(server)
        server.then("http500")
        second = complete(server)
    assert first[2] is None and second[2] is None
    kinds = [r["response_format"]["type"] + ("+schema" if "schema" in r["response_format"] else "") for r in server.requests]
    # json_schema refused (as llama-cpp-python's server does), the next accepted, then the same one retried
    assert kinds == ["json_schema", "json_object+schema", "json_object+schema", "json_object+schema"]


def test_a_refused_connection_fails_fast_with_one_retry(monkeypatch):
    monkeypatch.setattr(openai_compat, "MAX_WAIT_S", 8.0)  # the real backoff
    slow = OpenAICompatBackend(name="faulty", base_url=f"http://127.0.0.1:{_closed_port()}/v1", model="m")  # default timeouts
    started = time.perf_counter()
    with pytest.raises(ModelError, match=r"unreachable \(connection refused, 2 attempts\)"):
        StructuredLLM(slow).complete(CHAT, schema=Reply, stage=STAGE)
    assert time.perf_counter() - started < 1.5


def test_retry_after_is_honoured_but_capped(monkeypatch):
    monkeypatch.setattr(openai_compat, "MAX_WAIT_S", 0.3)
    with FaultServer("http503", "ok") as server:
        started = time.perf_counter()
        quick = backend(server.url, retries=2)
        quick.backoff = 5.0  # a long pause asked for: the cap wins
        assert StructuredLLM(quick).complete(CHAT, schema=Reply, stage=STAGE).value.count == 0
    assert 0.3 <= time.perf_counter() - started < 1.5


# -- before anything is written: check_reachable -------------------------------


def test_a_model_list_is_enough_and_costs_no_completion():
    with FaultServer() as server:
        backend(server.url).check_reachable()
    assert [r["path"] for r in server.requests] == ["/v1/models"]


@pytest.mark.parametrize("models", ["http404", "html", "http503", "wrong_shape"])
def test_a_server_without_models_passes_when_a_completion_answers(models):
    with FaultServer(models=models) as server:
        backend(server.url).check_reachable()
    assert server.requests[-1]["path"] == "/v1/chat/completions" and server.requests[-1]["max_tokens"] == 1


def test_a_request_turned_down_in_json_still_proves_the_api():
    with FaultServer(models="http404", default="overflow") as server:
        backend(server.url).check_reachable()


@pytest.mark.parametrize("everything", ["http404", "html"])
def test_404_or_html_everywhere_is_not_an_openai_endpoint(everything):
    with FaultServer(everything=everything) as server, pytest.raises(ModelError, match="is not an OpenAI-compatible endpoint") as caught:
        backend(server.url).check_reachable()
    assert "/v1" in caught.value.message and len(server.requests) == 2


@pytest.mark.parametrize(
    "kw, says",
    [
        ({"models": "http401"}, "HTTP 401, the API key was refused"),
        ({"models": "http404", "default": "http401"}, "HTTP 401, the API key was refused"),
        ({"models": "hang"}, f"no answer to /models within {TIMEOUT:g} s (1 attempt)"),
        ({"models": "close"}, "connection closed"),
        ({"models": "http404", "default": "http503"}, "HTTP 503 on /chat/completions after 3 attempts"),
        ({"models": "http404", "default": "hang"}, "no answer to /chat/completions"),
    ],
)
def test_the_check_refuses_an_endpoint_that_cannot_answer(kw, says):
    with FaultServer(**kw, hang_s=2) as server, pytest.raises(ModelError, match=None) as caught:
        backend(server.url, wait_for(*kw.values())).check_reachable()
    assert says in caught.value.message


def test_the_check_of_a_refused_connection_says_unreachable():
    with pytest.raises(ModelError, match="unreachable"):
        backend(f"http://127.0.0.1:{_closed_port()}/v1").check_reachable()


# -- the CLI: ingest and ask against the fault server --------------------------


@dataclass
class Run:
    code: int
    out: str
    err: str
    seconds: float

    def one_line(self) -> str:
        lines = self.err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in self.err, self.err
        return lines[0]


class Cli:
    """`nemori` through its real entry point, in this process, with the fake embedder and the fault server's preset."""

    def __init__(self, monkeypatch, capsys, tmp_path):
        self.monkeypatch, self.capsys, self.tmp_path = monkeypatch, capsys, tmp_path
        self.db = tmp_path / "memory.db"
        self.chat = write_jsonl(tmp_path / "chat.jsonl", conversation())  # 16 messages, 4 topics a day apart
        self.embedders_built = 0

    def use(self, url: str, *, timeout: float = ROOMY) -> None:
        presets = self.tmp_path / "models.toml"
        presets.write_text(
            f'[llm.faulty]\nkind = "openai"\nbase_url = "{url}"\nmodel = "fault-model"\ntimeout = {timeout}\nconnect_timeout = {timeout}\n'
        )
        self.monkeypatch.setenv("NEMORI_MODELS_FILE", str(presets))
        self.monkeypatch.setenv("NEMORI_MODEL", "faulty")

    def __call__(self, *args) -> Run:
        self.monkeypatch.setattr(sys, "argv", ["nemori", *map(str, args)])
        self.monkeypatch.setattr(deps, "_backends", {})  # as a new process would
        openai_compat._working_format.clear()
        self.capsys.readouterr()
        started = time.perf_counter()
        with pytest.raises(SystemExit) as done:
            cli_app.main()
        seconds = time.perf_counter() - started
        out = self.capsys.readouterr()
        return Run(done.value.code or 0, out.out, out.err, seconds)

    def ingest(self, *extra) -> Run:
        return self("ingest", self.chat, "--db", self.db, "--json", *extra)

    def stats(self) -> dict:
        run = self("stats", "--db", self.db, "--json")
        assert run.code == 0, run.err
        stats = json.loads(run.out)
        total = {k: sum(s[k] for s in stats["stages"]) for k in ("calls", "failed", "fallbacks")}
        return {**stats["counts"], **total, "stages": {s["stage"]: s for s in stats["stages"]}}


@pytest.fixture
def cli(monkeypatch, capsys, tmp_path) -> Cli:
    isolate(monkeypatch, tmp_path)
    runner = Cli(monkeypatch, capsys, tmp_path)

    def build_embedder(settings, db=None):
        runner.embedders_built += 1
        return FakeEmbedder()

    monkeypatch.setattr(deps, "build_embedder", build_embedder)
    monkeypatch.setattr(deps, "check_embedder_files", lambda settings: None)
    return runner


def test_a_healthy_endpoint_ingests_and_answers(cli):
    with FaultServer(answer=answer) as server:
        cli.use(server.url)
        run = cli.ingest()
        assert run.code == 0 and run.err == "", run.err
        report = json.loads(run.out)
        assert report["episodes"] == 4 and report["pending"] == 0 and report["llm_failed"] == 0
        asked = cli("ask", "What about the kayak?", "--db", cli.db, "--json")
    assert asked.code == 0 and asked.err == "" and json.loads(asked.out)["answer"] == "x"
    assert cli.stats()["failed"] == 0


@pytest.mark.parametrize("everything", ["http404", "html"])
def test_ingest_refuses_a_server_that_is_not_an_openai_endpoint_before_any_write(cli, everything):
    with FaultServer(everything=everything) as server:
        cli.use(server.url)
        run = cli.ingest()
    assert run.code == 3 and "is not an OpenAI-compatible endpoint" in run.one_line()
    assert not cli.db.exists() and cli.embedders_built == 0


def test_ingest_of_a_refused_connection_fails_fast_before_any_write(cli, monkeypatch):
    monkeypatch.setattr(openai_compat, "MAX_WAIT_S", 8.0)  # the real backoff
    cli.use(f"http://127.0.0.1:{_closed_port()}/v1", timeout=120)  # the default timeouts do not matter to a refusal
    run = cli.ingest()
    assert run.code == 3 and "unreachable (connection refused, 2 attempts)" in run.one_line()
    assert run.seconds < 1.5 and not cli.db.exists()


@pytest.mark.parametrize("fault", [f for f, _ in BAD_ANSWERS] + ["overflow"])
def test_an_endpoint_that_answers_nothing_usable_stops_ingest_with_the_work_pending(cli, fault):
    with FaultServer(default=fault) as server:
        cli.use(server.url)
        run = cli.ingest()
    line = run.one_line()
    assert run.code == 3 and "gave no usable answer: all" in line and "16 messages are pending" in line
    stats = cli.stats()
    assert (stats["messages"], stats["pending"], stats["episodes"], stats["facts"]) == (16, 16, 0, 0)
    assert stats["calls"] >= 1 and stats["failed"] == stats["calls"]  # the fault is in the call log
    assert stats["fallbacks"] >= 1


def test_the_same_holds_for_a_memory_without_episodes(cli):
    with FaultServer(default="malformed") as server:
        cli.use(server.url)
        run = cli.ingest(
            "--memory", "amem", "--build", "now"
        )  # auto would only store: 16 notes at an unknown endpoint's rates exceed its bar
    assert run.code == 3 and "gave no usable answer: all" in run.one_line()
    stats = cli.stats()
    assert (stats["pending"], stats["notes"]) == (16, 0) and stats["failed"] == stats["calls"] >= 1


def test_after_the_endpoint_recovers_the_same_ingest_resumes(cli):
    with FaultServer(default="refusal") as server:
        cli.use(server.url)
        assert cli.ingest().code == 3
    with FaultServer(answer=answer) as server:
        cli.use(server.url)
        run = cli.ingest()
    assert run.code == 0 and run.err == ""
    report = json.loads(run.out)
    assert report["added"] == 0 and report["episodes"] == 4 and report["pending"] == 0


@pytest.mark.parametrize(
    "fault, says",
    [
        ("http503", "HTTP 503 on /chat/completions after 3 attempts"),
        ("hang", "no answer to /chat/completions"),
        ("close", "connection closed"),
    ],
)
def test_an_endpoint_failing_mid_run_stops_ingest_resumable_and_logged(cli, fault, says):
    with FaultServer(default=fault, hang_s=2, answer=answer) as server:
        cli.use(server.url, timeout=wait_for(fault))
        run = cli.ingest()
    line = run.one_line()
    assert run.code == 3 and says in line and "16 messages are pending and nothing is lost" in line
    assert run.seconds < 5
    stats = cli.stats()
    assert (stats["pending"], stats["episodes"]) == (16, 0)
    assert stats["failed"] == stats["calls"] == 1  # the one call it stopped at, counted


def test_transient_faults_leave_no_trace_but_the_right_memory(cli):
    with FaultServer("http503", "http429", "ok", "close", "http502", answer=answer) as server:
        cli.use(server.url)
        run = cli.ingest()
    assert run.code == 0 and run.err == "", run.err
    assert json.loads(run.out)["episodes"] == 4 and cli.stats()["failed"] == 0


def test_a_mostly_failing_endpoint_warns_once_and_keeps_the_memory(cli):
    # The first call (the partition) answers; every later one is a refusal in words.
    with FaultServer("ok", default="refusal", answer=answer) as server:
        cli.use(server.url)
        run = cli.ingest()
    assert run.code == 0
    report = json.loads(run.out)
    line = run.one_line()
    assert line.startswith("nemori: warning: ") and f"{report['llm_failed']} of {report['llm_calls']} LLM calls" in line
    assert "%" in line and "`nemori stats`" in line
    assert report["episodes"] == 4 and report["pending"] == 0  # built by the fallbacks
    stats = cli.stats()
    assert stats["failed"] == report["llm_failed"] == report["llm_calls"] - 1 and stats["fallbacks"] == report["fallbacks"]


def test_one_context_overflow_is_a_counted_fallback_without_a_warning(cli):
    with FaultServer("ok", "overflow", answer=answer) as server:
        cli.use(server.url)
        run = cli.ingest()
    assert run.code == 0 and run.err == "", run.err
    report = json.loads(run.out)
    assert report["llm_failed"] == 1 and report["fallbacks"] >= 1 and report["episodes"] == 4
    db = SqliteStore(cli.db, create=False)
    try:
        details = [r["detail"] for r in db.query("SELECT detail FROM stage_events WHERE kind = 'fallback'")]
    finally:
        db.close()
    assert any("longer than the model's context" in d for d in details)


@pytest.fixture
def memory(cli):
    """A database with four episodes, built through a healthy endpoint."""
    with FaultServer(answer=answer) as server:
        cli.use(server.url)
        assert cli.ingest().code == 0
    return cli


@pytest.mark.parametrize(
    "fault, says", [("refusal", "Invalid JSON"), ("overflow", "longer than the model's context"), ("html", "answered HTML")]
)
def test_ask_with_an_unusable_answer_says_so_and_counts_it(memory, fault, says):
    before = memory.stats()
    with FaultServer(default=fault) as server:
        memory.use(server.url)
        run = memory("ask", "What about the kayak?", "--db", memory.db, "--json")
    assert run.code == 0 and json.loads(run.out)["failed"] is True
    line = run.one_line()
    assert line.startswith("nemori: warning: ") and says in line and "`nemori stats`" in line
    after = memory.stats()
    assert after["stages"]["answer"]["failed"] == before["stages"].get("answer", {}).get("failed", 0) + 1
    assert after["stages"]["answer"]["fallbacks"] >= 1


@pytest.mark.parametrize(
    "server_kw, says",
    [
        ({"default": "http503"}, "HTTP 503 on /chat/completions after 3 attempts"),
        ({"default": "hang"}, "no answer to /chat/completions"),
        ({"everything": "http404"}, "is not an OpenAI-compatible endpoint"),
        ({"everything": "html"}, "is not an OpenAI-compatible endpoint"),
    ],
)
def test_ask_against_an_unusable_endpoint_exits_3_and_changes_nothing(memory, server_kw, says):
    before = memory.stats()
    with FaultServer(**server_kw, hang_s=2) as server:
        memory.use(server.url, timeout=wait_for(*server_kw.values()))
        run = memory("ask", "What about the kayak?", "--db", memory.db)
    assert run.code == 3 and says in run.one_line() and run.out == ""
    assert run.seconds < 3
    assert memory.stats() == before


def test_ask_of_a_refused_connection_fails_fast_before_the_embedder_loads(memory, monkeypatch):
    monkeypatch.setattr(openai_compat, "MAX_WAIT_S", 8.0)  # the real backoff
    before, built = memory.stats(), memory.embedders_built
    memory.use(f"http://127.0.0.1:{_closed_port()}/v1", timeout=120)
    run = memory("ask", "What about the kayak?", "--db", memory.db)
    assert run.code == 3 and "unreachable (connection refused, 2 attempts)" in run.one_line()
    assert run.seconds < 1.5 and memory.embedders_built == built  # refused before the embedder was built
    assert memory.stats() == before


# -- as a real process: exit code and stderr as a user sees them ---------------


def _process(tmp_path, url: str, *args: str) -> subprocess.CompletedProcess:
    presets = tmp_path / "process-models.toml"
    # An embedder that cannot load: should the order ever be wrong, this fails instead of loading a real model.
    presets.write_text(
        f'[llm.faulty]\nkind = "openai"\nbase_url = "{url}"\nmodel = "fault-model"\ntimeout = {ROOMY}\nconnect_timeout = {ROOMY}\n'
        '[embedder.absent]\nkind = "sentence-transformers"\npath = "/nonexistent/embedder"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEMORI_")}
    env.update(NEMORI_MODELS_FILE=str(presets), NEMORI_MODEL="faulty", NEMORI_EMBEDDER="absent", NEMORI_CACHE_DIR=str(tmp_path / "cache"))
    return subprocess.run([sys.executable, "-m", "nemori_cli", *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=60)


def test_a_real_process_refuses_a_404_server_with_one_line(tmp_path):
    chat = write_jsonl(tmp_path / "chat.jsonl", conversation())
    with FaultServer(everything="http404") as server:
        run = _process(tmp_path, server.url, "ingest", str(chat), "--db", str(tmp_path / "m.db"))
    assert run.returncode == 3 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert run.stderr.startswith("nemori: error: endpoint ") and "is not an OpenAI-compatible endpoint" in run.stderr
    assert not (tmp_path / "m.db").exists()


def test_a_real_process_asking_a_refused_endpoint_fails_fast(memory, tmp_path):
    started = time.perf_counter()
    run = _process(tmp_path, f"http://127.0.0.1:{_closed_port()}/v1", "ask", "What about the kayak?", "--db", str(memory.db))
    seconds = time.perf_counter() - started  # the interpreter's start included
    assert run.returncode == 3 and run.stderr.count("\n") == 1 and "Traceback" not in run.stderr
    assert "unreachable (connection refused, 2 attempts)" in run.stderr
    assert seconds < 10
