"""Which turns found by meaning alone may anchor a window of the short context: those that say something.

MiniLM puts a speaker's short lines ("Can't wait too!", "See you tomorrow.
Bye!") near any question that names the speaker: on LoCoMo conv-30, three of
the six best vector matches for "When Gina has lost her job at Door Dash?"
were such lines, and each brought four neighbours, so a third of ~450 tokens
was farewells, and the 0.5B reader answered with their day. A turn found by
words already shares one of the question's; a turn found by meaning alone is
kept as an anchor only if it has at least ``min_words`` words of substance, or
shares a word with the question. It can still be shown as another turn's
neighbour.

Off by default (``SearchOptions.anchor_words = 0``): with N = 4 on `ask`'s
short road it scored +0.2 [-0.2, +0.8] on the tuning split and -1.5
[-3.7, +0.1] on the confirmation split (docs/BEYOND.md, seventh round): the
0.5B reader answered otherwise from contexts that still held the evidence.
Kept, tested, so the measurement can be repeated with another reader (the
bench rows nemori-anchor4 and nemori-unbuilt-anchor4).
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[A-Za-z][A-Za-z']{2,}")
_STEM = 5  # words compared by their first five letters ("losing" and "lost" do not meet; "opening" and "opened" do)
# Words that carry no content in a chat line: greetings, reactions, fillers and the commonest function words.
_EMPTY = frozenset(  # one string split, not a list literal: 150 quoted words would not read as a list of words
    """the and for are was were but not all any can can't cannot could would should will won't did does doing done
    has have had having its it's that that's this these those there there's then than with from into onto out
    you you're you've you'll your yours yourself she he her him his they them their we our ours i'm i've i'll i'd
    who what when where which why how yes yeah yep nope okay hey hello hiya bye goodbye see soon later tomorrow
    thanks thank thx welcome sure totally really very just too also much many lot lots more most some such
    great good nice cool awesome amazing wow wonderful fantastic glad happy love lovely sounds sound hope hoping
    wait can't keep going get got let let's know think feel feeling thing things way well right off
    ha haha hah lol omg aww yay woohoo ooh ah oh""".split()  # noqa: SIM905
)


def substance(text: str) -> int:
    """Words of three letters or more that are not greetings, reactions or function words."""
    return sum(1 for w in _WORD.findall(text) if w.lower() not in _EMPTY)


def _stems(text: str) -> set[str]:
    return {w.lower()[:_STEM] for w in _WORD.findall(text) if w.lower() not in _EMPTY}


def says_something(question: str, content: str, min_words: int) -> bool:
    """May a turn found by meaning alone anchor a window? ``min_words`` 0: always."""
    return min_words <= 0 or substance(content) >= min_words or bool(_stems(question) & _stems(content))
