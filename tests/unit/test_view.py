"""`nemori view`: a real server on 127.0.0.1 over a real SQLite file, read-only and scoped to its user."""

from __future__ import annotations

import json

from tests.conftest import REPO
from tests.support.view import HOSTILE, get


def test_the_page_and_its_data_are_served_on_the_loopback_only(served):
    base, store, _, _ = served
    assert base.startswith("http://127.0.0.1:")
    status, headers, body = get(base + "/")
    assert status == 200 and b"app.js" in body
    assert "script-src 'self'" in headers["Content-Security-Policy"]  # no inline script can run
    for name in ("/app.js", "/app.css"):
        assert get(base + name)[0] == 200
    summary = json.loads(get(base + "/api/summary")[2])
    assert summary["user"] == "alice" and summary["counts"]["episodes"] >= 1
    episodes = json.loads(get(base + "/api/episodes")[2])["episodes"]
    assert len(episodes) == summary["counts"]["episodes"]


def test_an_episode_carries_its_messages_and_a_hostile_one_is_data_not_markup(served):
    base, *_ = served
    episodes = json.loads(get(base + "/api/episodes")[2])["episodes"]
    contents = [m["content"] for e in episodes for m in json.loads(get(f"{base}/api/episode/{e['id']}")[2])["messages"]]
    assert HOSTILE in contents
    script = (REPO / "nemori_cli" / "cli" / "view_static" / "app.js").read_text()
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script and "document.write" not in script


def test_another_users_data_is_refused(served):
    base, store, _, _ = served
    status, _, body = get(base + "/api/episodes?user=bob")
    assert status == 403 and "alice only" in json.loads(body)["error"]
    bob_episode = store.scalar("SELECT min(id) AS id FROM episodes WHERE user_id = 'bob'")
    status, _, body = get(f"{base}/api/episode/{bob_episode}")
    assert status == 404 and "for user alice" in json.loads(body)["error"]


def test_nothing_can_write_and_the_file_is_unchanged(served):
    base, _, db, before = served
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert get(base + "/api/episodes", method)[0] == 405
    assert get(base + "/api/nothing")[0] == 404
    assert db.read_bytes() == before


def test_as_of_shows_what_was_known_then(served):
    base, *_ = served
    everything = json.loads(get(base + "/api/episodes")[2])["episodes"]
    first_day = everything[0]["end"][:10]
    then = json.loads(get(f"{base}/api/episodes?as_of={first_day}")[2])["episodes"]
    assert 1 <= len(then) < len(everything)
    status, _, body = get(base + "/api/episodes?as_of=yesterday-ish")
    assert status == 400 and json.loads(body)["error"]
