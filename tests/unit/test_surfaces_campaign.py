"""The fault campaign over the surfaces added since issue 35 (issue 42): generated hostile view requests and presets files.

Seeded, so a failure replays. The view: >= 100 raw requests mixing methods,
paths, ids, queries, Host and Origin headers and HTTP versions, sent to a real
server on 127.0.0.1 over a real SQLite file, plus an idle connection held
throughout; every answer is JSON (or the page), and nothing is printed as a
traceback. The presets: >= 50 generated hostile files; each loads, or is one
ConfigError line that starts with the file's path, and nothing else escapes.
`pytest -q tests/unit/test_surfaces_campaign.py -s` prints the tallies
(docs/RELIABILITY.md).
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
import time
from collections import Counter

import pytest

from nemori_cli.config import load_presets
from nemori_cli.errors import ConfigError

SEED = 42
VIEW_REQUESTS = 120
PRESET_FILES = 60


def _hostile_request(rng: random.Random, port: int) -> bytes:
    method = rng.choice(["GET", "GET", "GET", "POST", "HEAD", "DELETE", "OPTIONS", "FOO", "G\x00T", ""])
    digits = "".join(rng.choice("0123456789") for _ in range(rng.choice([1, 19, 20, 400, 5000])))
    path = rng.choice(
        [
            "/",
            "/api/summary",
            "/api/episodes?as_of=" + rng.choice(["yesterday-ish", "9999-99-99", "%ff%fe", "2024-01-01", "\u00e9"]),
            f"/api/episode/{digits}",
            f"/api/fact/{digits}",
            "/api/fact/-1",
            "/api/episode/1?user=bob",
            "/api/summary?user=%00",
            "/../../../../etc/passwd",
            "//[::1/api/summary",
            "/api/%2e%2e/%2e%2e/etc/passwd",
            "/" + "a" * rng.choice([10, 70_000]),
            f"http://127.0.0.1:{port}/api/summary",
        ]
    )
    version = rng.choice(["HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/9", "FTP/1.0", ""])
    host = rng.choice([f"127.0.0.1:{port}", f"localhost:{port}", "attacker.example", f"attacker.example:{port}", None, "127.0.0.1"])
    origin = rng.choice([None, None, f"http://127.0.0.1:{port}", "http://attacker.example", "null"])
    well_formed = rng.random() < 0.5  # half reach the handlers: a hostile id, date or path in a request that passes the guard
    if well_formed:
        method, version, host, origin = "GET", "HTTP/1.1", f"127.0.0.1:{port}", rng.choice([None, f"http://127.0.0.1:{port}"])
    lines = [f"{method} {path} {version}".strip()]
    if host is not None:
        lines.append(f"Host: {host}")
    if origin is not None:
        lines.append(f"Origin: {origin}")
    if not well_formed and rng.random() < 0.1:
        lines.append("X-Long: " + "x" * 70_000)  # a header longer than http.server reads
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8", "surrogateescape")


def _answer(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=15) as s:
        with contextlib.suppress(OSError):  # the server closed a request it refused before reading all of it
            s.sendall(request)
        answer = b""
        try:
            while chunk := s.recv(65536):
                answer += chunk
        except ConnectionResetError:
            pass
    return answer


def test_generated_hostile_view_requests_get_json_and_no_traceback(served, capfd):
    base, *_ = served
    port = int(base.rsplit(":", 1)[1])
    rng = random.Random(SEED)
    idle = socket.create_connection(("127.0.0.1", port), timeout=30)
    idle.sendall(b"GET / HTTP/1.0\r\n")  # held open, half a request, all through
    statuses: Counter[int] = Counter()
    try:
        for _ in range(VIEW_REQUESTS):
            request = _hostile_request(rng, port)
            answer = _answer(port, request)
            assert answer, request[:200]
            head, _, body = answer.partition(b"\r\n\r\n")
            if not head.startswith(b"HTTP/"):  # HTTP/0.9 (two words): the body alone, as that version has it
                head, body = b"HTTP/0.9 000", answer
            status = int(head.split(b" ", 2)[1])
            statuses[status] += 1
            if b"Content-Type: text/" in head:
                assert status == 200
            elif body:
                payload = json.loads(body)
                assert isinstance(payload, dict) and ("error" in payload) == (status >= 400 or status == 0), (request[:200], answer[:300])
        assert json.loads(_answer(port, f"GET /api/summary HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()).partition(b"\r\n\r\n")[2])
    finally:
        idle.close()  # the server then reads the end of that request, and answers nobody
    time.sleep(0.5)
    err = capfd.readouterr().err
    assert "Traceback" not in err, err[-3000:]
    print(
        f"\nview campaign: {VIEW_REQUESTS} requests + 1 idle connection, seed {SEED}: statuses {dict(sorted(statuses.items()))}, 0 tracebacks"
    )


def _hostile_preset(rng: random.Random) -> bytes:
    values = [
        '"big"',
        "-5",
        "0",
        "true",
        "7",
        '"abc"',
        "[]",
        "[1, 2]",
        '["../../../../etc/passwd"]',
        '["/etc/passwd"]',
        "{}",
        "1e309",
        '""',
    ]
    keys = [
        "kind",
        "path",
        "parts",
        "packages",
        "n_ctx",
        "sha256",
        "timeout",
        "base_url",
        "model",
        "api_key",
        "api_key_env",
        "partition",
        "nope",
    ]
    choice = rng.randrange(10)
    if choice == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))  # not UTF-8, not TOML
    if choice == 1:
        return rng.choice([b"", b"[llm", b'llm = "hello"', b'[llm]\nx = "y"', b"default_llm = 7", b'default_llm = "ghost"', b"[[llm]]"])
    if choice == 2:
        return b"# " + b"x" * (1 << 20) + b"\n"  # larger than a presets file
    if choice == 3:
        options = ['"--index-url=http://127.0.0.1:9/simple"', '"-r/etc/passwd"', '"x; rm -rf /"', '"/tmp/x.whl"', '"ok==1"']
        return f'[llm.m]\nkind = "gguf"\nparts = ["p/x"]\npackages = [{rng.choice(options)}]\n'.encode()
    name = rng.choice(["m", '"../../evil"', '"a b"', "ok", '""'])
    section = rng.choice(["llm", "embedder"])
    kind = '"gguf"' if section == "llm" else '"sentence-transformers"'
    kinds = [kind, kind, '"x"', "7"]
    body = f"[{section}.{name}]\nkind = {rng.choice(kinds)}\n"
    for key in rng.sample(keys, rng.randrange(1, 5)):
        body += f"{key} = {rng.choice(values)}\n"
    return body.encode()


def test_generated_hostile_presets_files_are_one_line_each(tmp_path, monkeypatch):
    rng = random.Random(SEED)
    outcomes: Counter[str] = Counter()
    for i in range(PRESET_FILES):
        path = tmp_path / f"models-{i}.toml"
        path.write_bytes(_hostile_preset(rng))
        monkeypatch.setenv("NEMORI_MODELS_FILE", str(path))
        try:
            load_presets()
            outcomes["loaded"] += 1
        except ConfigError as e:
            assert e.message.startswith(f"{path}: ") and "\n" not in e.message, e.message
            outcomes["one line"] += 1
    for special in ("/dev/null", "/dev/zero", str(tmp_path)):
        monkeypatch.setenv("NEMORI_MODELS_FILE", special)
        with pytest.raises(ConfigError, match=f"^NEMORI_MODELS_FILE={special}: is a"):
            load_presets()
        outcomes["special file"] += 1
    assert outcomes["one line"] >= 50
    print(f"\npresets campaign: {PRESET_FILES} generated files + 3 special paths, seed {SEED}: {dict(outcomes)}, 0 tracebacks")
