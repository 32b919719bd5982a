"""Export the JSON Schema of every wire format (``preflab schema export``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from pydantic import TypeAdapter

from .item import Item
from .judgments import Judgment
from .rubric import Rubric
from .trajectory import Trajectory

SCHEMAS: dict[str, Any] = {
    "item": Item,
    "judgment": Judgment,
    "rubric": Rubric,
    "trajectory": Trajectory,
}


def json_schemas() -> dict[str, dict[str, Any]]:
    return {name: TypeAdapter(model).json_schema(by_alias=True) for name, model in SCHEMAS.items()}


def write_json_schemas(out_dir: str | Path) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, schema in json_schemas().items():
        path = out / f"{name}.schema.json"
        path.write_bytes(
            orjson.dumps(schema, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"
        )
        written.append(path)
    return written
