"""The OpenAI-compatible path against a real llama.cpp server on 127.0.0.1 (tiny model)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tests.integration.conftest import EXAMPLE, run_json

pytestmark = pytest.mark.integration


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] not installed")
    from nemori_cli.config import load_presets
    from nemori_cli.modelfiles import gguf_path

    cache = tmp_path_factory.mktemp("srv-cache")
    model = gguf_path(load_presets().llms["tiny"], cache)
    port = _free_port()
    log = tmp_path_factory.mktemp("srv") / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(model),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                "4096",
                "--model_alias",
                "tiny-served",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(base + "/models", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    pytest.fail(f"llama.cpp server did not start: {log.read_text()[-2000:]}")
                time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_ingest_and_ask_through_the_server(server, tmp_path):
    presets = tmp_path / "models.toml"
    presets.write_text(f'[llm.served]\nkind = "openai"\nbase_url = "{server}"\nmodel = "tiny-served"\napi_key_env = "NEMORI_TEST_KEY"\n')
    env = {"NEMORI_MODELS_FILE": str(presets), "NEMORI_MODEL": "served", "NEMORI_TEST_KEY": "sk-test-not-stored"}
    db = tmp_path / "served.db"
    out = run_json("ingest", str(EXAMPLE), "--db", str(db), env=env)
    assert out["pending"] == 0 and out["episodes"] >= 3
    stats = run_json("stats", "--db", str(db), env=env)
    narration = next(s for s in stats["stages"] if s["stage"] == "narration")
    assert narration["calls"] >= 3 and narration["completion_tokens"] > 0
    answer = run_json("ask", "Where did Sam move?", "--db", str(db), env=env)
    assert answer["answer"] and answer["model"].startswith("served")
    # keys are never written to disk
    assert b"sk-test-not-stored" not in db.read_bytes()
