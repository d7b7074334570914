"""`nemori view` misused (issue 42): a rebound name, an idle client, ids past 64 bits, the file overwritten, a busy port.

A real server on 127.0.0.1 over a real SQLite file (the ``served`` fixture of
tests/support/view.py), spoken to with raw sockets where a client library would
correct what is sent.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO
from tests.support.view import get


def _raw(base: str, request: bytes, timeout: float = 10) -> tuple[int, dict]:
    """Send ``request`` as is; the status and the JSON body of the answer."""
    port = int(base.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)


def _port(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


def test_a_rebound_host_or_another_sites_page_is_refused(served):
    base, *_ = served
    port = _port(base)
    for host in (b"attacker.example", f"attacker.example:{port}".encode(), b"127.0.0.1", f"127.0.0.1:{port + 1}".encode()):
        status, body = _raw(base, b"GET /api/summary HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n")
        assert status == 403 and "only requests to http://127.0.0.1:" in body["error"], host
    # no Host at all (HTTP/1.0 allows it; no browser omits it), and two of them
    assert _raw(base, b"GET /api/summary HTTP/1.0\r\n\r\n")[0] == 403
    two = f"GET /api/summary HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nHost: attacker.example\r\nConnection: close\r\n\r\n"
    assert _raw(base, two.encode())[0] == 403
    # the right name, but asked by another site's page
    other = f"GET /api/summary HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nOrigin: http://attacker.example\r\nConnection: close\r\n\r\n"
    status, body = _raw(base, other.encode())
    assert status == 403 and body["error"] == "this view answers only its own page"
    # its own page, by either loopback name, is answered
    for host in (f"127.0.0.1:{port}", f"localhost:{port}"):
        own = f"GET /api/summary HTTP/1.1\r\nHost: {host}\r\nOrigin: http://{host}\r\nConnection: close\r\n\r\n"
        status, body = _raw(base, own.encode())
        assert status == 200 and body["user"] == "alice"


def test_an_idle_connection_does_not_stall_the_others(served):
    base, *_ = served
    idle = [socket.create_connection(("127.0.0.1", _port(base)), timeout=30) for _ in range(3)]
    try:
        for s in idle:
            s.sendall(b"GET / HTTP/1.0\r\n")  # and nothing more
        started = time.monotonic()
        for _ in range(5):
            assert get(base + "/api/summary")[0] == 200
        assert time.monotonic() - started < 5
    finally:
        for s in idle:
            s.close()


def test_an_idle_connection_is_dropped_after_a_timeout(served, monkeypatch):
    from nemori_cli.cli import view_server

    monkeypatch.setattr(view_server.GuardedHandler, "timeout", 0.5)
    base, *_ = served
    with socket.create_connection(("127.0.0.1", _port(base)), timeout=10) as s:
        s.sendall(b"GET / HTTP/1.0\r\n")
        assert s.recv(100) == b""  # closed by the server, no answer to half a request


@pytest.mark.parametrize("digits", ["9" * 20, "9" * 5000, str(2**63)])
def test_an_id_past_64_bits_is_a_json_refusal(served, digits):
    base, *_ = served
    for kind in ("episode", "fact"):
        status, headers, body = get(f"{base}/api/{kind}/{digits}")
        assert status == 400 and headers["Content-Type"].startswith("application/json")
        assert json.loads(body)["error"].startswith("not an id: 9")


def test_the_largest_id_is_not_found_not_refused(served):
    base, *_ = served
    status, _, body = get(f"{base}/api/episode/{2**63 - 1}")
    assert status == 404 and "for user alice" in json.loads(body)["error"]


def test_the_database_overwritten_while_served_is_a_json_answer(served):
    base, _, db, _ = served
    size = db.stat().st_size
    with open(db, "r+b") as f:  # in place, as `cp other.db m.db` does
        f.write(os.urandom(size))
    for path in ("/api/summary", "/api/episodes", "/api/facts", "/api/episode/1", "/api/fact/1"):
        status, headers, body = get(base + path)
        assert status == 503 and headers["Content-Type"].startswith("application/json"), (path, status, body)
        assert "the database cannot be read now" in json.loads(body)["error"]
    assert get(base + "/")[0] == 200  # the page itself still loads, to show the line


def test_a_busy_port_is_one_line_and_exit_2(served):
    base, _, db, _ = served
    clean = {k: v for k, v in os.environ.items() if not k.startswith("NEMORI_")}
    run = subprocess.run(
        [sys.executable, "-m", "nemori_cli", "view", "--no-open", "--port", str(_port(base)), "--db", str(db), "--user", "alice"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=clean,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 2, run.stderr
    assert run.stderr.splitlines() == [
        f"nemori: error: cannot listen on 127.0.0.1:{_port(base)} (Address already in use); give another --port, or --port 0 for a free one"
    ]
