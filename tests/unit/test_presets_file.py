"""A presets file (NEMORI_MODELS_FILE, ~/.config/nemori/models.toml) and `models install` misused (issue 42, defects 8 to 13).

Each bad file is one ConfigError line naming the file, the key and what was
expected, before any of it is used; `parts` never leave the package they
name; `packages` never reach pip as options.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nemori_cli import model_install
from nemori_cli.config import load_presets
from nemori_cli.errors import ConfigError, ModelNotInstalled
from nemori_cli.modelfiles import find_in_site_packages
from tests.conftest import REPO
from tests.unit.fake_ingest import isolate, nemori

SHA = "a" * 64
GGUF = '[llm.m]\nkind = "gguf"\npath = "/x.gguf"\n'


def _load(tmp_path, monkeypatch, text: str | bytes):
    path = tmp_path / "models.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    monkeypatch.setenv("NEMORI_MODELS_FILE", str(path))
    return load_presets()


# What the campaign tried (defects 8 and 9), and the line each gets: the file, the key, what was expected.
REFUSED = [
    ('llm = "hello"\n', "llm: expected a table, not 'hello'"),
    ('[llm]\nx = "y"\n', "[llm.x]: expected a table, not 'y'"),
    (GGUF + 'n_ctx = "big"\n', "[llm.m] n_ctx: expected a whole number, not 'big'"),
    (GGUF + "n_ctx = -5\n", "[llm.m] n_ctx: expected a number above 0, not -5"),
    (GGUF + "n_ctx = true\n", "[llm.m] n_ctx: expected a whole number, not True"),
    (f'[llm.m]\nkind = "gguf"\nparts = "abc"\nsha256 = "{SHA}"\n', "[llm.m] parts: expected a list, not 'abc'"),
    ("default_llm = 7\n", "default_llm: expected a string, not 7"),
    (
        'default_llm = "ghost"\n',
        "default_llm: expected the name of an [llm.NAME] preset (base, local-server, openai, small, tiny) or a path to a .gguf file, not 'ghost'",
    ),
    ('default_embedder = "ghost"\n', "default_embedder: expected the name of an [embedder.NAME] preset (minilm), not 'ghost'"),
    ('default_answer_llm = "ghost"\n', "default_answer_llm: expected the name of an [llm.NAME] preset"),
    (GGUF + "n_cxt = 8192\n", "[llm.m] n_cxt: not a key nemori knows (a typo?)"),
    ("colour = 1\n", "colour: not a key nemori knows (a typo?)"),
    ('[llm."../../x"]\nkind = "gguf"\npath = "/x.gguf"\n', "[llm] preset name: expected a preset name of letters, digits"),
    ('[llm.m]\nkind = "gguf"\n', "[llm.m]: expected 'path' (a GGUF file) or 'parts' for kind 'gguf'"),
    ('[llm.m]\nkind = "gguf"\nparts = ["a/1", "a/2"]\n', "[llm.m]: expected a 'sha256' for a model made of several parts"),
    (GGUF + 'sha256 = "abc"\n', "[llm.m] sha256: expected 64 hexadecimal digits, not 'abc'"),
    ('[llm.m]\nkind = "openai"\nbase_url = "ftp://x"\nmodel = "m"\n', "[llm.m] base_url: expected an http:// or https:// URL"),
    ('[llm.m]\nkind = "openai"\nbase_url = "http://x"\nmodel = "m"\ntimeout = 0\n', "[llm.m] timeout: expected a number above 0, not 0"),
    ('[llm.m]\nkind = "openai"\nbase_url = "http://x"\nmodel = "m"\napi_key = "sk-1"\n', "[llm.m]: has 'api_key': keys never go in files"),
    ('[llm.m]\nkind = "openai"\nbase_url = "http://x"\nmodel = "m"\napi_key_env = "MY KEY"\n', "[llm.m] api_key_env: expected the NAME"),
    ('[llm.m]\nkind = "llama"\n', "[llm.m] kind: expected one of 'gguf' or 'openai', not 'llama'"),
    ('[embedder.e]\nkind = "sentence-transformers"\ndimensions = "x"\n', "[embedder.e] dimensions: expected a whole number, not 'x'"),
    (
        '[embedder.e]\nkind = "sentence-transformers"\nname = "e"\nevoke_threshold = 2\n',
        "[embedder.e] evoke_threshold: expected a number at most 1",
    ),
]


@pytest.mark.parametrize(("text", "said"), REFUSED)
def test_a_bad_presets_file_is_one_line_naming_file_key_and_what_was_expected(tmp_path, monkeypatch, text, said):
    with pytest.raises(ConfigError) as refused:
        _load(tmp_path, monkeypatch, text)
    line = refused.value.message
    assert line.startswith(f"{tmp_path / 'models.toml'}: {said}"), line
    assert "\n" not in line


def test_a_file_that_is_not_utf8_is_said_to_be_so(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match=r"models.toml: not UTF-8 text \(byte 0\); save it as UTF-8$"):
        _load(tmp_path, monkeypatch, b"\xff\xfe[\x00l\x00l\x00m\x00]")


def test_parts_that_climb_out_of_their_package_are_refused_before_any_is_read(tmp_path, monkeypatch):
    for part in ("../../../../../../../../etc/passwd", "/etc/passwd", "pkg/../../etc/passwd", "passwd", "pkg\\..\\x"):
        text = f'[llm.m]\nkind = "gguf"\nparts = ["{part}"]\n'.replace("\\", "\\\\")
        with pytest.raises(ConfigError, match=r"\[llm.m\] parts\[0\]: expected a file inside the package that carries it"):
            _load(tmp_path, monkeypatch, text)


def test_a_part_is_found_only_inside_the_package_it_names(tmp_path, monkeypatch):
    entry = tmp_path / "site"
    (entry / "pkg").mkdir(parents=True)
    (entry / "pkg" / "model.bin").write_bytes(b"weights")
    (entry / "secret").write_bytes(b"not the package's")
    (entry / "pkg" / "link.bin").symlink_to(entry / "secret")
    monkeypatch.setattr(sys, "path", [str(entry)])
    assert find_in_site_packages("pkg/model.bin") == entry / "pkg" / "model.bin"
    assert find_in_site_packages("pkg/link.bin") is None  # a link out of the package
    assert find_in_site_packages("pkg/../secret") is None
    assert find_in_site_packages(str(entry / "secret")) is None


def test_packages_are_requirement_strings_never_pip_options(tmp_path, monkeypatch):
    text = f'[llm.m]\nkind = "gguf"\nparts = ["p/x"]\npackages = ["--index-url=http://127.0.0.1:9/simple", "x"]\nsha256 = "{SHA}"\n'
    with pytest.raises(
        ConfigError, match=r"\[llm.m\] packages\[0\]: expected a requirement string .* not '--index-url=http://127.0.0.1:9/simple'"
    ):
        _load(tmp_path, monkeypatch, text)
    accepted = _load(
        tmp_path, monkeypatch, text.replace('"--index-url=http://127.0.0.1:9/simple", ', '"pkg==1.0", "other @ file:///tmp/o.whl", ')
    )
    assert accepted.llms["m"].packages == ("pkg==1.0", "other @ file:///tmp/o.whl", "x")


def test_the_installer_never_hands_pip_an_option(monkeypatch):
    ran = []
    monkeypatch.setattr(model_install.subprocess, "run", lambda *a, **k: ran.append(a))
    missing = ModelNotInstalled("x", role="model", preset="m", packages=("ok==1", "-r/etc/passwd"), download_mb=1)
    with pytest.raises(ConfigError, match=r"not a requirement string, so not given to pip: '-r/etc/passwd'"):
        model_install.install(missing, say=lambda line: None)
    assert ran == []


@pytest.mark.parametrize("name", ["", "/nonexistent/x.gguf", "foo.gguf", "../../etc/passwd", "ghost"])
def test_models_install_installs_only_a_preset_it_is_named(tmp_path, monkeypatch, name):
    isolate(monkeypatch, tmp_path)
    ran = []
    monkeypatch.setattr(model_install.subprocess, "run", lambda *a, **k: ran.append(a))
    run = nemori("models", "install", name)
    assert isinstance(run.exception, ConfigError) and run.exception.exit_code == 2, run.output
    assert run.exception.message.startswith(f"models install: no model preset {name!r} (presets: base, local-server")
    embedder = nemori("models", "install", "--embedder", name)
    assert isinstance(embedder.exception, ConfigError) and "no embedder preset" in embedder.exception.message
    assert ran == []


@pytest.mark.parametrize(
    ("target", "what"), [("folder", "is a folder"), ("/dev/null", "is a character device"), ("/dev/zero", "is a character device")]
)
def test_a_presets_path_that_is_no_file_is_named_for_what_it_is(tmp_path, monkeypatch, target, what):
    path = str(tmp_path) if target == "folder" else target
    monkeypatch.setenv("NEMORI_MODELS_FILE", path)
    with pytest.raises(ConfigError) as refused:
        load_presets()
    assert refused.value.message == f"NEMORI_MODELS_FILE={path}: {what}, not a presets file (models.toml)"


def test_the_default_presets_path_taken_by_a_folder_is_refused_too(tmp_path, monkeypatch):
    isolate(monkeypatch, tmp_path)
    (tmp_path / "config" / "nemori" / "models.toml").mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"models.toml: is a folder, not a presets file"):
        load_presets()


def test_the_command_line_gets_one_line_and_exit_2(tmp_path):
    presets = tmp_path / "models.toml"
    presets.write_text('[llm]\nx = "y"\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEMORI_")}
    run = subprocess.run(
        [sys.executable, "-m", "nemori_cli", "models", "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**env, "NEMORI_MODELS_FILE": str(presets)},
        timeout=120,
    )
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.splitlines() == [f"nemori: error: {presets}: [llm.x]: expected a table, not 'y'"]


def test_the_built_in_presets_pass_their_own_check():
    presets = load_presets()
    assert {"tiny", "small", "base"} <= set(presets.llms) and presets.default_llm == "small"
    assert presets.llms["small"].n_ctx == 8192 and len(presets.llms["small"].parts) == 6


def test_flash_attention_is_off_unless_a_preset_turns_it_on(tmp_path, monkeypatch):
    assert _load(tmp_path, monkeypatch, GGUF).llms["m"].flash_attn is False
    assert _load(tmp_path, monkeypatch, GGUF + "flash_attn = true\n").llms["m"].flash_attn is True
    with pytest.raises(ConfigError, match=r"\[llm.m\] flash_attn"):
        _load(tmp_path, monkeypatch, GGUF + 'flash_attn = "yes"\n')
