"""The options `ingest`, `build` and `flush` share: --max-tokens and --neighbours, and the budget's check."""

from __future__ import annotations

from typing import Annotated

import typer

from nemori_cli.errors import ConfigError

MaxTokens = Annotated[
    int | None,
    typer.Option(
        "--max-tokens",
        metavar="N",
        help="Stop once the model has used about N tokens in this run; the rest stays pending and a rerun resumes.",
        show_default=False,
    ),
]


Neighbours = Annotated[
    int,
    typer.Option(
        "--neighbours",
        min=1,
        max=50,
        metavar="N",
        help="A-MEM modes: nearest notes offered to the model when a note is linked and evolved.",
    ),
]


def check_budget(max_tokens: int | None) -> None:
    if max_tokens is not None and max_tokens <= 0:
        raise ConfigError(f"--max-tokens must be a positive number of tokens, not {max_tokens}")
