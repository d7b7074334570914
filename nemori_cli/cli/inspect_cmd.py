"""`nemori inspect ...` and `nemori stats`: what memory holds and what it cost."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from nemori_cli.cli import options as opt
from nemori_cli.cli.help import App, examples
from nemori_cli.cli.render import change_json, console, episode_json, esc, fact_json, message_json, note_json, print_json, stamp, validity
from nemori_cli.errors import NotFound

inspect_app = App(
    help="Show what memory holds.\n\nEpisodes, facts, messages, A-MEM notes, the running summary.",
    no_args_is_help=True,
    epilog=examples("nemori inspect episodes", "nemori inspect episode 3", "nemori inspect messages --pending"),
)

Limit = Annotated[int | None, typer.Option(min=1, metavar="N", help="Show at most this many.", show_default=False)]


def _open(db_path: str | None, user: str | None):
    """The user's memory, read (services/read.py): the existing database, never created by a read."""
    from nemori_cli.services.read import Reading

    return Reading(opt.settings(db_path, user))


def _memory(db_path: str | None, user: str | None):
    """The user's memory through the Python API (api.Memory), as the lists read it."""
    from nemori_cli.api import Memory

    return Memory.from_settings(opt.settings(db_path, user))


def _show(
    kind: str,
    item_id: int,
    db_path: str | None,
    user: str | None,
    json_out: bool,
    *,
    load: Callable[[Any, str, int], tuple[Any, Any] | None],
    as_json: Callable[[Any, Any], dict],
    as_text: Callable[[Any, Any, Any], None],
) -> None:
    """One stored item by id (`inspect episode 3`), as JSON or as text.

    The per-kind pieces: load(store, user, id) gives (item, what it is shown
    with), or None when the user has no such item; as_json(item, related) is
    the JSON object; as_text(console, item, related) prints it.
    """
    reading = _open(db_path, user)
    found = load(reading.store, reading.user, item_id)
    if found is None:
        raise NotFound(f"no {kind} {item_id} for user {reading.user}")
    item, related = found
    if json_out:
        print_json(as_json(item, related))
        return
    as_text(console(), item, related)


@inspect_app.command("episodes", epilog=examples("nemori inspect episodes", "nemori inspect episodes --all --as-of 2024-03-31"))
def episodes_cmd(
    all_episodes: Annotated[bool, typer.Option("--all", help="Include episodes merged into later ones.")] = False,
    as_of: opt.AsOf = None,
    limit: Limit = None,
    db_path: opt.Db = None,
    user: opt.User = None,
    json_out: opt.Json = False,
) -> None:
    """List episodes in time order.

    With --as-of: those that had ended by then.
    """
    moment = opt.as_of(as_of)
    with _memory(db_path, user) as memory:
        items = memory.episodes(with_messages=True, limit=limit, include_superseded=all_episodes, as_of=moment)
    if json_out:
        print_json({"user": memory.user, "episodes": [episode_json(e) for e in items]})
        return
    out = console()
    for e in items:
        status = f" [dim](merged into E{e.superseded_by})[/dim]" if e.superseded_by else ""
        out.print(f"[bold]E{e.id}[/bold] {stamp(e.start)}  {len(e.messages):>3} msgs  [bold]{esc(e.title)}[/bold]{status}")
    out.print(f"[dim]{len(items)} episodes for user {memory.user}[/dim]")


@inspect_app.command("episode", epilog=examples("nemori inspect episode 3", "nemori inspect episode 3 --json"))
def episode_cmd(
    episode_id: Annotated[int, typer.Argument(metavar="ID", help="Episode id: 3 for E3 (see `inspect episodes`).", max=opt.MAX_ID)],
    db_path: opt.Db = None,
    user: opt.User = None,
    json_out: opt.Json = False,
) -> None:
    """One episode: its narrative and its raw messages with their ids."""
    _show("episode", episode_id, db_path, user, json_out, load=_load_episode, as_json=_episode_as_json, as_text=_episode_as_text)


