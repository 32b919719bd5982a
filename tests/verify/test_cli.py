"""``preflab verify run``: the bundled task set, bad input, and the results file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from preflab.cli import app

pytestmark = pytest.mark.usefixtures("sandbox")  # code verification runs sandboxed

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "verify"


def test_the_bundled_task_set_verifies_in_one_command(tmp_path):
    out = tmp_path / "results.jsonl"
    result = CliRunner().invoke(
        app,
        [
            "verify",
            "run",
            str(EXAMPLES / "tasks.jsonl"),
            str(EXAMPLES / "solutions.jsonl"),
            "-o",
            str(out),
            "-w",
            "2",
        ],
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 29
    assert {r["task_id"].split("/")[0] for r in rows} == {"code", "sql", "math"}
    for row in rows:  # every correct solution earns 1, every wrong one and every hack 0
        assert row["reward"] == (1.0 if row["solution_id"] == "correct" else 0.0), row
    hacks = [r for r in rows if r["solution_id"].startswith("hack-") and r["kind"] == "code"]
    # function mode: the hack runs in the candidate's own process, so it fails its tests (or is
    # refused) rather than tampering with a harness it cannot reach
    assert len(hacks) == 4 and all(r["reward"] == 0.0 and r["f2p_exit"] == 1 for r in hacks)
    assert "29 verifications" in result.output


def test_bad_lines_are_reported_with_file_line_and_field_and_nothing_is_written(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        '{"task_id": "m", "kind": "math", "answer": "1"}\n'
        '{"task_id": "c", "kind": "code", "f2p": []}\n'
        "not json\n"
    )
    solutions = tmp_path / "solutions.jsonl"
    solutions.write_text('{"task_id": "m", "completion": "answer: 1"}\n')
    out = tmp_path / "results.jsonl"
    result = CliRunner().invoke(app, ["verify", "run", str(tasks), str(solutions), "-o", str(out)])
    assert result.exit_code == 2
    assert f"{tasks}:3: (line): invalid JSON" in result.output
    assert not out.exists()
    tasks.write_text(
        '{"task_id": "m", "kind": "math", "answer": "1"}\n'
        '{"task_id": "c", "kind": "code", "f2p": []}\n'
    )
    result = CliRunner().invoke(app, ["verify", "run", str(tasks), str(solutions), "-o", str(out)])
    assert f"{tasks}:2: code.f2p:" in result.output
    tasks.write_text('{"task_id": "m", "kind": "math", "answer": "1"}\n')
    solutions.write_text('{"task_id": "nope", "completion": "1"}\n')
    result = CliRunner().invoke(app, ["verify", "run", str(tasks), str(solutions), "-o", str(out)])
    assert f"{solutions}:1: task_id: 'nope' is not a task of the tasks file" in result.output
    assert not out.exists()
