"""`nemori models`: the presets and whether each is usable now."""

from __future__ import annotations

from typing import TypedDict

from nemori_cli.cli import options as opt
from nemori_cli.cli.render import console, print_json


class _Row(TypedDict):
    role: str
    name: str
    kind: str
    default: bool
    usable: bool
    detail: str
    description: str
    packages: list[str]


def models_cmd(json_out: opt.Json = False) -> None:
    """List LLM and embedder presets, and whether each is usable now."""
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
    out.print("[dim]* default. Presets from: " + ", ".join(presets.sources) + "[/dim]")
