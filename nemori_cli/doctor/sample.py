"""The fixed conversation every `nemori doctor` probe runs on.

Fixed, so that two probes (two models, two machines) measure the same work:
twelve messages between two named people, one evening, a clear turn from one
topic (a race) to another (moving flat) after the sixth message, and a
relative time ("yesterday") that narration and distillation must date.
The known fact is about the first topic, so the prediction stage has
something to predict from; the question can only be answered from the sample.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from nemori_cli.domain import IncomingMessage

_START = datetime(2024, 3, 14, 19, 2)

# (minutes after _START, speaker, content)
_LINES = (
    (0, "Maya", "I finally ran 18 km yesterday, my longest run ever."),
    (1, "Tom", "Wow, that's huge! Is that for the Lisbon half marathon?"),
    (2, "Maya", "Yes, the race is on 6 October and I want to finish under two hours."),
    (4, "Tom", "How are your knees holding up with all that mileage?"),
    (5, "Maya", "The left one aches a bit, so my coach Ines added strength training on Tuesdays."),
    (7, "Tom", "Smart. I can come cheer for you at the finish line."),
    (12, "Tom", "Different topic: I signed the lease for the flat in Didsbury today."),
    (13, "Maya", "Congratulations! When do you move in?"),
    (14, "Tom", "On 1 April. It has a small garden, so I can finally grow tomatoes."),
    (16, "Maya", "Do you need help carrying boxes? I could borrow my brother's van."),
    (17, "Tom", "That would be amazing, the movers wanted 400 pounds."),
    (19, "Maya", "Then it's settled: van on 1 April, and you buy the pizza."),
)

USER = "doctor-probe"
KNOWN_FACT = "Maya is training for the Lisbon half marathon."
QUESTION = "When did Maya run 18 km, and how far was it?"
TODAY = "15 March 2024"


def messages() -> list[IncomingMessage]:
    return [
        IncomingMessage(
            speaker=speaker,
            content=content,
            timestamp=_START + timedelta(minutes=minutes),
            source_id=f"doctor-{i}",
            session="doctor",
        )
        for i, (minutes, speaker, content) in enumerate(_LINES)
    ]


def content_chars() -> int:
    """What per-character rates divide by: the messages' text, as ingest cost estimates count it."""
    return sum(len(content) for _, _, content in _LINES)