def _load_episode(store, user: str, episode_id: int):
    """The episode and the parts merged into it."""
    from nemori_cli.services import read

    return read.episode(store, user, episode_id)


def _episode_as_json(e, parts) -> dict:
    return {**episode_json(e), "merged_from": [episode_json(p, with_messages=False) for p in parts]}


def _episode_as_text(out, e, parts) -> None:
    out.print(f"[bold]E{e.id}: {esc(e.title)}[/bold]  ({stamp(e.start)} – {stamp(e.end)}, boundary: {e.boundary})")
    if e.superseded_by:
        out.print(f"[yellow]superseded: {esc(e.superseded_reason)}[/yellow] (its messages now belong to E{e.superseded_by})")
    for p in parts:
        out.print(f"[dim]merged from E{p.id} {stamp(p.start)}: {esc(p.title)}[/dim]")
    out.print(esc(e.narrative), soft_wrap=True)
    out.print()
    for m in e.messages:
        out.print(f"[dim]{'M' + str(m.id):>6}[/dim] {stamp(m.timestamp)} [bold]{esc(m.speaker)}[/bold]: {esc(m.content)}", soft_wrap=True)


@inspect_app.command(
    "facts", epilog=examples("nemori inspect facts", "nemori inspect facts --all", "nemori inspect facts --as-of 2024-03-31")
)
def facts_cmd(
    all_facts: Annotated[bool, typer.Option("--all", help="Include superseded facts.")] = False,
    as_of: opt.AsOf = None,
    limit: Limit = None,
    db_path: opt.Db = None,
    user: opt.User = None,
    json_out: opt.Json = False,
) -> None:
    """List facts with the episodes they came from.

    With --as-of: the facts valid then, superseded since or not.
    """
    moment = opt.as_of(as_of)
    with _memory(db_path, user) as memory:
        items = memory.facts(include_superseded=all_facts, limit=limit, as_of=moment)
    if json_out:
        print_json({"user": memory.user, "as_of": moment.isoformat() if moment else None, "facts": [fact_json(f) for f in items]})
        return
    out = console()
    for f in items:
        sources = ",".join(f"E{e}" for e in f.source_episode_ids)
        status = "" if f.status == "active" else f" [dim]({f.status}{' since' if moment else ''})[/dim]"
        valid = f" [dim]{validity(f)}[/dim]" if moment else ""
        out.print(f"[bold]F{f.id}[/bold] [dim]{sources:>8}[/dim] {esc(f.text)}{status}{valid}", soft_wrap=True)
    when = f" as of {stamp(moment)}" if moment else ""
    out.print(f"[dim]{len(items)} facts for user {memory.user}{when}[/dim]")


@inspect_app.command("fact", epilog=examples("nemori inspect fact 12"))
def fact_cmd(
    fact_id: Annotated[int, typer.Argument(metavar="ID", help="Fact id: 12 for F12 (see `inspect facts`).", max=opt.MAX_ID)],
    db_path: opt.Db = None,
    user: opt.User = None,
    json_out: opt.Json = False,
) -> None:
    """One fact, and why it exists.

    Its text, status, when it was valid in the conversation, its episode,
    what memory predicted of that episode and what the prediction missed.
    """
    from nemori_cli.cli import fact_view

    _show("fact", fact_id, db_path, user, json_out, load=fact_view.load, as_json=fact_view.as_json, as_text=fact_view.as_text)


@inspect_app.command("notes", epilog=examples("nemori inspect notes --db amem.db"))
def notes_cmd(
    limit: Limit = None,
    db_path: opt.Db = None,
    user: opt.User = None,
    json_out: opt.Json = False,
) -> None:
    """List A-MEM notes in time order, with their tags and links."""
    with _memory(db_path, user) as memory:
        items = memory.notes(limit=limit)
    if json_out:
        print_json({"user": memory.user, "notes": [note_json(n) for n in items]})
        return
    out = console()
    for n in items:
        links = ",".join(f"N{i}" for i in n.links) or "-"
        evolved = " [dim](evolved)[/dim]" if n.updated_at else ""
        out.print(
            f"[bold]N{n.id}[/bold] {n.timestamp:%Y-%m-%d} [dim]links {links}; {', '.join(n.tags) or '-'}[/dim] {esc(n.content)}{evolved}",
            soft_wrap=True,
        )
    out.print(f"[dim]{len(items)} notes for user {memory.user}[/dim]")


