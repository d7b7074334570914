"""Write a synthetic ChatGPT data export (conversations.json) of N conversations, for cost measurements.

    python scripts/make_chatgpt_export.py OUT.json [--conversations 200] [--seed 7]

The shape is the real export's: a JSON list of conversations, each a tree of
nodes (``mapping``) with ``current_node`` on the branch the user ended on.
What is in it is chosen to exercise what an ingest of a real account meets:
- a hidden system message opening every conversation, and tool calls with
  their answers in some (left out by the reader);
- regenerated answers and edited questions: branches the user left, which
  the reader must not read;
- long assistant turns (300-800 words), as real exports are full of;
- an image part now and then, and a message without create_time;
- dates spread over one year, and one person, Sam, who lives in Manchester
  for the first half and moves to Edinburgh midway, so a memory that keeps
  only the first city is visibly wrong.

Deterministic: the same --seed and --conversations give the same bytes.
"""

from __future__ import annotations

import argparse
import json
import random
import uuid
from pathlib import Path

START = 1_672_531_200.0  # 2023-01-01T00:00:00Z
YEAR = 365 * 86_400
CITIES = ("Manchester", "Edinburgh")

TOPICS = [
    ("Weekend hike", "I want to plan a hike near {city} this weekend, about 15 km. What would you suggest?"),
    (
        "Sourdough troubleshooting",
        "My sourdough came out dense again. I feed the starter once a day and bake at 230C. What am I doing wrong?",
    ),
    ("Budget for the month", "Can you help me make a monthly budget? Rent in {city} is {rent} pounds and I earn about 2,900 after tax."),
    ("Learning Spanish", "I've been doing Duolingo Spanish for three months. How do I get to actually speaking it?"),
    ("Running plan", "I'm training for a 10k in {city} in eight weeks. I can run 5k now. Can you give me a plan?"),
    ("Python script help", "My Python script that renames photos by date crashes on some files with a KeyError. How do I make it robust?"),
    ("Gift for my sister", "My sister Jo turns 30 next month. She likes climbing and old films. Gift ideas?"),
    ("Houseplants dying", "The leaves on my monstera are going yellow. The flat in {city} is quite dark. What should I do?"),
    ("Job interview prep", "I have an interview for a data analyst role next week. What questions should I prepare for?"),
    ("Cooking for friends", "I'm cooking for six friends on Saturday, one vegan and one coeliac. What's a menu that works for everyone?"),
]
MOVE = ("Moving to Edinburgh", "I'm moving from Manchester to Edinburgh next month for a new job. What should I sort out before the move?")
FOLLOW_UPS = [
    "That's helpful. Can you go into more detail on the second point?",
    "What would you change if I only had half the time?",
    "Could you make that into a short checklist?",
    "Thanks. One more thing: what are the most common mistakes people make here?",
    "I tried that and it didn't really work. Any other ideas?",
    "How would this be different in {city}?",
]
# Sentences an assistant turn is built from: plain advice that reads like a real answer.
SENTENCES = [
    "The most important thing is to start with what you can keep doing every week rather than what looks best on paper.",
    "A useful rule of thumb is to change one thing at a time, so that you can tell which change made the difference.",
    "If you live in {city}, the local options are usually better than they first look, and the people running them are happy to advise.",
    "Write down what you did and how it went; after two or three weeks the pattern is usually obvious.",
    "Many people underestimate how much the small daily habits matter compared with the occasional big effort.",
    "It is worth checking the weather and the opening times the day before, because plans fall apart on the details.",
    "Budget a little more time than you think you need: the first attempt always takes longer than the second.",
    "When something goes wrong, look first at the simplest explanation, such as temperature, timing or a typo.",
    "Keep a short list of the three things that matter most to you and let the rest be good enough.",
    "If you get stuck, ask someone who has done it recently; their advice will be more current than any guide.",
    "Try to make the next step small enough that you can do it today, even if it is only ten minutes.",
    "The options differ mostly in cost and convenience, so decide which of the two you care about more.",
    "A second opinion helps, but in the end the approach you will actually stick with is the right one.",
    "There is no need to buy special equipment at the start; borrow or improvise until you know you will continue.",
    "Plan a rest day or a buffer, because recovery is when most of the progress actually happens.",
    "Finally, be kind to yourself about setbacks: they are part of the process, not a sign you are doing it wrong.",
]
HEADINGS = ["**What to do first**", "**Why it matters**", "**A simple plan**", "**Things to avoid**", "**If you have more time**"]


def _words(text: str) -> int:
    return len(text.split())


def assistant_turn(rng: random.Random, city: str) -> str:
    """300-800 words of advice in a few headed paragraphs."""
    target = rng.randint(300, 770)  # one more sentence (at most 25 words) and a heading may follow the target
    paragraphs: list[str] = []
    total = 0
    while total < target:
        sentences: list[str] = []
        heading = rng.choice(HEADINGS)
        total += _words(heading)
        for _ in range(rng.randint(3, 6)):
            sentences.append(rng.choice(SENTENCES).format(city=city))
            total += _words(sentences[-1])
            if total >= target:
                break
        paragraphs.append(f"{heading}\n\n{' '.join(sentences)}")
    return "\n\n".join(paragraphs)


