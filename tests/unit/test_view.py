"""`nemori view`: a real server on 127.0.0.1 over a real SQLite file, read-only and scoped to its user."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request

import pytest

from nemori_cli import deps
from nemori_cli.cli import options as opt
from nemori_cli.cli.view_cmd import ViewData, serve
from tests.conftest import REPO
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


def _get(url: str, method: str = "GET") -> tuple[int, dict, bytes]:
    request = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def test_the_page_and_its_data_are_served_on_the_loopback_only(served):
    base, store, _, _ = served
    assert base.startswith("http://127.0.0.1:")
    status, headers, body = _get(base + "/")
    assert status == 200 and b"app.js" in body
    assert "script-src 'self'" in headers["Content-Security-Policy"]  # no inline script can run
    for name in ("/app.js", "/app.css"):
        assert _get(base + name)[0] == 200
    summary = json.loads(_get(base + "/api/summary")[2])
    assert summary["user"] == "alice" and summary["counts"]["episodes"] >= 1
    episodes = json.loads(_get(base + "/api/episodes")[2])["episodes"]
    assert len(episodes) == summary["counts"]["episodes"]


def test_an_episode_carries_its_messages_and_a_hostile_one_is_data_not_markup(served):
    base, *_ = served
    episodes = json.loads(_get(base + "/api/episodes")[2])["episodes"]
    contents = [m["content"] for e in episodes for m in json.loads(_get(f"{base}/api/episode/{e['id']}")[2])["messages"]]
    assert HOSTILE in contents
    script = (REPO / "nemori_cli" / "cli" / "view_static" / "app.js").read_text()
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script and "document.write" not in script


def test_another_users_data_is_refused(served):
    base, store, _, _ = served
    status, _, body = _get(base + "/api/episodes?user=bob")
    assert status == 403 and "alice only" in json.loads(body)["error"]
    bob_episode = store.scalar("SELECT min(id) AS id FROM episodes WHERE user_id = 'bob'")
    status, _, body = _get(f"{base}/api/episode/{bob_episode}")
    assert status == 404 and "for user alice" in json.loads(body)["error"]


def test_nothing_can_write_and_the_file_is_unchanged(served):
    base, _, db, before = served
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert _get(base + "/api/episodes", method)[0] == 405
    assert _get(base + "/api/nothing")[0] == 404
    assert db.read_bytes() == before


def test_as_of_shows_what_was_known_then(served):
    base, *_ = served
    everything = json.loads(_get(base + "/api/episodes")[2])["episodes"]
    first_day = everything[0]["end"][:10]
    then = json.loads(_get(f"{base}/api/episodes?as_of={first_day}")[2])["episodes"]
    assert 1 <= len(then) < len(everything)
    status, _, body = _get(base + "/api/episodes?as_of=yesterday-ish")
    assert status == 400 and json.loads(body)["error"]
