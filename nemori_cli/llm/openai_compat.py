"""Any OpenAI-compatible endpoint (llama.cpp server, Ollama, vLLM, LM Studio, OpenAI).

Servers disagree on structured output: OpenAI takes
``{"type": "json_schema", "json_schema": {...}}``, llama-cpp-python's server
rejects that and takes ``{"type": "json_object", "schema": {...}}``, others
take only ``{"type": "json_object"}``. We try them in that order, remember per
endpoint what worked, and validate the answer either way.

Every fault of an endpoint ends as one of two errors:

- **ModelError** (the command stops, exit 3, with the work left pending): the
  endpoint is unusable. Refused or unreachable, no answer within the
  timeout, HTTP 401/403 (the key) or 404 (the path or the model), still
  HTTP 429/5xx or dropping the connection after the retries.
- **LLMOutputError** (StructuredLLM counts a failed attempt, the stage falls
  back): this one answer is unusable. A body that is empty, not JSON or not
  shaped like a chat completion, a refusal, a request turned down with HTTP
  400/422, a prompt over the model's context (``ContextOverflow``, never
  asked again).

Transient failures (HTTP 429/500/502/503/504, a reset or closed connection, a
timeout) are retried with a short exponential backoff (tenacity), honouring
Retry-After up to a few seconds: at most ``retries`` times, and a refused
connection or a timeout at most once, so a dead endpoint is reported in about
half a second and a hung one after two read timeouts (``timeout`` in the
preset, 120 s by default; the connection itself gets ``connect_timeout``).
"""

from __future__ import annotations

import http.client
import json
import re
import urllib.error
import urllib.request

from tenacity import RetryCallState, Retrying, retry_if_exception

from nemori_cli.errors import LLMOutputError, ModelError
from nemori_cli.llm.base import ChatMessages, ChatRequest, ContextOverflow, RawCompletion

_FORMATS = ("json_schema", "json_object+schema", "json_object")
_working_format: dict[str, str] = {}  # base_url -> the format that endpoint accepted

TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
MAX_WAIT_S = 8.0  # the longest pause between two attempts, Retry-After included
PROBE_TIMEOUT_S = 15.0  # GET /models is cheap: a server that takes longer is not answering
# How servers word a prompt over the context: llama.cpp ("exceeds the available context size"),
# llama-cpp-python ("exceed context window"), OpenAI and vLLM ("maximum context length"), others.
_CONTEXT = re.compile(
    r"context[ _-]?(length|size|window)|maximum context|exceeds? (the )?(available )?context|too many tokens|prompt is too long|n_ctx",
    re.IGNORECASE,
)


def _response_format(kind: str, schema: dict) -> dict:
    if kind == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": schema.get("title", "answer"), "schema": schema}}
    if kind == "json_object+schema":
        return {"type": "json_object", "schema": schema}
    return {"type": "json_object"}


class _Failure(Exception):
    """One HTTP exchange that went wrong, before it is sorted into a ModelError or an LLMOutputError.

    kind: refused | timeout | reset (closed, reset or cut short) | unreachable | http (a status code).
    """

    def __init__(self, kind: str, detail: str, *, status: int = 0, payload: bytes = b"", retry_after: float | None = None):
        super().__init__(detail)
        self.kind, self.detail, self.status, self.payload, self.retry_after = kind, detail, status, payload, retry_after
        self.attempts = 1


def _one_line(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _parse(payload: bytes):
    """The body as JSON, or None when it is empty or not JSON."""
    try:
        return json.loads(payload.decode("utf-8", "replace"))
    except ValueError:
        return None


def _describe(payload: bytes) -> str:
    """What a body that is not the expected JSON is, in a few words, for an error line."""
    text = payload.decode("utf-8", "replace")
    if not text.strip():
        return "an empty body"
    if _parse(payload) is None:
        start = text.lstrip()[:1]
        kind = "HTML" if start == "<" else "malformed or truncated JSON" if start in "{[" else "text that is not JSON"
        return f"{kind} ({_one_line(text, 80)!r})"
    return f"JSON of another shape ({_one_line(text, 80)!r})"


def _error_text(payload: bytes) -> str:
    """An error body's message: OpenAI's {"error": {"message": ...}}, a plain {"error": "..."}, or the text itself."""
    body = _parse(payload)
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body.get("message")))
        if isinstance(error, dict):
            error = error.get("message") or error
        if error:
            return _one_line(error if isinstance(error, str) else json.dumps(error))
    text = payload.decode("utf-8", "replace")
    return _one_line(text) if text.strip() else "no body"