@inspect_app.command("note", epilog=examples("nemori inspect note 7 --db amem.db"))
def note_cmd(
    note_id: Annotated[int, typer.Argument(metavar="ID", help="Note id: 7 for N7 (see `inspect notes`).", max=opt.MAX_ID)],
    db_path: opt.Db = None,
    user: opt.User = None,
    json_out: opt.Json = False,
) -> None:
    """One A-MEM note: its attributes, links and history.

    The history says what changed, and which new note changed it.
    """
    _show("note", note_id, db_path, user, json_out, load=_load_note, as_json=_note_as_json, as_text=_note_as_text)


def _load_note(store, user: str, note_id: int):
    """The note, the notes it links to, its own history, and the changes its arrival made."""
    from nemori_cli.services import read

    return read.note(store, user, note_id)


def _note_as_json(n, related) -> dict:
    linked, history, caused = related
    return {
        **note_json(n),
        "linked": [note_json(linked[i]) for i in n.links if i in linked],
        "history": [change_json(c) for c in history],
        "evolved": [change_json(c) for c in caused],
    }


def _note_as_text(out, n, related) -> None:
    linked, history, caused = related
    source = f"message {n.message_id}" if n.message_id else f"a fact of E{n.episode_id}" if n.episode_id else "?"
    out.print(f"[bold]N{n.id}[/bold] ({stamp(n.timestamp)}, from {source}, attributes by {n.origin}): {esc(n.content)}", soft_wrap=True)
    out.print(f"  context: {esc(n.context)}", soft_wrap=True)
    out.print(f"  keywords: {esc(', '.join(n.keywords) or '-')}; tags: {esc(', '.join(n.tags) or '-')}")
    for i in n.links:
        if i in linked:
            out.print(f"  linked N{i}: {esc(linked[i].content)}", soft_wrap=True)
    for c in history:
        out.print(
            f"  [yellow]{c.created_at} {c.field} changed by N{c.made_by if c.made_by else '? (forgotten)'}[/yellow]: {esc(c.before)} -> {esc(c.after)}",
            soft_wrap=True,
        )
    for c in caused:
        out.print(f"  [dim]its arrival changed N{c.note_id}'s {c.field}[/dim]")


@inspect_app.command("summary", epilog=examples("nemori inspect summary --history"))
def summary_cmd(
    history: Annotated[bool, typer.Option("--history", help="Every version, oldest first.")] = False,
    db_path: opt.Db = None,
    user: opt.User = None,
    json_out: opt.Json = False,
) -> None:
    """The running summary (memory mode `summary`)."""
    from nemori_cli.services import read

    reading = _open(db_path, user)
    rows = read.summaries(reading.store, reading.user)
    rows = rows if history else rows[-1:]
    if json_out:
        print_json({"user": reading.user, "summaries": rows})
        return
    out = console()
    if not rows:
        out.print("no summary (it is kept only with --memory summary)")
    for r in rows:
        out.print(f"[bold]version {r['id']}[/bold] (after E{r['episode_id']}, {r['created_at']})")
        out.print(esc(r["text"]), soft_wrap=True)


@inspect_app.command("messages", epilog=examples("nemori inspect messages", "nemori inspect messages --pending --limit 20"))
def messages_cmd(
    pending: Annotated[bool, typer.Option("--pending", help="Only messages no episode owns yet.")] = False,
    limit: Limit = None,
    db_path: opt.Db = None,
    user: opt.User = None,
    json_out: opt.Json = False,
) -> None:
    """List stored messages, and which episode owns each."""
    from nemori_cli.services import read

    reading = _open(db_path, user)
    items = read.messages(reading.store, reading.user, pending_only=pending, limit=limit)
    if json_out:
        print_json({"user": reading.user, "messages": [message_json(m) for m in items]})
        return
    out = console()
    for m in items:
        owner = f"E{m.episode_id}" if m.episode_id else "pending"
        out.print(
            f"[dim]{'M' + str(m.id):>6} {owner:>8}[/dim] {stamp(m.timestamp)} [bold]{esc(m.speaker)}[/bold]: {esc(m.content)}",
            soft_wrap=True,
        )
    out.print(f"[dim]{len(items)} messages[/dim]")


