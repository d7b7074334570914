"""How every command's `--help` is laid out: readable at 80 columns, with examples.

Why click's plain layout (``rich_markup_mode=None``) and not typer's rich
panels: rich draws each option in six columns inside a box (long name, short
name, negative switch, its short form, type, help), so at 80 columns the help
column was about 17 characters wide and long names were cut ("--default-timest…").
Click's definition list puts a long option's help on the next line, wraps at
the terminal's width, and cuts nothing. ``max_content_width`` 100: a wide
terminal gets lines of help a person can still read in one sweep (click's own
cap is 80), a narrow one its own width.

Two details of typer's plain layout are undone here, in click's HelpFormatter
(the one place all help text passes through): typer writes a required argument
as ``{source}`` in the usage line, where the convention (POSIX, click,
argparse) is ``SOURCE``, and adds the value's type to an argument's name
("SOURCE <str>"). Every option names its value with ``metavar=`` (``--window
N``) for the same reason; tests/unit/test_help.py holds every command to it.
"""

from __future__ import annotations

import re
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

try:  # typer from 0.23 vendors click as typer._click; older ones use click itself
    from typer._click.formatting import HelpFormatter
except ImportError:  # pragma: no cover - depends on the installed typer
    from click.formatting import HelpFormatter  # type: ignore[assignment]

# Wide enough for a comfortable line of help on a wide terminal; a narrower terminal wraps at its width.
MAX_CONTENT_WIDTH = 100
CONTEXT_SETTINGS: dict[str, Any] = {"max_content_width": MAX_CONTENT_WIDTH}


def examples(*lines: str) -> str:
    """An epilog of example command lines, shown under "Examples:" as written (never re-wrapped)."""
    return "\n".join(lines)


class _Formatter(HelpFormatter):
    def write_usage(self, prog: str, args: str = "", prefix: str | None = None) -> None:
        super().write_usage(prog, re.sub(r"\{([^{}\s]+)\}", r"\1", args), prefix)

    def write_dl(self, rows: Any, col_max: int = 30, col_spacing: int = 2) -> None:
        # An argument's term is "NAME <type>": the name (a metavar) says what it is. Options keep their metavar.
        rows = [(term if term.startswith("-") else re.sub(r" <[^<>]*>$", "", term), text) for term, text in rows]
        super().write_dl(rows, col_max, col_spacing)


class _Context(typer.Context):
    formatter_class = _Formatter


class Command(TyperCommand):
    context_class = _Context

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        _examples(self.epilog, formatter)


class Group(TyperGroup):
    context_class = _Context

    def format_epilog(self, ctx: Any, formatter: Any) -> None:
        _examples(self.epilog, formatter)


def _examples(epilog: str | None, formatter: Any) -> None:
    """The epilog is the command's examples: a section of its own, each line as written ("\\b": not re-wrapped)."""
    if not epilog:
        return
    with formatter.section("Examples"):
        formatter.write_text("\b\n" + epilog)


class App(typer.Typer):
    """typer.Typer with the help layout above for the group and every command it declares."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", Group)
        kwargs.setdefault("rich_markup_mode", None)
        kwargs.setdefault("context_settings", CONTEXT_SETTINGS)
        super().__init__(**kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", Command)
        return super().command(*args, **kwargs)
