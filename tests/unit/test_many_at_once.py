"""Several generations at once: StructuredLLM.complete_many, narrate_many, the runner, and an endpoint with requests in flight.

The in-process batched decoder itself (llm/batched.py) needs a real model:
tests/integration/test_batched_decoding.py.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pydantic import BaseModel

from nemori_cli.errors import LLMOutputError, ModelError
from nemori_cli.llm.base import ChatRequest, RawCompletion, StructuredLLM
from nemori_cli.llm.fake import FakeBackend
from nemori_cli.stages import Stage

S = Stage("s", 64)


class Pick(BaseModel):
    choice: int


class ManyFake(FakeBackend):
    """A FakeBackend that also takes several requests at once, recording the sizes it was given."""

    def __init__(self, *args, parallel: int = 4, **kwargs):
        super().__init__(*args, **kwargs)
        self.parallel, self.batches = parallel, []

    def chat_many(self, requests: list[ChatRequest]):
        self.batches.append(len(requests))
        out = []
        for r in requests:
            try:
                out.append(self.chat(r.messages, schema=r.schema, max_tokens=r.max_tokens, temperature=r.temperature))
            except LLMOutputError as e:
                out.append(e)
        return out


def ask(n: int) -> list[list[dict]]:
    return [[{"role": "user", "content": f"pick {i}"}] for i in range(n)]


def test_first_attempts_go_together_and_a_bad_one_is_retried_alone():
    backend = ManyFake(['{"choice": 0}', "nonsense", '{"choice": 2}', '{"choice": 1}'])
    llm = StructuredLLM(backend)
    out = llm.complete_many(ask(3), schema=Pick, stage=S)
    assert backend.batches == [3]
    assert [o.value.choice for o in out] == [0, 1, 2]  # the second was asked again, on its own, after the batch
    assert [c.attempts for c in llm.log.calls] == [1, 2, 1]
    assert all(c.outcome == "ok" for c in llm.log.calls)


def test_an_answer_that_never_parses_is_its_error_not_the_batch_s():
    backend = ManyFake(['{"choice": 0}', "bad", "still bad"])
    llm = StructuredLLM(backend)
    first, second = llm.complete_many(ask(2), schema=Pick, stage=S)
    assert first.value.choice == 0
    assert isinstance(second, LLMOutputError) and "gave no valid answer in 2 attempts" in second.message
    assert [c.outcome for c in llm.log.calls] == ["ok", "failed"]


def test_a_backend_without_chat_many_is_asked_one_by_one():
    backend = FakeBackend(['{"choice": 0}', '{"choice": 1}'])
    out = StructuredLLM(backend).complete_many(ask(2), schema=Pick, stage=S)
    assert [o.value.choice for o in out] == [0, 1] and len(backend.history) == 2


def test_a_model_error_stops_them_all_and_is_logged():
    class Dead(ManyFake):
        def chat_many(self, requests):
            raise ModelError("endpoint gone")

    llm = StructuredLLM(Dead())
    with pytest.raises(ModelError):
        llm.complete_many(ask(3), schema=Pick, stage=S)
    assert [c.outcome for c in llm.log.calls] == ["failed"]


def test_narrate_many_gives_one_draft_per_group_and_falls_back_per_group():
    from nemori_cli.domain import Message
    from nemori_cli.importers.jsonl import parse_timestamp
    from nemori_cli.pipeline.narrate import narrate_many
    from nemori_cli.pipeline.partition import Group
    from tests.unit.fake_ingest import conversation

    rows = conversation(per_topic=2)
    messages = [
        Message(i, "u", f"k{i}", r["speaker"], r["content"], parse_timestamp(r["timestamp"]), None, None) for i, r in enumerate(rows, 1)
    ]
    groups = [Group(tuple(messages[0:2]), "topic"), Group(tuple(messages[2:4]), "topic")]
    backend = ManyFake([{"title": "Kayak", "narrative": "On 8 May 2023 Ann and Bob talked about the kayak."}, "x", "y"])
    llm = StructuredLLM(backend)
    first, second = narrate_many(groups, llm)
    assert backend.batches == [2]
    assert first.title == "Kayak" and first.message_ids == (1, 2)
    assert second.message_ids == (3, 4) and second.narrative  # built from the messages
    assert [e.kind for e in llm.log.events] == ["fallback"]


def test_the_runner_narrates_a_window_together_only_with_a_parallel_backend(monkeypatch, tmp_path):
    from nemori_cli import deps
    from tests.unit.fake_ingest import conversation, isolate, nemori, use_fakes, write_jsonl

    isolate(monkeypatch, tmp_path)
    built = use_fakes(monkeypatch)
    source = write_jsonl(tmp_path / "c.jsonl", conversation())
    assert nemori("ingest", source, "--db", tmp_path / "one.db").exit_code == 0
    one_at_a_time = [s.get("title") for _m, s in built[-1].history]

    real = deps.build_llm

    def parallel_llm(settings):
        llm = real(settings)
        llm.backend.__class__ = type("Parallel", (type(llm.backend),), {"parallel": 4, "chat_many": ManyFake.chat_many})
        llm.backend.batches = []
        return llm

    monkeypatch.setattr(deps, "build_llm", parallel_llm)
    result = nemori("ingest", source, "--db", tmp_path / "many.db", "--json")
    assert result.exit_code == 0, result.output
    together = built[-1]
    assert together.batches and max(together.batches) >= 2  # a window's narrations went together
    assert sorted(s.get("title") for _m, s in together.history) == sorted(one_at_a_time)  # the same calls, in another order
    report = json.loads(result.output)
    assert report["episodes"] == 4 and report["pending"] == 0


# -- an endpoint with requests in flight at once, against a server of fixed latency --


class SlowServer:
    """Answers every chat completion after ``delay`` seconds, several at once; counts the most in flight."""

    def __init__(self, delay: float):
        self.delay, self.in_flight, self.most = delay, 0, 0
        lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send({"data": [{"id": "m"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with lock:
                    outer.in_flight += 1
                    outer.most = max(outer.most, outer.in_flight)
                time.sleep(outer.delay)
                with lock:
                    outer.in_flight -= 1
                n = body["messages"][-1]["content"].split()[-1]
                self._send(
                    {
                        "choices": [{"message": {"content": json.dumps({"choice": int(n)})}}],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 4},
                    }
                )

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


@pytest.mark.parametrize("parallel", [1, 4])
def test_an_endpoint_keeps_parallel_requests_in_flight_in_order(parallel):
    from nemori_cli.llm import openai_compat
    from nemori_cli.llm.openai_compat import OpenAICompatBackend

    openai_compat._working_format.clear()
    server = SlowServer(0.2)
    try:
        backend = OpenAICompatBackend(name="slow", base_url=server.url, model="m", parallel=parallel)
        llm = StructuredLLM(backend)
        out = llm.complete_many(ask(8), schema=Pick, stage=S)
        assert [o.value.choice for o in out] == list(range(8))  # each answer with its own request
        assert server.most == parallel
    finally:
        server.close()


def test_an_unusable_endpoint_stops_chat_many_with_a_model_error():
    from nemori_cli.llm.openai_compat import OpenAICompatBackend

    backend = OpenAICompatBackend(name="gone", base_url="http://127.0.0.1:9/v1", model="m", parallel=4)
    with pytest.raises(ModelError):
        StructuredLLM(backend).complete_many(ask(4), schema=Pick, stage=S)


def test_raw_completions_pass_through_chat_many_unchanged():
    backend = ManyFake([RawCompletion('{"choice": 3}', 1, 1).text])
    (only,) = backend.chat_many([ChatRequest([{"role": "user", "content": "x"}], {}, 8, 0.0)])
    assert only.text == '{"choice": 3}'
