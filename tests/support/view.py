"""`nemori view` served for the tests: a fake-built memory of two users on a real server on 127.0.0.1, and a GET.

``served`` is a fixture, registered for every test module by tests/conftest.py.
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request

import pytest

from nemori_cli import deps
from nemori_cli.cli import options as opt
from nemori_cli.cli.view_cmd import ViewData, serve
from tests.unit.fake_ingest import conversation, isolate, nemori, use_fakes, write_jsonl

HOSTILE = "<script>document.title='owned'</script><img src=x onerror=alert(1)>"


@pytest.fixture
def served(tmp_path, monkeypatch):
    """A memory of two users made with the fakes (alice's last message hostile), served for alice."""
    isolate(monkeypatch, tmp_path)
    use_fakes(monkeypatch)
    db = tmp_path / "m.db"
    rows = conversation()
    rows[-1] = {**rows[-1], "content": HOSTILE}
    assert nemori("ingest", write_jsonl(tmp_path / "a.jsonl", rows), "--db", db, "--user", "alice").exit_code == 0
    assert nemori("ingest", write_jsonl(tmp_path / "b.jsonl", conversation()), "--db", db, "--user", "bob").exit_code == 0
    session = deps.session(opt.settings(str(db), "alice"))
    before = db.read_bytes()
    server = serve(ViewData(session.db, "alice"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", session.db, db, before
    server.shutdown()
    server.server_close()
    session.db.close()


def get(url: str, method: str = "GET") -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()
