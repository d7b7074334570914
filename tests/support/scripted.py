"""A fake model scripted stage by stage: no cut, a fixed narrative, the prediction and facts a test gives."""

from __future__ import annotations


def scripted(backend, *, facts, prediction="Ann probably talked about sailing."):
    """Partition: no cut; narration: fixed; prediction/distillation: as given."""

    def answer(messages, schema):
        title = schema["title"]
        if title == "Partition":
            return {"boundaries": []}
        if title == "Narrative":
            return {"title": "Ann sails", "narrative": "On 8 May 2023 Ann talked about sailing with Bob."}
        if title == "Prediction":
            return {"prediction": prediction}
        if title == "Distilled":
            return {"facts": facts.pop(0) if facts else []}
        if title == "Continuation":
            return {"continues": -1}
        if title == "Consolidation":
            return {"action": "new"}
        raise AssertionError(title)

    backend.default = answer
