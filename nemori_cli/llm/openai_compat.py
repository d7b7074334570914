"""Any OpenAI-compatible endpoint (llama.cpp server, Ollama, vLLM, LM Studio, OpenAI).

Servers disagree on structured output: OpenAI takes
``{"type": "json_schema", "json_schema": {...}}``, llama-cpp-python's server
rejects that and takes ``{"type": "json_object", "schema": {...}}``, others
take only ``{"type": "json_object"}``. We try them in that order, remember per
endpoint what worked, and validate the answer either way.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from nemori_cli.errors import ModelError
from nemori_cli.llm.base import ChatMessages, RawCompletion

_FORMATS = ("json_schema", "json_object+schema", "json_object")
_working_format: dict[str, str] = {}  # base_url -> the format that endpoint accepted


def _response_format(kind: str, schema: dict) -> dict:
    if kind == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": schema.get("title", "answer"), "schema": schema}}
    if kind == "json_object+schema":
        return {"type": "json_object", "schema": schema}
    return {"type": "json_object"}


class OpenAICompatBackend:
    def __init__(self, *, name: str, base_url: str, model: str, api_key: str | None = None, timeout: float = 300.0):
        self.model_id = f"{name} ({model})"
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout = timeout

    def _post(self, path: str, body: dict | None) -> dict:
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base_url + path, data=data, headers=headers, method="POST" if body is not None else "GET")
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            return json.loads(response.read().decode("utf-8"))

    def check_reachable(self) -> None:
        """Fail early, before anything is written, when the endpoint is down."""
        try:
            self._post("/models", None)
        except urllib.error.HTTPError as e:
            if e.code in (401, 403):
                raise ModelError(f"endpoint {self.base_url}: HTTP {e.code}, the API key was refused") from None
            # Some servers have no /models; they answered, so they are reachable.
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise ModelError(f"endpoint {self.base_url} unreachable ({reason})") from None

    def chat(self, messages: ChatMessages, *, schema: dict, max_tokens: int, temperature: float) -> RawCompletion:
        known = _working_format.get(self.base_url)
        formats = (known,) if known else _FORMATS
        last_error = ""
        for kind in formats:
            body = {
                "model": self.model,
                "messages": messages,
                "max_tokens": max_tokens,
                "temperature": temperature,
                "response_format": _response_format(kind, schema),
            }
            try:
                out = self._post("/chat/completions", body)
            except urllib.error.HTTPError as e:
                detail = e.read().decode("utf-8", "replace")[:200]
                if e.code in (400, 422, 500) and not known:
                    last_error = f"HTTP {e.code}: {detail}"
                    continue  # this server does not take this response_format; try the next
                raise ModelError(f"endpoint {self.base_url}: HTTP {e.code} ({detail})") from None
            except (urllib.error.URLError, OSError) as e:
                raise ModelError(f"endpoint {self.base_url} unreachable ({getattr(e, 'reason', e)})") from None
            _working_format[self.base_url] = kind
            usage = out.get("usage") or {}
            text = (out.get("choices") or [{}])[0].get("message", {}).get("content") or ""
            return RawCompletion(text, int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0))
        raise ModelError(f"endpoint {self.base_url}: no structured-output format accepted ({last_error})")
