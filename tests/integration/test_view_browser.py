"""`nemori view` in a real headless Chromium: the page draws every episode, and a hostile message is shown as text.

Chromium comes from Debian's `chromium` package (`make test` installs it where
apt can). Without it this test skips, saying so, except under CI (CI=true),
where it fails: the browser's coverage must not vanish from a green run.
"""

from __future__ import annotations

import html
import os
import shutil
import subprocess
import threading

import pytest

from nemori_cli import deps
from nemori_cli.cli import options as opt
from nemori_cli.cli.view_cmd import ViewData, serve
from tests.unit.fake_ingest import conversation, isolate, nemori, use_fakes, write_jsonl

HOSTILE = "<script>document.title='owned'</script><b>bold?</b>"


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: CI must run the browser test of nemori view (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


def _dom(browser: str, url: str) -> str:
    run = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=8000", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


def test_the_page_draws_every_episode_and_shows_a_hostile_message_as_text(tmp_path, monkeypatch):
    browser = _chromium()
    isolate(monkeypatch, tmp_path)
    use_fakes(monkeypatch)
    db = tmp_path / "m.db"
    rows = conversation()
    rows[-1] = {**rows[-1], "content": HOSTILE}
    assert nemori("ingest", write_jsonl(tmp_path / "a.jsonl", rows), "--db", db).exit_code == 0
    session = deps.session(opt.settings(str(db), None))
    episodes = session.db.query("SELECT id FROM episodes WHERE status = 'active' ORDER BY id")
    holder = session.db.scalar("SELECT episode_id FROM messages WHERE content = ?", (HOSTILE,))
    server = serve(ViewData(session.db, session.settings.user))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        dom = _dom(browser, base)
        assert dom.count('class="episode"') == len(episodes) >= 2
        assert f"{len(episodes)} episodes" in dom
        opened = _dom(browser, f"{base}#E{holder}")
        assert html.escape(HOSTILE, quote=False) in opened  # drawn as text: its markup escaped in the DOM
        assert "<b>bold?</b>" not in opened and "<title>nemori view</title>" in opened  # never parsed, never run
    finally:
        server.shutdown()
        server.server_close()
        session.db.close()