STATS_EXAMPLES = examples("nemori stats", "nemori stats --json | jq .built")


def stats_cmd(db_path: opt.Db = None, user: opt.User = None, json_out: opt.Json = False) -> None:
    """What memory holds, how much is built, and what building cost.

    Counts, then per pipeline stage: model calls, tokens, seconds, repairs
    and fallbacks.
    """
    from nemori_cli.services import read

    reading = _open(db_path, user)
    u = reading.user
    found = read.stats(reading)
    info, built = found.info, found.built
    counts, stages = info["counts"], info["stages"]
    if json_out:
        print_json(info)
        return
    out = console()
    out.print(f"{info['db']} (schema {info['schema_version']}, embedder {info['embedder']}), user {u}", soft_wrap=True)
    out.print(_counts_line(counts), soft_wrap=True)
    if built.built_through is not None or built.pending:
        through = f"built through {built.built_through:%Y-%m-%d %H:%M}" if built.built_through else "nothing built yet"
        out.print(f"{through}; {built.line() or 'everything is built'}", markup=False, highlight=False, soft_wrap=True)
    out.print(f"method: {info['profile']}", soft_wrap=True)
    if stages:
        out.print(_stage_table(stages))
    else:
        out.print("no model calls yet")


def _counts_line(counts: dict[str, int]) -> str:
    """The counters in words: '16 messages (16 not built yet), 4 episodes (1 merged into later ones), 3 facts (1 superseded)'.

    A part this memory has none of is left out (notes outside A-MEM), but for messages, episodes and facts.
    """

    def said(n: int, noun: str, *extra: tuple[int, str]) -> str:
        more = ", ".join(f"{k} {what}" for k, what in extra if k)
        return f"{n} {noun}{'' if n == 1 else 's'}" + (f" ({more})" if more else "")

    parts = [
        said(counts.get("messages", 0), "message", (counts.get("pending", 0), "not built yet")),
        said(counts.get("episodes", 0), "episode", (counts.get("merged_episodes", 0), "merged into later ones")),
        said(counts.get("facts", 0), "fact", (counts.get("superseded_facts", 0), "superseded")),
    ]
    if counts.get("notes"):
        links, evolved = counts.get("note_links", 0), counts.get("evolved_notes", 0)
        parts.append(said(counts["notes"], "note", (links, "links" if links != 1 else "link"), (evolved, "evolved")))
    return ", ".join(parts)


def _stage_table(stages: list[dict]):
    """Per stage, what building cost, sized for 80 columns: headers of short words, two-word ones over two lines
    (a header rich had to squeeze was cut: "prom…"), stage names never wrapped."""
    from rich import box
    from rich.table import Table

    columns = (
        ("calls", "calls"),
        ("attempts", "tries"),
        ("prompt_tokens", "prompt\ntokens"),
        ("completion_tokens", "output\ntokens"),
        ("seconds", "seconds"),
        ("failed", "failed"),
        ("repaired", "fixed"),
        ("fallbacks", "fell\nback"),
        ("decisions", "decided"),
    )
    # The box's own blank separator is the one space between columns (no cell padding), and no outer edge:
    # ten columns are 73 wide with a 13-letter stage and 5-digit token counts.
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=0)
    table.add_column("stage", no_wrap=True)
    for _, header in columns:
        table.add_column(header, justify="right", no_wrap=True)
    for row in stages:
        table.add_row(row["stage"], *(str(row.get(key, 0)) for key, _ in columns))
    return table
