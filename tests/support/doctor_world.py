"""A model that answers every stage of `nemori doctor`'s probe well, and the fake builders that serve it."""

from __future__ import annotations

import time

from nemori_cli.embed.fake import FakeEmbedder
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.llm.fake import FakeBackend


def sensible(messages, schema):
    """A model that answers every stage well, the self-checks included."""
    time.sleep(0.002)  # calls must take measurable time for the rates
    text = "\n".join(m["content"] for m in messages)  # wherever the prompt layout puts things
    title = schema["title"]
    if title == "Partition":
        return {"boundaries": [7]}
    if title == "Narrative":
        if "18 km" in text:
            return {"title": "Maya's long run", "narrative": "On 14 March 2024 Maya told Tom she ran 18 km on 13 March 2024."}
        return {"title": "Tom's new flat", "narrative": "On 14 March 2024 Tom told Maya he signed a lease in Didsbury."}
    if title == "Continuation":
        return {"same_event": "running shoes" not in text}  # the self-check's second pair is the unrelated one
    if title == "Prediction":
        return {"prediction": "Maya talked about her training."}
    if title == "Distilled":
        fact = "Maya ran 18 km on 13 March 2024." if "18 km" in text else "Tom signed a lease for a flat in Didsbury."
        return {"facts": [fact]}
    if title == "Outdated":
        return {"outdated": "pilot" in text}
    if title == "Answer":
        return {"answer": "On 13 March 2024.", "sources": []}
    raise AssertionError(f"unscripted {title}")


def fakes(answer):
    backend = FakeBackend(default=answer)
    return (lambda settings: StructuredLLM(backend)), (lambda settings: FakeEmbedder())