class Builder:
    """One conversation's mapping, grown node by node."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.mapping: dict[str, dict] = {}
        self.root = self._node(None, None)

    def _id(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def _node(self, parent: str | None, message: dict | None) -> str:
        node_id = message["id"] if message else self._id()
        self.mapping[node_id] = {"id": node_id, "message": message, "parent": parent, "children": []}
        if parent is not None:
            self.mapping[parent]["children"].append(node_id)
        return node_id

    def add(self, parent: str, role: str, content: dict, when: float | None, *, hidden=False, recipient="all", name=None) -> str:
        message = {
            "id": self._id(),
            "author": {"role": role, "name": name, "metadata": {}},
            "create_time": when,
            "update_time": None,
            "content": content,
            "status": "finished_successfully",
            "end_turn": True if role == "assistant" else None,
            "weight": 1.0,
            "metadata": {"is_visually_hidden_from_conversation": True} if hidden else {},
            "recipient": recipient,
        }
        return self._node(parent, message)


def text(*parts) -> dict:
    return {"content_type": "text", "parts": list(parts)}


def conversation(rng: random.Random, index: int, total: int) -> dict:
    when = START + YEAR * index / total + rng.uniform(0, YEAR / total * 0.8)
    moved = index >= total // 2
    city = CITIES[1] if moved else CITIES[0]
    title, opening = MOVE if index == total // 2 else rng.choice(TOPICS)
    b = Builder(rng)
    node = b.add(b.root, "system", text(""), None, hidden=True)
    clock = when
    question = opening.format(city=city, rent=rng.choice([750, 850, 950, 1100]))
    if moved and index != total // 2 and rng.random() < 0.3:
        question = f"Since moving to Edinburgh I've been meaning to ask: {question[0].lower()}{question[1:]}"
    for turn in range(rng.randint(2, 6)):
        clock += rng.uniform(20, 600)
        if turn and rng.random() < 0.1:  # an edited question: the first version is left as a branch
            b.add(node, "user", text(question + " (first draft)"), clock - 5)
        if rng.random() < 0.1:
            part = {
                "content_type": "image_asset_pointer",
                "asset_pointer": f"file-service://file-{rng.getrandbits(48):012x}",
                "size_bytes": rng.randint(50_000, 900_000),
                "width": 1024,
                "height": 768,
            }
            node = b.add(node, "user", {"content_type": "multimodal_text", "parts": [part, question]}, clock)
        else:
            node = b.add(node, "user", text(question), None if rng.random() < 0.05 else clock)
        if rng.random() < 0.15:  # a search: the call and the result, both left out by the reader
            call = b.add(
                node,
                "assistant",
                {"content_type": "code", "language": "unknown", "text": f"search({question[:40]!r})"},
                clock + 2,
                recipient="browser",
            )
            node = b.add(
                call,
                "tool",
                {"content_type": "tether_browsing_display", "result": "L0: search results", "summary": None},
                clock + 4,
                name="browser",
            )
        clock += rng.uniform(5, 40)
        if rng.random() < 0.25:  # regenerated: the first answer stays a branch the user left
            b.add(node, "assistant", text(assistant_turn(rng, city)), clock)
            clock += rng.uniform(5, 30)
        node = b.add(node, "assistant", text(assistant_turn(rng, city)), clock)
        question = rng.choice(FOLLOW_UPS).format(city=city)
    ident = str(uuid.UUID(int=rng.getrandbits(128), version=4))
    return {
        "title": title,
        "create_time": when,
        "update_time": clock,
        "mapping": b.mapping,
        "moderation_results": [],
        "current_node": node,
        "plugin_ids": None,
        "conversation_id": ident,
        "conversation_template_id": None,
        "gizmo_id": None,
        "is_archived": False,
        "safe_urls": [],
        "default_model_slug": rng.choice(["gpt-4o", "gpt-4o-mini", "o3-mini"]),
        "id": ident,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="where to write conversations.json")
    parser.add_argument("--conversations", "-n", type=int, default=200, help="how many conversations (default 200)")
    parser.add_argument("--seed", type=int, default=7, help="the random seed (default 7)")
    args = parser.parse_args(argv)
    if args.conversations < 1:
        parser.error("--conversations must be at least 1")
    rng = random.Random(args.seed)
    with args.out.open("w", encoding="utf-8") as f:
        f.write("[")  # one conversation at a time: a large export is never held whole here either
        for i in range(args.conversations):
            f.write("," if i else "")
            f.write(json.dumps(conversation(rng, i, args.conversations), ensure_ascii=False, separators=(",", ":")))
        f.write("]")
    print(f"wrote {args.conversations} conversations to {args.out} ({args.out.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
