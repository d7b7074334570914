"""`nemori mcp`: serve the memory to an agent over MCP (stdio); the server is mcp_server/server.py."""

from __future__ import annotations

from typing import Annotated

import typer

from nemori_cli.cli import options as opt
from nemori_cli.cli.help import examples

EXAMPLES = examples("nemori mcp --db ~/notes.db --user alice", "nemori mcp --any-user")


def mcp_cmd(
    any_user: Annotated[
        bool, typer.Option("--any-user", help="Let a tool call name any user (default: only --user's memory is reachable).")
    ] = False,
    db_path: opt.Db = None,
    user: opt.User = None,
    model: opt.Model = None,
    answer_model: Annotated[
        str | None,
        typer.Option("--answer-model", metavar="NAME", help="The model that answers `ask` (default: as `nemori ask`).", show_default=False),
    ] = None,
    embedder: opt.EmbedderName = None,
) -> None:
    """Serve this memory to an agent over MCP, on stdin/stdout.

    The Model Context Protocol's tools: remember, recall, ask and forget.
    """
    from nemori_cli.mcp_server.server import serve

    settings = opt.settings(db_path, user, model, embedder)  # bad settings fail here, as one line, before the server starts
    # A --db that can never work (a directory, another application's SQLite file) is refused now, not at
    # the agent's first tool call; a missing file is fine: the first `remember` creates it.
    settings.store.refuse_unservable()
    serve(
        settings.store.spec,
        settings.user,
        any_user=any_user,
        model=model,
        embedder=embedder,
        answer_model=answer_model,
    )
