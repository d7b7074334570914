"""`nemori export` and `nemori import-memory`: memory out of the file, and back in.

The JSON Lines export is lossless (store/export.py says what it holds and
store/restore.py how it comes back); the Markdown journal is for reading
(cli/journal.py). Neither builds a model: an export reads rows, a restore
writes the vectors it carries.
"""

from __future__ import annotations

import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from nemori_cli.cli import options as opt
from nemori_cli.cli.help import examples
from nemori_cli.cli.render import console
from nemori_cli.errors import ConfigError, InputError

EXAMPLES = examples(
    "nemori export --out alice.jsonl --user alice",
    "nemori export --format markdown --out journal/",
)
IMPORT_EXAMPLES = examples("nemori import-memory alice.jsonl --db new.db")


class ExportFormat(str, Enum):
    jsonl = "jsonl"
    markdown = "markdown"


def export_cmd(
    fmt: Annotated[
        ExportFormat,
        typer.Option(
            "--format",
            "-f",
            metavar="FORMAT",
            help="jsonl (everything, to restore with import-memory) or markdown (a journal to read).",
        ),
    ] = ExportFormat.jsonl,
    out: Annotated[
        str | None,
        typer.Option(
            "--out", "-o", metavar="PATH", help="File for jsonl (default: stdout); folder for markdown (required).", show_default=False
        ),
    ] = None,
    db_path: opt.Db = None,
    user: opt.User = None,
) -> None:
    """Write one user's memory out, to keep or to read.

    Every row as JSON Lines (`import-memory` restores it), or a journal in
    Markdown: a file per month and an index.
    """
    from nemori_cli.services.read import Reading

    folder: Path | None = None  # markdown only
    if fmt is ExportFormat.markdown:
        if out is None:
            raise ConfigError("--format markdown writes a folder of files: give it with --out DIR")
        folder = Path(out)
    with Reading(opt.settings(db_path, user)) as reading:
        if folder is None:
            _jsonl(reading, out)
        else:
            _markdown(reading, folder)


# -- JSON Lines ---------------------------------------------------------------


def _jsonl(reading, out: str | None) -> None:
    from nemori_cli import __version__
    from nemori_cli.services import export

    records = export.records(reading.store, reading.user, __version__)
    if out is None:
        _write_lines(records, sys.stdout.buffer)
        return
    path = Path(out)
    if path.is_dir():
        raise ConfigError(f"--out {path} is a folder; a jsonl export is one file")
    partial = path.with_name(f".{path.name}.partial")
    try:
        with partial.open("wb") as f:
            counts = _write_lines(records, f)
        os.replace(partial, path)  # a failed export leaves no half file under the name
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror}") from None
    finally:
        partial.unlink(missing_ok=True)
    shown = ", ".join(f"{n} {t.replace('_', ' ')}" for t, n in counts.items() if n and not t.endswith(("_fts", "_vec")))
    console().print(f"exported user {reading.user} to {path}: {shown or 'nothing'}", soft_wrap=True, markup=False)


def _write_lines(records, stream) -> dict[str, int]:
    """One compact JSON object per line; returns the closing line's counts."""
    counts: dict[str, int] = {}
    for record in records:
        stream.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n")
        counts = record.get("rows", counts) if "nemori_export_end" in record else counts
    stream.flush()
    return counts


# -- Markdown -----------------------------------------------------------------


def _markdown(reading, folder: Path) -> None:
    from nemori_cli.cli import journal
    from nemori_cli.services import export

    files = journal.render(export.contents(reading.store, reading.user))
    _refuse_foreign_folder(folder, journal.MARK)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("????-??.md"):  # a month the memory no longer has (forgotten since the last export)
            if stale.name not in files and _written_by_us(stale, journal.MARK):
                stale.unlink()
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")
    except OSError as e:
        raise InputError(f"cannot write the journal in {folder}: {e.strerror}") from None
    months = len(files) - 1
    console().print(
        f"wrote the journal of user {reading.user} to {folder}: index.md and {months} month{'s' if months != 1 else ''}",
        soft_wrap=True,
        markup=False,
    )


def _written_by_us(path: Path, mark: str) -> bool:
    try:
        with path.open(encoding="utf-8") as f:
            return f.readline().rstrip("\n") == mark
    except (OSError, UnicodeDecodeError):
        return False


def _refuse_foreign_folder(folder: Path, mark: str) -> None:
    """The journal goes into a new or empty folder, or over an earlier journal: never over someone's other files."""
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--out {folder} is a file; --format markdown writes a folder")
    if folder.is_dir() and any(folder.iterdir()) and not _written_by_us(folder / "index.md", mark):
        raise ConfigError(f"--out {folder} holds other files; give a new or empty folder (or one an earlier journal export wrote)")


# -- import-memory ------------------------------------------------------------


def import_cmd(
    source: Annotated[str, typer.Argument(metavar="FILE", help="A file written by `nemori export` (jsonl).", show_default=False)],
    db_path: opt.Db = None,
) -> None:
    """Restore an export into a new or empty database.

    Every id is kept: the memory answers as it did. No model is loaded.
    """
    from nemori_cli.services import export

    settings = opt.settings(db_path, None)
    done = export.restore(Path(source), settings)
    shown = ", ".join(f"{n} {t.replace('_', ' ')}" for t, n in done.counts.items() if not t.endswith(("_fts", "_vec")))
    upgraded = f" (an export of schema {done.schema}, upgraded to {done.newest})" if done.schema < done.newest else ""
    console().print(f"restored user {done.user} into {settings.store_name}: {shown or 'nothing'}{upgraded}", soft_wrap=True, markup=False)
