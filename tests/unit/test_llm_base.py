import pytest
from pydantic import BaseModel, Field

from nemori_cli.errors import LLMOutputError
from nemori_cli.llm.base import StructuredLLM
from nemori_cli.llm.fake import FakeBackend
from nemori_cli.stages import Stage

S = Stage("s", 256)


class Pick(BaseModel):
    choice: int = Field(ge=0, le=3)


def test_valid_answer_is_parsed_and_logged():
    backend = FakeBackend(['{"choice": 2}'])
    llm = StructuredLLM(backend)
    out = llm.complete([{"role": "user", "content": "pick"}], schema=Pick, stage=S)
    assert out.value.choice == 2
    (call,) = llm.log.calls
    assert (call.stage, call.outcome, call.attempts, call.model) == ("s", "ok", 1, "fake")


def test_invalid_then_valid_retries_once_with_some_temperature():
    backend = FakeBackend(['{"choice": 9}', '{"choice": 1}'])
    seen = []
    real_chat = backend.chat

    def spy(messages, **kw):
        seen.append(kw["temperature"])
        return real_chat(messages, **kw)

    backend.chat = spy
    llm = StructuredLLM(backend)
    assert llm.complete([{"role": "user", "content": "x"}], schema=Pick, stage=S).value.choice == 1
    assert seen == [0.0, 0.6]
    assert llm.log.calls[0].attempts == 2


def test_never_valid_raises_and_is_logged_as_failed():
    llm = StructuredLLM(FakeBackend(["", "{}"]))
    with pytest.raises(LLMOutputError, match="s: model fake gave no valid answer in 2 attempts"):
        llm.complete([{"role": "user", "content": "x"}], schema=Pick, stage=S)
    assert llm.log.calls[0].outcome == "failed"


def test_schema_is_sent_to_the_backend():
    backend = FakeBackend(['{"choice": 0}'])
    StructuredLLM(backend).complete([{"role": "user", "content": "x"}], schema=Pick, stage=S)
    schema = backend.history[0][1]
    assert schema["properties"]["choice"]["maximum"] == 3


def test_long_string_limits_never_reach_the_decoder():
    from nemori_cli.llm.schema import decoder_safe
    from nemori_cli.prompts.narrative import Narrative

    schema = decoder_safe(Narrative.model_json_schema())
    assert "maxLength" not in schema["properties"]["narrative"]
    # and the model still clips an overlong answer instead of rejecting it
    long = Narrative.model_validate({"title": "t" * 500, "narrative": "word " * 1000})
    assert len(long.title) <= 90 and len(long.narrative) <= 1200


def test_a_raw_newline_inside_a_string_is_read_not_rejected(backend, llm):
    from pydantic import BaseModel

    class Note(BaseModel):
        text: str

    backend.responses = ['{"text": "line one\nline two"}']
    assert llm.complete([{"role": "user", "content": "x"}], schema=Note, stage=S).value.text == "line one\nline two"
    assert llm.log.calls[-1].attempts == 1
