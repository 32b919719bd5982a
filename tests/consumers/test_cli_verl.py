"""``preflab export -f verl`` with ``--require-reference`` and ``--data-source`` (issue 15 §3)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from preflab.cli import app

runner = CliRunner()
ITEMS = [
    {
        "id": "ref",
        "prompt": "Capital of France?",
        "reference": "Paris",
        "candidates": [{"id": "c", "text": "Paris"}],
    },
    {
        "id": "open",
        "prompt": "A haiku about rain.",
        "candidates": [{"id": "c", "text": "Rain on the roof"}],
    },
]


def cli(*args: str, code: int = 0):
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, result.output
    return result


def _project(tmp_path: Path) -> str:
    db = str(tmp_path / "cli.db")
    cli("init", "--db", db)  # only init creates a database
    cli("project", "create", "quiz", "--kinds", "pairwise", "--db", db)
    source = tmp_path / "items.jsonl"
    source.write_text("".join(json.dumps(i) + "\n" for i in ITEMS))
    cli("import", "quiz", str(source), "--db", db)
    return db


def _rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "train.jsonl").read_text().splitlines()]


def test_require_reference_and_data_source_reach_the_verl_export(tmp_path):
    db = _project(tmp_path)
    out = tmp_path / "verl"
    result = cli(
        "export",
        "quiz",
        "-f",
        "verl",
        "-o",
        str(out),
        "--require-reference",
        "--data-source",
        "geo",
        "--db",
        db,
    )
    rows = _rows(out)
    assert [(r["extra_info"]["item_id"], r["data_source"]) for r in rows] == [("ref", "geo")]
    assert "warning: data_source 'geo' (1 rows) is not one of verl's built-in keys" in result.output


def test_a_builtin_data_source_on_preference_rows_is_warned_about(tmp_path):
    db = _project(tmp_path)
    result = cli(
        "export",
        "quiz",
        "-f",
        "verl",
        "-o",
        str(tmp_path / "v"),
        "--data-source",
        "openai/gsm8k",
        "--db",
        db,
    )
    assert (
        "warning: 1 preference rows (style 'model') carry a built-in data_source" in result.output
    )
    assert "is not one of verl's built-in keys" not in result.output


def test_other_formats_refuse_the_verl_options(tmp_path):
    db = _project(tmp_path)
    result = cli(
        "export",
        "quiz",
        "-f",
        "trl-preference",
        "-o",
        str(tmp_path / "t"),
        "--data-source",
        "x",
        "--db",
        db,
        code=2,
    )
    assert "takes no option 'data_source'" in result.output
