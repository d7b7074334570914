"""JSON schemas as the constrained decoders can take them.

llama.cpp turns ``maxLength: 1200`` into a rule nested 1200 deep; its grammar
parser refuses that and the process then crashes in the sampler (seen with
llama-cpp-python 0.3.36: a segfault, no exception). Long strings are bounded
by ``max_tokens`` and by the pydantic model instead (which clips), so their
length limits are dropped from the schema sent to the model; short limits,
enums, item counts and integer bounds stay.
"""

from __future__ import annotations

import copy

MAX_GRAMMAR_STRING_LENGTH = 48
MAX_GRAMMAR_MIN_LENGTH = 8


def decoder_safe(schema: dict) -> dict:
    safe = copy.deepcopy(schema)
    _walk(safe)
    return safe


def _walk(node) -> None:
    if isinstance(node, dict):
        if node.get("type") == "string":
            if node.get("maxLength", 0) > MAX_GRAMMAR_STRING_LENGTH:
                del node["maxLength"]
            if node.get("minLength", 0) > MAX_GRAMMAR_MIN_LENGTH:
                node["minLength"] = MAX_GRAMMAR_MIN_LENGTH
        for value in node.values():
            _walk(value)
    elif isinstance(node, list):
        for value in node:
            _walk(value)
