"""Options every command shares, and the settings they resolve to."""

from __future__ import annotations

from typing import Annotated

import typer

from nemori_cli.config import MAX_PARALLEL, MAX_WORKERS, Settings
from nemori_cli.domain import MAX_ID as MAX_ID  # the commands read it as opt.MAX_ID

Db = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="PATH",
        help="SQLite file, or a postgresql://user@host/db URL (env NEMORI_DB; default: a file in your data directory).",
        show_default=False,
    ),
]
User = Annotated[
    str | None, typer.Option("--user", "-u", metavar="NAME", help="Whose memory (env NEMORI_USER; default 'default').", show_default=False)
]
Model = Annotated[
    str | None,
    typer.Option(
        "--model", "-m", metavar="NAME", help="LLM preset from `nemori models`, or a .gguf path (env NEMORI_MODEL).", show_default=False
    ),
]
EmbedderName = Annotated[
    str | None, typer.Option("--embedder", metavar="NAME", help="Embedder preset (env NEMORI_EMBEDDER).", show_default=False)
]
Json = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
ShowProgress = Annotated[
    bool | None,
    typer.Option("--progress/--quiet", help="Progress bar with ETA on stderr (default: only on a terminal).", show_default=False),
]
AsOf = Annotated[
    str | None,
    typer.Option(
        "--as-of",
        metavar="DATE",
        help="Memory as it stood at this point of the conversation: an ISO date (the end of that day) or date-time; "
        "a time without a zone is UTC.",
        show_default=False,
    ),
]
Parallel = Annotated[
    int | None,
    typer.Option(
        "--parallel",
        min=1,
        max=MAX_PARALLEL,
        metavar="N",
        help="Generations at once (env NEMORI_PARALLEL; default 1): a window's narrations decoded together by llama.cpp, "
        "or requests in flight to an endpoint with parallel slots.",
        show_default=False,
    ),
]
Workers = Annotated[
    int | None,
    typer.Option(
        "--workers",
        min=1,
        max=MAX_WORKERS,
        metavar="N",
        help="Requests in flight to an OpenAI-compatible endpoint (env NEMORI_WORKERS; default 1); the episodes are those "
        "1 makes. A local GGUF model takes 1 (see --parallel).",
        show_default=False,
    ),
]
Window = Annotated[int, typer.Option(min=2, max=200, metavar="N", help="Messages the model cuts into episodes at a time.")]


def settings(db_path: str | None, user: str | None, model: str | None = None, embedder: str | None = None) -> Settings:
    return Settings.from_env(db=db_path, user=user, model=model, embedder=embedder)


def as_of(value: str | None):
    """The --as-of value as a datetime (None without one); a bad value is one ConfigError line, exit 2."""
    from nemori_cli.dates import parse_as_of

    return None if value is None else parse_as_of(value)
