"""The JSON Schemas of docs/schemas/ and a check of a command's --json output against one (tests/unit/test_json_schemas.py)."""

from __future__ import annotations

import json

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from tests.conftest import REPO

SCHEMAS = REPO / "docs" / "schemas"


def schema_files() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted(SCHEMAS.glob("*.schema.json"))}


REGISTRY = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in schema_files().values())


def check(name: str, result) -> dict:
    """The command succeeded and its stdout is one JSON document valid against NAME.schema.json; returns it."""
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    data = json.loads(result.stdout)
    schema = schema_files()[f"{name}.schema.json"]
    errors = sorted(Draft202012Validator(schema, registry=REGISTRY).iter_errors(data), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{name}: {'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in errors[:10])
    return data
