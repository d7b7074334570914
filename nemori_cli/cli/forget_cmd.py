"""`nemori forget ...`: delete an episode, a fact, a note, or a whole user, for good.

A whole user is forgotten by `forget user NAME --yes`, a spelling of its own:
everywhere else `--user` says whose memory a command works on, and a person
who adds `--user alice` out of habit to `forget fact 3` must not be one flag
away from losing all of alice's memory. The old spelling (`forget --user NAME
--yes`) is refused with a line that names the new one.

Forgetting never builds the LLM (nothing is re-summarised) and never
creates a database. The embedder is built only when a forgotten A-MEM note
had evolved other notes: undoing that re-embeds them. Every form deletes in one
transaction, then scrubs what was deleted out of the file (store/forget.py).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from nemori_cli.cli import options as opt
from nemori_cli.cli.help import App, examples
from nemori_cli.cli.render import console, print_json
from nemori_cli.config import Settings
from nemori_cli.errors import ConfigError, NemoriError, StoreError

if TYPE_CHECKING:  # the API is imported when a command runs, not when the CLI starts
    from nemori_cli.api import ForgetKind

forget_app = App(
    help="Delete memory for good.\n\nAn episode, a fact, a note, or a whole user; then the file is scrubbed.",
    invoke_without_command=True,
    no_args_is_help=True,
    epilog=examples(
        "nemori forget episode 12", "nemori forget fact 3 --user alice", "nemori forget user alice --yes", "nemori forget --scrub"
    ),
)


def _summary(counts: dict[str, int]) -> str:
    """`episodes: 1, messages: 4, ...`; index tables mirror their rows, so only --json shows them."""
    shown = [f"{kind.replace('_', ' ')}: {n}" for kind, n in counts.items() if n and not kind.endswith(("_fts", "_vec"))]
    return ", ".join(shown) or "nothing"


def _say(line: str) -> None:
    console().print(line, soft_wrap=True, markup=False)  # one line, however narrow the terminal


def _run(db_path: str | None, user: str | None, what: ForgetKind | Literal["user"], item_id: int | None) -> tuple[Settings, dict[str, int]]:
    """Forget through the Python API (api.Memory.forget: one transaction, then the file scrubbed; VACUUM for a whole user)."""
    from nemori_cli.api import Memory

    with Memory.from_settings(opt.settings(db_path, user)) as memory:
        counts = memory.forget(what, item_id)
    return memory.settings, counts


_LETTER = {"episode": "E", "fact": "F", "note": "N"}  # as `inspect` names them: E3, F2, N7


def _forget(db_path: str | None, user: str | None, json_out: bool, what: ForgetKind | Literal["user"], item_id: int | None = None) -> None:
    """Forget one item (`forget episode 3`), or the whole user when no id is given; report as JSON or one line."""
    whole_user = item_id is None
    settings, counts = _run(db_path, user, what, item_id)
    if json_out:
        print_json({"user": settings.user, **({} if whole_user else {what: item_id}), "counts": counts})
        return
    target = f"user {settings.user}" if whole_user else f"{_LETTER[what]}{item_id} of user {settings.user}"
    _say(f"forgot {target}: {_summary(counts)}")


Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before forgetting a whole user.")]


@forget_app.callback()
def forget_cmd(
    ctx: typer.Context,
    user: Annotated[
        str | None,
        typer.Option("--user", "-u", metavar="NAME", help="Whose episode, fact or note (env NEMORI_USER).", show_default=False),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", hidden=True)] = False,  # only to name `forget user NAME --yes` to the old spelling
    scrub: Annotated[
        bool,
        typer.Option(
            "--scrub", help="Only scrub the file: fold the log in and VACUUM, so that what was forgotten is gone from the disk too."
        ),
    ] = False,
    db_path: opt.Db = None,
    json_out: opt.Json = False,
) -> None:
    """Delete memory for good, as if it never happened."""
    if ctx.invoked_subcommand is not None:
        # `forget --user bob episode 3` means bob's episode 3, not NEMORI_USER's.
        ctx.obj = {"user": user, "db": db_path, "json": json_out}
        return
    if scrub:
        _scrub(db_path, json_out)
        return
    if user:
        raise ConfigError(
            f"forgetting a whole user is spelled `nemori forget user {user} --yes`; --user only says whose episode, fact or note"
        )
    raise ConfigError("say what to forget: `forget episode ID`, `forget fact ID`, `forget note ID` or `forget user NAME --yes`")


@forget_app.command("user", epilog=examples("nemori forget user alice --yes", "nemori forget user alice --db team.db --json"))
def user_cmd(
    ctx: typer.Context,
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="The user to forget; named here, never taken from NEMORI_USER.", show_default=False)
    ],
    yes: Yes = False,
    db_path: opt.Db = None,
    json_out: opt.Json = False,
) -> None:
    """Forget everything of one user: every table, index and free page.

    Asks first on a terminal; elsewhere --yes is required.
    """
    db_path, other, json_out = _inherited(ctx, db_path, None, json_out)
    if other is not None and other != name:
        raise ConfigError(f"--user {other} and `forget user {name}` name two users: give the one to forget once, as `forget user NAME`")
    if not yes and not _interactive():
        raise ConfigError(f"refusing to forget user {name} without --yes")
    if not yes:
        _confirm(db_path, name)
    _forget(db_path, name, json_out, "user")


def _scrub(db_path: str | None, json_out: bool) -> None:
    from nemori_cli.services import forget

    settings = opt.settings(db_path, None)
    if not forget.scrub(settings):
        raise StoreError(f"another process is reading {settings.store_name}; scrub again once it has closed")
    if json_out:
        print_json({"scrubbed": settings.store_name})
        return
    _say(f"scrubbed {settings.store_name}")


def _interactive() -> bool:
    return sys.stdin.isatty()


def _confirm(db_path: str | None, user: str) -> None:
    from nemori_cli.services import forget

    settings = opt.settings(db_path, user)
    has = forget.stored(settings)
    question = f"Forget everything of user {settings.user} ({_summary(has)}) in {settings.store_name}? This cannot be undone"
    if not typer.confirm(question, default=False):
        raise NemoriError("not confirmed; nothing was forgotten")


def _inherited(ctx: typer.Context, db_path: str | None, user: str | None, json_out: bool) -> tuple[str | None, str | None, bool]:
    """Options given before the subcommand (`forget --user bob fact 3`) count too."""
    parent = ctx.obj or {}
    return db_path or parent.get("db"), user or parent.get("user"), json_out or bool(parent.get("json"))


@forget_app.command("episode", epilog=examples("nemori forget episode 12", "nemori forget episode 12 --user alice --json"))
def episode_cmd(
    ctx: typer.Context,
    episode_id: Annotated[int, typer.Argument(metavar="ID", help="Episode id: 12 for E12 (see `inspect episodes`).", max=opt.MAX_ID)],
    db_path: opt.Db = None,
    user: opt.User = None,
    json_out: opt.Json = False,
) -> None:
    """Forget an episode and all that came only from it.

    Its merged parts, its messages, the facts only it gave, and later
    summaries.
    """
    _forget(*_inherited(ctx, db_path, user, json_out), "episode", episode_id)


@forget_app.command("fact", epilog=examples("nemori forget fact 3"))
def fact_cmd(
    ctx: typer.Context,
    fact_id: Annotated[int, typer.Argument(metavar="ID", help="Fact id: 3 for F3 (see `inspect facts --all`).", max=opt.MAX_ID)],
    db_path: opt.Db = None,
    user: opt.User = None,
    json_out: opt.Json = False,
) -> None:
    """Forget a fact and every fact it superseded."""
    _forget(*_inherited(ctx, db_path, user, json_out), "fact", fact_id)


@forget_app.command("note", epilog=examples("nemori forget note 7 --db amem.db"))
def note_cmd(
    ctx: typer.Context,
    note_id: Annotated[int, typer.Argument(metavar="ID", help="Note id: 7 for N7 (see `inspect notes`).", max=opt.MAX_ID)],
    db_path: opt.Db = None,
    user: opt.User = None,
    json_out: opt.Json = False,
) -> None:
    """Forget an A-MEM note; what it evolved is undone.

    Its links both ways, its history and the message it was made from go
    with it.
    """
    _forget(*_inherited(ctx, db_path, user, json_out), "note", note_id)