def _retry_after(headers) -> float | None:
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: the backoff decides


def _os_failure(reason: object) -> _Failure:
    if isinstance(reason, ConnectionRefusedError):
        return _Failure("refused", "connection refused")
    if isinstance(reason, TimeoutError):
        return _Failure("timeout", "no connection")
    if isinstance(reason, ConnectionError):
        return _Failure("reset", f"connection closed ({type(reason).__name__})")
    return _Failure("unreachable", _one_line(str(getattr(reason, "strerror", None) or reason)))


def _tokens(value: object) -> int:
    try:
        return max(0, int(value))  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return 0


class _ConnectTimeout:
    """A urllib handler mixin: the connection gets ``connect_s``, every read after it the request's own timeout."""

    connect_s = 5.0

    def do_open(self, http_class, req, **kwargs):
        connect_s = self.connect_s

        class Connection(http_class):
            def connect(self):
                read_s, self.timeout = self.timeout, connect_s
                try:
                    super().connect()
                finally:
                    self.timeout = read_s
                self.sock.settimeout(read_s)

        return super().do_open(Connection, req, **kwargs)


class _HTTPHandler(_ConnectTimeout, urllib.request.HTTPHandler):
    pass


class _HTTPSHandler(_ConnectTimeout, urllib.request.HTTPSHandler):
    pass


