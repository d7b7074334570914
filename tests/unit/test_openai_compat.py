"""The OpenAI-compatible adapter against a scripted HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from nemori_cli.errors import ModelError
from nemori_cli.llm import openai_compat
from nemori_cli.llm.openai_compat import OpenAICompatBackend


class Server:
    """Accepts only the response_format types in ``accepts``; records requests."""

    def __init__(self, accepts: set[str]):
        self.accepts = accepts
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send(200, {"data": [{"id": "m"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                outer.headers.append(dict(self.headers))
                fmt = body["response_format"]
                kind = fmt["type"] + ("+schema" if "schema" in fmt else "")
                if kind not in outer.accepts:
                    return self._send(500, {"error": "Input should be 'text' or 'json_object'"})
                self._send(
                    200, {"choices": [{"message": {"content": '{"ok": true}'}}], "usage": {"prompt_tokens": 7, "completion_tokens": 3}}
                )

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()


@pytest.fixture(autouse=True)
def _forget_formats():
    openai_compat._working_format.clear()


@pytest.mark.parametrize(
    "accepts, expected",
    [({"json_schema"}, "json_schema"), ({"json_object+schema"}, "json_object+schema"), ({"json_object"}, "json_object")],
)
def test_falls_back_through_the_dialects_and_remembers(accepts, expected):
    server = Server(accepts)
    try:
        backend = OpenAICompatBackend(name="t", base_url=server.url, model="m", api_key="sk-x")
        out = backend.chat([{"role": "user", "content": "hi"}], schema={"title": "T", "type": "object"}, max_tokens=5, temperature=0)
        assert out.text == '{"ok": true}' and out.prompt_tokens == 7
        first_round = len(server.requests)
        backend.chat([{"role": "user", "content": "hi"}], schema={"title": "T", "type": "object"}, max_tokens=5, temperature=0)
        assert len(server.requests) == first_round + 1  # the working dialect is remembered
        assert openai_compat._working_format[server.url] == expected
        assert server.headers[0]["Authorization"] == "Bearer sk-x"
    finally:
        server.close()


def test_unreachable_endpoint_is_a_model_error():
    backend = OpenAICompatBackend(name="t", base_url="http://127.0.0.1:9/v1", model="m")
    with pytest.raises(ModelError, match="unreachable"):
        backend.check_reachable()


def test_no_dialect_accepted_is_a_model_error():
    server = Server(set())
    try:
        backend = OpenAICompatBackend(name="t", base_url=server.url, model="m")
        with pytest.raises(ModelError, match="no structured-output format accepted"):
            backend.chat([{"role": "user", "content": "hi"}], schema={"type": "object"}, max_tokens=5, temperature=0)
    finally:
        server.close()
