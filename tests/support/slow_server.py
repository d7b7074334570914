"""An OpenAI-compatible endpoint on 127.0.0.1 that answers nemori's prompts after a fixed latency, several at once.

For `ingest --workers N`: the unit tests (tests/unit/test_workers.py) and the
benchmark (scripts/bench_workers.py). Every chat completion waits ``delay``
seconds, like a model server with free slots would, and then answers the
request's JSON schema from the prompt alone, so the same prompt always gets the
same answer whichever order the requests come in:

- Partition: a boundary wherever a message's topic word differs from the
  previous message's;
- Narrative, MergedEpisode: "<speakers> on the <topic>", dated from the prompt;
- Continuation: the two titles share a word (the self-check passes, and a
  topic that comes back within a week continues its episode);
- Prediction, Distilled, Summary: short answers naming the topic, so facts
  are evoked, predicted and consolidated as with a real model;
- Outdated: the newer fact says "quit", "now", "no longer" or "moved" (the
  self-check passes; the facts made here outdate none);
- any other schema: the smallest valid instance (tests/support/fault_server.py).

``in_flight`` is the number of requests being answered now, ``most`` the
highest it reached, ``served`` how many were answered. ``most_after`` is the
highest number in flight at once of the calls made after an episode's
narration (integration, prediction, distillation, consolidation, summary):
one user's come one at a time, but for a fact's consolidation questions,
asked together; several users' at once mean that no unit of work held the
write lock while the model answered. A request whose prompt holds
``fail_word`` gets HTTP 404 (an unusable endpoint: the run stops).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.fault_server import _schema_of, instance

TOPICS = ("kayak", "piano", "garden", "chess", "bakery", "tennis", "violin", "harbour", "museum", "cycling", "pottery", "sailing")
_NUMBERED = re.compile(r"^\[(\d+)\] (?:\([^)]*\) )?([^:]+): (.*)$")
_DAY = re.compile(r"Conversation of ([^:]*?)(?: between ([^:]*))?:")
_WORD = re.compile(r"[a-z]{4,}")
_COMMON = {"with", "their", "talked", "about", "that", "this", "again", "point"}
AFTER_NARRATION = frozenset({"Continuation", "MergedEpisode", "Prediction", "Distilled", "Outdated", "Summary"})


def topic_of(text: str) -> str:
    text = text.lower()
    found = [(text.find(t), t) for t in TOPICS if t in text]
    return min(found)[1] if found else "talk"


def _user_text(messages: list[dict]) -> str:
    return next((m.get("content", "") for m in reversed(messages) if m.get("role") == "user"), "")


def _title_words(line: str) -> set[str]:
    title = line.split(") ", 1)[-1].split(":", 1)[0]
    return set(_WORD.findall(title.lower())) - _COMMON


def answer(messages: list[dict], schema: dict) -> dict:
    """A valid answer to one of nemori's prompts, from the prompt alone."""
    title = schema.get("title")
    text = _user_text(messages)
    if title == "Partition":
        topics = [topic_of(m.group(3)) for line in text.splitlines() if (m := _NUMBERED.match(line))]
        return {"boundaries": [i + 1 for i in range(1, len(topics)) if topics[i] != topics[i - 1]]}
    if title in ("Narrative", "MergedEpisode"):
        day = _DAY.search(text)
        people = (day.group(2) if day and day.group(2) else "the speakers").replace(", ", " and ")
        when = day.group(1) if day else "that day"
        topic = topic_of(text)
        return {"title": f"{people} on the {topic}", "narrative": f"On {when}, {people} talked about the {topic} at length."}
    if title == "Continuation":
        earlier = next((line for line in text.splitlines() if line.startswith("EARLIER")), "")
        new = next((line for line in text.splitlines() if line.startswith("NEW")), "")
        return {"same_event": bool(_title_words(earlier) & _title_words(new))}
    if title == "Prediction":
        return {"prediction": f"They probably talked about the {topic_of(text)}."}
    if title == "Distilled":
        day = _DAY.search(text)
        topic = topic_of(text)
        speaker = next((m.group(1) for line in text.splitlines() if (m := re.match(r"^(?:\([^)]*\) )?([A-Z][a-z]+): ", line))), "Ann")
        return {"facts": [f"{speaker} talked about the {topic} on {day.group(1) if day else 'that day'}."]}
    if title == "Outdated":
        newer = next((line for line in text.splitlines() if line.startswith("NEWER")), "")
        return {"outdated": bool(re.search(r"\b(quit|now|no longer|moved)\b", newer))}
    if title == "Summary":
        return {"summary": f"They talked about the {topic_of(text)}."}
    return instance(schema)


class SlowServer:
    """The endpoint; a context manager. ``url`` ends in /v1."""

    def __init__(self, delay: float = 0.2, *, fail_word: str | None = None):
        self.delay, self.fail_word = delay, fail_word
        self.in_flight = self.most = self.served = 0
        self.after_in_flight = self.most_after = 0
        self.prompts: list[str] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):
                pass

            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                # The client went away (a run stopped with Ctrl-C): nothing to answer.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(data)

            def do_GET(self):
                self._send(200, {"object": "list", "data": [{"id": "slow-model", "object": "model"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                messages = body.get("messages", [])
                after = _schema_of(body).get("title") in AFTER_NARRATION
                with server._lock:
                    server.in_flight += 1
                    server.most = max(server.most, server.in_flight)
                    server.after_in_flight += after
                    server.most_after = max(server.most_after, server.after_in_flight)
                try:
                    time.sleep(server.delay)
                    text = _user_text(messages)
                    if server.fail_word and server.fail_word in text:
                        return self._send(404, {"error": {"message": "model not found", "type": "not_found_error"}})
                    content = json.dumps(answer(messages, _schema_of(body)))
                finally:
                    with server._lock:
                        server.in_flight -= 1
                        server.after_in_flight -= after
                        server.served += 1
                        server.prompts.append(_user_text(messages))
                self._send(200, {
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70},
                })  # fmt: skip

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 128

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()

    def reset(self) -> None:
        with self._lock:
            self.most, self.most_after, self.served, self.prompts = self.in_flight, self.after_in_flight, 0, []

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> SlowServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
