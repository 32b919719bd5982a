"""Model-output files for the evaluation tests."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest


def _server_suite():
    """The server suite's fixtures module (a real ``preflab serve`` and a seeded database)."""
    path = Path(__file__).resolve().parents[1] / "server" / "conftest.py"
    spec = importlib.util.spec_from_file_location("_preflab_server_fixtures", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


_server = _server_suite()
seed = _server.seed
start_server = _server.start_server  # a fixture: pytest finds it here too

V1, V2, V3 = "acme-secret-v1", "acme-secret-v2", "acme-secret-v3"


def write_outputs(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def outputs(
    model: str,
    n: int,
    *,
    better: bool = False,
    same_as_v1: set[int] = frozenset(),
    domains: bool = False,
) -> list[dict]:
    """``n`` answers of ``model``; v2's are marked BETTER so a test rater can tell them apart."""
    rows = []
    for i in range(n):
        text = (
            f"short answer {i}"
            if (not better or i in same_as_v1)
            else f"BETTER, longer answer {i} ({model[-2:]})"
        )
        row = {
            "prompt": f"Question {i}: why is the sky blue?",
            "response": text,
            "model": model,
            "reward": float(i),
        }
        if domains:
            row["domains"] = ["physics" if i % 2 else "general"]
        rows.append(row)
    return rows


@pytest.fixture
def two_models(tmp_path: Path) -> tuple[Path, Path]:
    return (
        write_outputs(tmp_path / "v1.jsonl", outputs(V1, 12, domains=True)),
        write_outputs(tmp_path / "v2.jsonl", outputs(V2, 12, better=True, same_as_v1={3})),
    )
