"""config.py as the one reader of the environment, and the modules it hands values to."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest

from nemori_cli import config, deps
from nemori_cli.config import Settings
from nemori_cli.errors import ConfigError
from nemori_cli.presets import LLMPreset
from nemori_cli.store.engines import parse_target


@pytest.mark.parametrize(("value", "enabled"), [(None, True), ("1", True), ("", True), ("0", False)])
def test_prefix_cache_setting_follows_nemori_prefix_cache(monkeypatch, value, enabled):
    if value is None:
        monkeypatch.delenv("NEMORI_PREFIX_CACHE", raising=False)
    else:
        monkeypatch.setenv("NEMORI_PREFIX_CACHE", value)
    assert Settings.from_env(db="x.db").prefix_cache is enabled


@pytest.mark.parametrize("value", ["many", "abc", "0", "-2", "1.5"])
def test_a_bad_thread_count_is_a_config_error_naming_the_variable(monkeypatch, value):
    from nemori_cli.errors import ConfigError

    monkeypatch.setenv("NEMORI_THREADS", value)
    with pytest.raises(ConfigError, match="NEMORI_THREADS"):
        Settings.from_env(db="x.db")


@pytest.mark.parametrize(("value", "threads"), [("4", 4), (" 2 ", 2), ("", None)])
def test_a_thread_count_is_read(monkeypatch, value, threads):
    monkeypatch.setenv("NEMORI_THREADS", value)
    assert Settings.from_env(db="x.db").threads == threads


@pytest.mark.parametrize(("flag", "env"), [("", None), (None, ""), ("   ", None), (None, " ")])
def test_an_empty_user_is_refused_not_read_as_default(monkeypatch, flag, env):
    from nemori_cli.errors import ConfigError

    if env is None:
        monkeypatch.delenv("NEMORI_USER", raising=False)
    else:
        monkeypatch.setenv("NEMORI_USER", env)
    with pytest.raises(ConfigError, match="must not be empty"):
        Settings.from_env(db="x.db", user=flag)


def test_the_user_is_default_only_when_given_nowhere(monkeypatch):
    monkeypatch.delenv("NEMORI_USER", raising=False)
    assert Settings.from_env(db="x.db").user == "default"
    monkeypatch.setenv("NEMORI_USER", "alice")
    assert Settings.from_env(db="x.db").user == "alice"
    assert Settings.from_env(db="x.db", user="bob").user == "bob"


def test_deps_hands_the_llama_backend_its_settings(monkeypatch, tmp_path):
    from nemori_cli.llm import llamacpp

    made: list[dict] = []

    class Recorder:
        def __init__(self, path, **kw):
            made.append({"path": path, **kw})

    monkeypatch.setattr(llamacpp, "LlamaCppBackend", Recorder)
    monkeypatch.setattr(deps, "gguf_path", lambda preset, cache: Path("/models/x.gguf"))
    monkeypatch.setattr(deps, "_backends", {})
    settings = Settings(
        store=parse_target(tmp_path / "m.db"), user="u", model=None, embedder=None, threads=3, prefix_cache=False, parallel=4, lookup=5
    )
    deps.build_backend(LLMPreset(name="x", kind="gguf", path="/models/x.gguf", n_ctx=2048, flash_attn=True), settings)
    assert made == [
        {
            "path": Path("/models/x.gguf"),
            "name": "x",
            "n_ctx": 2048,
            "n_threads": 3,
            "prefix_cache": False,
            "parallel": 4,
            "lookup": 5,
            "flash_attn": True,
        }
    ]


@pytest.mark.parametrize("value, expected", [(None, None), ("", None), ("off", None), ("OFF", None), ("0", 0), ("4", 4), ("16", 16)])
def test_nemori_lookup_is_off_or_a_number_of_guessed_tokens(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv("NEMORI_LOOKUP", raising=False)
    else:
        monkeypatch.setenv("NEMORI_LOOKUP", value)
    assert Settings.from_env(db="/tmp/x.db").lookup == expected


@pytest.mark.parametrize("value", ["17", "-1", "yes", "1.5"])
def test_nemori_lookup_refuses_anything_else_in_one_line(monkeypatch, value):
    monkeypatch.setenv("NEMORI_LOOKUP", value)
    with pytest.raises(ConfigError, match=r"NEMORI_LOOKUP=.*off, or a whole number from 0 to 16"):
        Settings.from_env(db="/tmp/x.db")


def test_a_preset_names_its_partition_method_and_nothing_else(tmp_path, monkeypatch):
    from nemori_cli.config import load_presets

    assert load_presets().llms["small"].partition == "similarity"
    assert load_presets().llms["base"].partition == "model"  # the paper's way unless a preset says otherwise
    bad = tmp_path / "models.toml"
    bad.write_text('[llm.mine]\nkind = "gguf"\npath = "/x.gguf"\npartition = "topics"\n')
    monkeypatch.setenv("NEMORI_MODELS_FILE", str(bad))
    with pytest.raises(ConfigError, match=r"models.toml: \[llm.mine\] partition: expected one of 'model' or 'similarity', not 'topics'$"):
        load_presets()


@pytest.mark.parametrize("value", ["0", "17", "four", "-2"])
def test_nemori_parallel_must_be_a_whole_number_from_1_to_16(monkeypatch, value):
    monkeypatch.setenv("NEMORI_PARALLEL", value)
    with pytest.raises(ConfigError, match="NEMORI_PARALLEL"):
        Settings.from_env(db="/tmp/x.db", user="u")


def test_nemori_parallel_is_read_and_defaults_to_one(monkeypatch):
    monkeypatch.delenv("NEMORI_PARALLEL", raising=False)
    assert Settings.from_env(db="/tmp/x.db", user="u").parallel == 1
    monkeypatch.setenv("NEMORI_PARALLEL", "4")
    assert Settings.from_env(db="/tmp/x.db", user="u").parallel == 4


def test_api_key_is_set_counts_an_empty_value_as_set(monkeypatch):
    monkeypatch.delenv("NEMORI_TEST_KEY", raising=False)
    assert not config.api_key_is_set("NEMORI_TEST_KEY")
    monkeypatch.setenv("NEMORI_TEST_KEY", "")
    assert config.api_key_is_set("NEMORI_TEST_KEY")


def test_a_missing_key_is_reported_without_a_network_call(monkeypatch, tmp_path):
    from nemori_cli.doctor import checks
    from nemori_cli.modelfiles import llm_availability

    monkeypatch.delenv("NEMORI_TEST_KEY", raising=False)
    remote = LLMPreset(name="r", kind="openai", base_url="https://api.example.invalid/v1", model="m", api_key_env="NEMORI_TEST_KEY")
    assert llm_availability(remote, tmp_path) == (False, "$NEMORI_TEST_KEY is not set")
    check = checks.endpoint(remote)
    assert not check.ok and check.detail == "https://api.example.invalid/v1: $NEMORI_TEST_KEY is not set"
    assert check.advice == "export NEMORI_TEST_KEY=... (the key is never written to disk)"
    local = LLMPreset(name="l", kind="openai", base_url="http://127.0.0.1:9/v1", model="m", api_key_env="NEMORI_TEST_KEY")
    assert llm_availability(local, tmp_path)[0]


def test_env_defaults_to_set_never_overrides_the_user(monkeypatch):
    monkeypatch.setenv("NEMORI_TEST_SET", "mine")
    monkeypatch.delenv("NEMORI_TEST_UNSET", raising=False)
    wanted = {"NEMORI_TEST_SET": "1", "NEMORI_TEST_UNSET": "1"}
    assert config.env_defaults_to_set(wanted) == {"NEMORI_TEST_UNSET": "1"}


def test_the_embedder_sets_only_what_the_user_left_unset(monkeypatch):
    from nemori_cli.embed import sentence
    from nemori_cli.errors import ModelError

    for name in sentence._LIBRARY_ENV:
        monkeypatch.setenv(name, "x")  # recorded, so that the test's writes are undone after it
        monkeypatch.delenv(name)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")  # the user's own choice

    def refuse(path, device):
        raise OSError("no model here")

    # Stand-ins for the libraries: nothing heavy is imported and no model is loaded.
    fakes = {
        "sentence_transformers": types.SimpleNamespace(SentenceTransformer=refuse),
        "transformers": types.ModuleType("transformers"),
        "transformers.utils": types.SimpleNamespace(logging=types.SimpleNamespace(disable_progress_bar=lambda: None)),
    }
    for name, module in fakes.items():
        monkeypatch.setitem(sys.modules, name, module)
    with pytest.raises(ModelError, match="cannot load /nowhere"):
        sentence.SentenceTransformerEmbedder("/nowhere", model_name="m")
    assert os.environ["HF_HUB_OFFLINE"] == "0"
    assert {name: os.environ[name] for name in sentence._LIBRARY_ENV if name != "HF_HUB_OFFLINE"} == {
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "TRANSFORMERS_VERBOSITY": "error",
        "TOKENIZERS_PARALLELISM": "false",
    }
