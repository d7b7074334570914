"""Run `nemori` with the memory-building prompts reading every message whole, to measure what clipping saves.

    python scripts/read_whole.py ingest export.json --db whole.db ...

nemori reads at most stages.MESSAGE_CHARS_READ (400) characters of a message
when it builds memory. This runs the same command with that limit lifted (the
partition prompt's own 240 stays), so the two can be timed and their answers
compared on the same export (docs/EXPORTS.md). A measuring tool only: the
product has no switch for it.
"""

from __future__ import annotations

import sys

from nemori_cli.cli.app import main
from nemori_cli.prompts import render

if __name__ == "__main__":
    render.message_lines.__kwdefaults__["limit"] = 10**9  # the default every memory-building prompt uses
    sys.argv = ["nemori", *sys.argv[1:]]
    main()
