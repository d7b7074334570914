"""The questions of `nemori ask --questions FILE|-`: one a line, read as they are answered."""

from __future__ import annotations

import sys
from collections.abc import Iterator

from nemori_cli.errors import InputError


def question_lines(source: str) -> Iterator[str]:
    """The questions of a file (or stdin for -), one a line, blank lines skipped.

    The file is opened now, so a missing one fails before any model loads; its lines are read as they are
    answered, so a script writing to a pipe gets each answer before it writes the next question.
    """
    from pathlib import Path

    if not source:
        raise InputError("--questions needs a file name, or - for stdin")
    if source == "-":
        if sys.stdin is None:  # started with stdin closed (<&-)
            raise InputError("--questions -: there is no stdin to read")
        if sys.stdin.isatty():
            sys.stderr.write("nemori: reading questions from the terminal, one a line; Ctrl-D ends\n")
        return _lines(getattr(sys.stdin, "buffer", sys.stdin), "stdin", close=False)
    try:  # bytes, decoded a line at a time: a text reader decodes ahead, and would fail lines before the bad one
        stream = Path(source).open("rb")  # noqa: SIM115 - closed by _lines
    except OSError as e:
        raise InputError(f"--questions {source}: {e.strerror or e}") from None
    return _lines(stream, source, close=True)


def _lines(stream, where: str, *, close: bool) -> Iterator[str]:
    read = asked = 0
    lines = iter(stream)
    try:
        while True:
            try:
                raw = next(lines, None)  # a text stdin (no bytes under it) decodes here
                line = raw.decode("utf-8") if isinstance(raw, bytes) else raw
            except UnicodeDecodeError:
                raise InputError(
                    f"--questions {where}: line {read + 1} is not UTF-8 text (the questions before it were answered)"
                ) from None
            if line is None:
                break
            read += 1
            line = (line.removeprefix("\ufeff") if read == 1 else line).strip()  # a byte-order mark, as editors on Windows write
            if line:
                asked += 1
                yield line
    finally:
        if close:
            stream.close()
    if not asked:
        raise InputError(f"--questions {where}: no questions in it (one a line)")
