"""A fault-injecting OpenAI-compatible server on 127.0.0.1, scripted request by request.

It serves ``GET /v1/models`` and ``POST /v1/chat/completions`` from a thread
(stdlib http.server, port 0). Each chat request takes the next fault from the
script, then ``default``; ``/models`` answers ``models``. A fault is one of:

===================  ==========================================================
``ok``               a valid answer for the JSON schema in the request's response_format
``malformed``        200, message content that is not JSON (``{"title": oops``)
``truncated``        200, message content that is a valid answer cut in half
``empty``            200, empty message content
``refusal``          200, content that is a refusal in words, not JSON
``refusal_field``    200, content null and OpenAI's ``refusal`` field set
``wrong_shape``      200, a JSON body without choices
``body_malformed``   200, a body that is not JSON at all
``body_truncated``   200, a JSON body cut in half (Content-Length matches)
``body_empty``       200, an empty body
``body_cut``         200, Content-Length promises more than is sent, then the connection closes
``html``             200, an HTML page (text/html)
``http500``          HTTP 500 with an OpenAI-style error body
``http502``          HTTP 502, likewise
``http429``          HTTP 429, with Retry-After: 0
``http503``          HTTP 503, with Retry-After: 0
``overflow``         HTTP 400, llama.cpp's words for a prompt over the context size
``http404``          HTTP 404 (``FaultServer(everything="http404")``: for every path)
``http401``          HTTP 401, an API key refused
``hang``             no answer at all until ``hang_s`` passes or the server closes
``close``            the connection closed without any answer
===================  ==========================================================

Use it as a context manager; ``url`` is the base URL (ending in /v1),
``served`` the faults in the order they were served, ``requests`` the
request bodies.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FAULTS = (
    "ok", "malformed", "truncated", "empty", "refusal", "refusal_field", "wrong_shape",
    "body_malformed", "body_truncated", "body_empty", "body_cut", "html",
    "http500", "http502", "http429", "http503", "overflow", "http404", "http401", "hang", "close",
)  # fmt: skip

Answer = Callable[[list[dict], dict], dict]
HTML = b"<!DOCTYPE html><html><head><title>Welcome</title></head><body><h1>It works!</h1></body></html>"


def instance(schema: dict, root: dict | None = None):
    """A small value valid for a JSON schema as pydantic writes them ($defs, anyOf, enum, bounds)."""
    root = root or schema
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return instance(root.get("$defs", {})[name], root)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return instance(options[0], root)
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props = schema.get("properties", {})
        return {name: instance(props[name], root) for name in schema.get("required", list(props))}
    if kind == "array":
        return [instance(schema.get("items", {}), root) for _ in range(int(schema.get("minItems", 0)))]
    if kind == "string":
        return "x" * max(1, int(schema.get("minLength", 1)))
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", -1) + 1)
        return int(low) if kind == "integer" else float(low)
    if kind == "boolean":
        return False
    return None


def _schema_of(body: dict) -> dict:
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return fmt.get("json_schema", {}).get("schema", {})
    return fmt.get("schema", {})


class FaultServer:
    def __init__(
        self,
        *script: str,
        default: str = "ok",
        models: str = "ok",
        everything: str | None = None,
        answer: Answer | None = None,
        hang_s: float = 5.0,
        tokens: tuple[int, int] = (11, 5),
    ):
        for fault in (*script, default, models, everything or "ok"):
            if fault not in FAULTS:
                raise ValueError(f"unknown fault {fault!r}; one of {', '.join(FAULTS)}")
        self.script = list(script)
        self.default, self.models, self.everything = default, models, everything
        self.answer = answer
        self.hang_s, self.tokens = hang_s, tokens
        self.served: list[str] = []
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self._thread.start()

    # -- scripting -------------------------------------------------------
    def then(self, *faults: str) -> FaultServer:
        """Queue more faults for the next chat requests."""
        with self._lock:
            self.script.extend(faults)
        return self

    def _next(self, path: str) -> str:
        with self._lock:
            if self.everything:
                fault = self.everything
            elif path.endswith("/models"):
                fault = self.models
            else:
                fault = self.script.pop(0) if self.script else self.default
            self.served.append(fault)
            return fault

    def chat_faults(self) -> list[str]:
        return [f for f, r in zip(self.served, self.requests) if r.get("path", "").endswith("/chat/completions")]

    def close(self) -> None:
        self._closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> FaultServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- answering -------------------------------------------------------
    def _valid(self, body: dict) -> dict:
        schema = _schema_of(body)
        if self.answer is not None:
            try:
                return self.answer(body.get("messages", []), schema)
            except KeyError:
                pass
        return instance(schema)

    def _completion(self, content, **message) -> dict:
        prompt, output = self.tokens
        return {
            "id": "chatcmpl-fault",
            "object": "chat.completion",
            "model": "fault",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content, **message}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": output, "total_tokens": prompt + output},
        }

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one request per connection: a fault never leaks into the next

            def log_message(self, *args):
                pass

            def _send(
                self, code: int, data: bytes, content_type: str = "application/json", headers: dict | None = None, length: int | None = None
            ):
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data) if length is None else length))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _json(self, code: int, body, headers: dict | None = None):
                self._send(code, json.dumps(body).encode(), headers=headers)

            def _error(self, code: int, message: str, kind: str, headers: dict | None = None):
                self._json(code, {"error": {"code": code, "message": message, "type": kind}}, headers)

            def do_GET(self):
                server.requests.append({"path": self.path})
                fault = server._next(self.path)
                if fault == "ok" and self.path.rstrip("/").endswith("/models"):
                    return self._json(200, {"object": "list", "data": [{"id": "fault-model", "object": "model"}]})
                if fault == "ok":
                    return self._error(404, f"no route {self.path}", "not_found_error")
                self._fault(fault, {})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                server.requests.append({"path": self.path, **body})
                fault = server._next(self.path)
                if not self.path.rstrip("/").endswith("/chat/completions") and fault == "ok":
                    return self._error(404, f"no route {self.path}", "not_found_error")
                self._fault(fault, body)

            def _fault(self, fault: str, body: dict):
                valid = json.dumps(server._valid(body)) if fault in ("ok", "truncated") else ""
                if fault == "ok":
                    return self._json(200, server._completion(valid))
                if fault == "malformed":
                    return self._json(200, server._completion('{"title": oops, "narrative": '))
                if fault == "truncated":
                    return self._json(200, server._completion(valid[: max(1, len(valid) // 2)]))
                if fault == "empty":
                    return self._json(200, server._completion(""))
                if fault == "refusal":
                    return self._json(200, server._completion("I'm sorry, but I can't help with that request."))
                if fault == "refusal_field":
                    return self._json(200, server._completion(None, refusal="I can't assist with that."))
                if fault == "wrong_shape":
                    return self._json(200, {"object": "chat.completion", "choices": []})
                if fault == "body_malformed":
                    return self._send(200, b'{"choices": [{"message": {"content": nope}}]')
                if fault == "body_truncated":
                    whole = json.dumps(server._completion('{"answer": "x"}')).encode()
                    return self._send(200, whole[: len(whole) // 2])
                if fault == "body_empty":
                    return self._send(200, b"")
                if fault == "body_cut":
                    whole = json.dumps(server._completion('{"answer": "x"}')).encode()
                    return self._send(200, whole[: len(whole) // 2], length=len(whole))
                if fault == "html":
                    return self._send(200, HTML, content_type="text/html; charset=utf-8")
                if fault == "http404":
                    return self._error(404, f"no route {self.path}", "not_found_error")
                if fault == "http401":
                    return self._error(401, "Incorrect API key provided", "invalid_request_error")
                if fault == "overflow":
                    return self._error(
                        400, "the request exceeds the available context size, try increasing it", "exceed_context_size_error"
                    )
                if fault in ("http500", "http502"):
                    return self._error(int(fault[4:]), "internal server error", "server_error")
                if fault in ("http429", "http503"):
                    return self._error(int(fault[4:]), "busy, try again", "unavailable_error", headers={"Retry-After": "0"})
                if fault == "hang":
                    server._closing.wait(server.hang_s)
                    self.close_connection = True
                    return None
                if fault == "close":
                    self.close_connection = True
                    return None  # nothing written: the client sees the connection closed
                raise AssertionError(fault)

        return Handler
