"""A-MEM (arXiv 2502.12110) and Nemori's facts stored as its notes, as benchmark systems.

Split from nemori_systems.py, whose NemoriSystem they are, to keep each
module short; bench/catalog.py registers them after Nemori's own.
"""

from __future__ import annotations

from dataclasses import replace

from nemori_cli.bench.nemori_systems import PAPER_SEARCH, NemoriSystem
from nemori_cli.bench.systems import Listing
from nemori_cli.memory import modes
from nemori_cli.memory.profile import DEFAULT, Profile

OFFERED = Listing()  # the systems and groups below; bench/catalog.py registers them by name
register, register_group = OFFERED.register, OFFERED.register_group

# A-MEM (arXiv 2502.12110) as a management mode: notes, links, evolution;
# retrieval is the top k = 10 notes plus the notes linked to them.
_AMEM = (
    NemoriSystem(
        "amem",
        "A-MEM: one note per raw message (keywords, context, tags), linked and evolved; top 10 notes plus their links",
        profile=Profile(memory=modes.AMEM.name),
    ),
    NemoriSystem(
        "nemori+amem",
        "Nemori's episodes, with its distilled facts stored as A-MEM notes instead of consolidated facts; k=10 episodes, r=2, 10 notes plus links",
        profile=replace(DEFAULT, memory=modes.NEMORI_AMEM.name),
    ),
    NemoriSystem(
        "nemori+amem-notes",
        "A-MEM fed Nemori's distilled facts, answered from its notes alone (the Nemori paper's storage comparison)",
        profile=replace(DEFAULT, memory=modes.NEMORI_AMEM.name),
        options=replace(PAPER_SEARCH, k=0, raw_for_top=0),
        notes_only=True,
    ),
)
for _system in _AMEM:
    register(_system)
register_group("amem-all", tuple(s.name for s in _AMEM))
