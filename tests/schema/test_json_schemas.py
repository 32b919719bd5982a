"""The committed JSON Schemas match the pydantic models and accept/reject what the models do."""

import json
from pathlib import Path

import jsonschema
import pytest

from preflab.schema.jsonschema import json_schemas

SCHEMAS = Path(__file__).resolve().parents[2] / "schemas"
RECORD = (Path(__file__).resolve().parents[1] / "data" / "trajectory-rlhf-2026.11.json").read_text()


def test_committed_schemas_are_up_to_date():
    for name, schema in json_schemas().items():
        committed = json.loads((SCHEMAS / f"{name}.schema.json").read_text())
        assert committed == schema, f"schemas/{name}.schema.json is stale: run `make schemas`"


@pytest.mark.parametrize(
    ("name", "instance", "valid"),
    [
        ("trajectory", json.loads(RECORD), True),
        (
            "judgment",
            {
                "kind": "pairwise",
                "item_id": "i",
                "shown_order": ["a", "b"],
                "winner": "a",
                "strength": 3,
                "provenance": {"rater_id": "r"},
            },
            True,
        ),
        (
            "judgment",
            {
                "kind": "pairwise",
                "item_id": "i",
                "shown_order": ["a", "b"],
                "winner": "a",
                "strength": 9,
                "provenance": {"rater_id": "r"},
            },
            False,
        ),
        (
            "judgment",
            {
                "kind": "unary",
                "item_id": "i",
                "candidate_id": "a",
                "label": True,
                "provenance": {"rater_id": "r"},
                "surprise": 1,
            },
            False,
        ),
        (
            "item",
            {"prompt": [{"role": "user", "content": "hi"}], "candidates": [{"text": "hello"}]},
            True,
        ),
        ("item", {"prompt": "hi", "candidates": []}, False),
        (
            "rubric",
            {"id": "r", "dimensions": [{"name": "helpful", "scale": "ordinal", "points": 5}]},
            True,
        ),
    ],
)
def test_schema_agrees_with_examples(name, instance, valid):
    schema = json_schemas()[name]
    if valid:
        jsonschema.validate(instance, schema)
    else:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(instance, schema)