class OpenAICompatBackend:
    def __init__(
        self,
        *,
        name: str,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout: float = 120.0,
        connect_timeout: float = 5.0,
        retries: int = 2,
        backoff: float = 0.5,
        parallel: int = 1,
    ):
        self.model_id = f"{name} ({model})"
        self.parallel = max(1, parallel)  # requests chat_many keeps in flight at once
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout = timeout  # seconds for one answer (each read of it)
        self.retries = retries  # extra attempts at a transient failure (a refused connection and a timeout: one at most)
        self.backoff = backoff  # seconds before the first retry, doubled for each further one
        http_handler, https_handler = _HTTPHandler(), _HTTPSHandler()
        http_handler.connect_s = https_handler.connect_s = min(connect_timeout, timeout)
        self._opener = urllib.request.build_opener(http_handler, https_handler)

    # -- one exchange, and the retries around it -------------------------
    def _exchange(self, path: str, body: dict | None, timeout: float) -> bytes:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base_url + path, data=data, headers=headers, method="POST" if body is not None else "GET")
        try:
            with self._opener.open(request, timeout=timeout) as response:
                return response.read()
        except urllib.error.HTTPError as e:
            try:
                payload = e.read()
            except (OSError, http.client.HTTPException):
                payload = b""
            raise _Failure("http", _error_text(payload), status=e.code, payload=payload, retry_after=_retry_after(e.headers)) from None
        except urllib.error.URLError as e:
            raise _os_failure(e.reason) from None
        except TimeoutError:
            raise _Failure("timeout", "no answer") from None
        except (ConnectionError, http.client.HTTPException) as e:  # closed before, or in the middle of, the answer
            raise _Failure("reset", f"connection closed ({type(e).__name__})") from None
        except OSError as e:
            raise _os_failure(e) from None

    def _request(
        self, path: str, body: dict | None, *, timeout: float | None = None, retry_500: bool = True, retry_timeout: bool = True
    ) -> bytes:
        """The body of a 2xx answer; a _Failure (with its attempts) once the retries are spent or the fault is not transient."""
        transient = TRANSIENT_STATUS if retry_500 else TRANSIENT_STATUS - {500}
        attempts = 0

        def retryable(error: BaseException) -> bool:
            if not isinstance(error, _Failure):
                return False
            if error.kind == "http":
                return error.status in transient and not _CONTEXT.search(error.detail)  # asking again cannot shorten a prompt
            return error.kind in ("refused", "reset") or (error.kind == "timeout" and retry_timeout)

        def stop(state: RetryCallState) -> bool:
            error = state.outcome.exception() if state.outcome else None
            limit = 2 if isinstance(error, _Failure) and error.kind in ("refused", "timeout") else 1 + self.retries
            return state.attempt_number >= limit

        def wait(state: RetryCallState) -> float:
            error = state.outcome.exception() if state.outcome else None
            pause = self.backoff * 2 ** (state.attempt_number - 1)
            if isinstance(error, _Failure) and error.retry_after is not None:
                pause = max(pause, error.retry_after)
            return min(pause, MAX_WAIT_S)

        def once() -> bytes:
            nonlocal attempts
            attempts += 1
            return self._exchange(path, body, timeout or self.timeout)

        try:
            return Retrying(retry=retry_if_exception(retryable), stop=stop, wait=wait, reraise=True)(once)
        except _Failure as failure:
            failure.attempts = attempts
            raise

    def _unusable(self, failure: _Failure, path: str, timeout: float | None = None) -> ModelError:
        """A failure that leaves the endpoint unusable, as one line."""
        url, tries = self.base_url, f"{failure.attempts} attempt{'s' if failure.attempts != 1 else ''}"
        if failure.kind == "refused":
            return ModelError(f"endpoint {url} unreachable (connection refused, {tries}); is the server running?")
        if failure.kind == "unreachable":
            return ModelError(f"endpoint {url} unreachable ({failure.detail})")
        if failure.kind == "timeout":
            if failure.detail == "no connection":
                return ModelError(f"endpoint {url} unreachable (no connection within the connect timeout, {tries})")
            hint = (
                "a server that is up lists its models at once"
                if path == "/models"
                else "if the server is only slow, raise `timeout` in its preset"
            )
            return ModelError(f"endpoint {url}: no answer to {path} within {timeout or self.timeout:g} s ({tries}); {hint}")
        if failure.kind == "reset":
            return ModelError(f"endpoint {url}: {failure.detail} without a whole answer to {path} ({tries})")
        if failure.status in (401, 403):
            return ModelError(f"endpoint {url}: HTTP {failure.status}, the API key was refused")
        if failure.status == 404:
            return ModelError(
                f"endpoint {url}: HTTP 404 on {path} ({failure.detail}); check base_url (it usually ends in /v1) and the model {self.model!r}"
            )
        return ModelError(f"endpoint {url}: HTTP {failure.status} on {path} after {tries} ({failure.detail})")

    # -- before anything is written --------------------------------------
    def check_reachable(self) -> None:
        """Fail early, before anything is written, unless the endpoint is up and speaks the OpenAI API.

        GET /models answering a model list proves it. Some servers have no
        /models, so anything else there is followed by the smallest chat
        completion (one token): a completion proves it, and so does a JSON
        error for a request it understood but turned down (HTTP 400/422).
        HTTP 404 (or HTML, or any other body) on both is not such an endpoint.
        """
        probe_s = min(self.timeout, PROBE_TIMEOUT_S)
        try:
            payload = self._request("/models", None, timeout=probe_s, retry_timeout=False)
            listed = _parse(payload)
            if isinstance(listed, dict) and isinstance(listed.get("data", listed.get("models")), list):
                return
            models = f"answered {_describe(payload)}"
        except _Failure as failure:
            if failure.kind != "http" or failure.status in (401, 403):
                raise self._unusable(failure, "/models", probe_s) from None
            models = f"HTTP {failure.status}"
        probe = {"model": self.model, "messages": [{"role": "user", "content": "Say OK."}], "max_tokens": 1, "temperature": 0}
        try:
            payload = self._request("/chat/completions", probe, retry_timeout=False)
        except _Failure as failure:
            if failure.kind == "http" and failure.status in (400, 422) and isinstance(_parse(failure.payload), dict):
                return  # it read the request as the API does; the real calls will say what it wants
            if failure.kind != "http" or failure.status in (401, 403) or failure.status in TRANSIENT_STATUS:
                raise self._unusable(failure, "/chat/completions") from None
            answered = f"HTTP {failure.status} ({failure.detail})"
        else:
            out = _parse(payload)
            if isinstance(out, dict) and isinstance(out.get("choices"), list):
                return
            answered = f"answered {_describe(payload)}"
        raise ModelError(
            f"endpoint {self.base_url} is not an OpenAI-compatible endpoint (/models: {models}; /chat/completions: {answered}); "
            "check base_url, which usually ends in /v1"
        )

    # -- one answer ------------------------------------------------------
    def chat(self, messages: ChatMessages, *, schema: dict, max_tokens: int, temperature: float) -> RawCompletion:
        known = _working_format.get(self.base_url)
        formats = (known,) if known else _FORMATS
        rejected: list[str] = []
        for kind in formats:
            body = {
                "model": self.model,
                "messages": messages,
                "max_tokens": max_tokens,
                "temperature": temperature,
                "response_format": _response_format(kind, schema),
            }
            try:
                # While the format is unknown, an HTTP 500 may be this server refusing it (llama-cpp-python does): try the next.
                payload = self._request("/chat/completions", body, retry_500=bool(known))
            except _Failure as failure:
                if failure.kind == "http" and failure.status in (400, 413, 422, 500) and _CONTEXT.search(failure.detail):
                    raise ContextOverflow(
                        f"endpoint {self.base_url}: the prompt is longer than the model's context (HTTP {failure.status}: {failure.detail})"
                    ) from None
                if failure.kind == "http" and failure.status in (400, 422, 500) and not known:
                    rejected.append(f"HTTP {failure.status}: {failure.detail}")
                    continue  # this server does not take this response_format; try the next
                if failure.kind == "http" and failure.status in (400, 413, 422):
                    raise LLMOutputError(
                        f"endpoint {self.base_url} turned this request down (HTTP {failure.status}: {failure.detail})"
                    ) from None
                raise self._unusable(failure, "/chat/completions") from None
            completion = self._completion(payload)
            _working_format[self.base_url] = kind
            return completion
        raise ModelError(f"endpoint {self.base_url}: no structured-output format accepted ({len(rejected)} tried; last {rejected[-1]})")

    @property
    def exact_many(self) -> bool:
        """Whether chat_many sends several at once (``parallel`` above 1), each answer the one chat gives alone (StructuredLLM.complete_together)."""
        return self.parallel > 1

    def chat_many(self, requests: list[ChatRequest]) -> list[RawCompletion | LLMOutputError]:
        """Each request's completion, ``parallel`` requests in flight at once (a server with parallel slots batches them).

        One request's unusable answer is its LLMOutputError; an endpoint that
        is unusable (a ModelError) stops them all, once those in flight are back.
        """
        if self.parallel == 1 or len(requests) < 2:
            return [self._one(r) for r in requests]
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=min(self.parallel, len(requests)), thread_name_prefix="nemori-llm")
        futures = [pool.submit(self._one, r) for r in requests]
        try:
            results = [f.result() for f in futures]  # in order; the first ModelError is raised here
        except BaseException:
            # A dead endpoint or Ctrl-C: the requests not yet sent are dropped, not sent one by one to their timeouts.
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
        return results

    def _one(self, r: ChatRequest) -> RawCompletion | LLMOutputError:
        try:
            return self.chat(r.messages, schema=r.schema, max_tokens=r.max_tokens, temperature=r.temperature)
        except LLMOutputError as e:
            return e

    def _completion(self, payload: bytes) -> RawCompletion:
        """A 2xx body read as a chat completion; anything else is an LLMOutputError naming what came instead."""
        out = _parse(payload)
        where = f"endpoint {self.base_url}"
        if not isinstance(out, dict):
            raise LLMOutputError(
                f"{where} answered {_describe(payload)} instead of a chat completion", raw=payload.decode("utf-8", "replace")[:500]
            )
        if out.get("error") and not out.get("choices"):
            detail = _error_text(payload)
            if _CONTEXT.search(detail):
                raise ContextOverflow(f"{where}: the prompt is longer than the model's context ({detail})")
            raise LLMOutputError(f"{where} answered an error ({detail})")
        choices = out.get("choices")
        message = choices[0].get("message") if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
        if not isinstance(message, dict):
            raise LLMOutputError(f"{where} answered {_describe(payload)}, without choices[0].message")
        content = message.get("content")
        if content is None and message.get("refusal"):
            raise LLMOutputError(f"{where}: the model refused ({_one_line(str(message['refusal']), 100)})")
        if isinstance(content, list):  # content parts: keep the text ones
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if content is not None and not isinstance(content, str):
            raise LLMOutputError(f"{where} answered a message whose content is {type(content).__name__}, not text")
        usage = out.get("usage")
        if not isinstance(usage, dict):
            usage = {}
        return RawCompletion(content or "", _tokens(usage.get("prompt_tokens")), _tokens(usage.get("completion_tokens")))
