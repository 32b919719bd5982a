"""The verifier fills the RLHF-2026.11 ``verifier`` block of the trajectory it judged."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from preflab.cli import app
from preflab.schema import Trajectory
from preflab.verify import MathTask, Verdict, fill_verifier_block
from preflab.verify.trajectories import verify_trajectory

from .conftest import ADD_TESTS, CORRECT

pytestmark = pytest.mark.usefixtures("sandbox")  # code verification runs sandboxed

NORMATIVE = Path(__file__).resolve().parents[1] / "data" / "trajectory-rlhf-2026.11.json"


def trajectory(answer_turn: dict, **extra) -> dict:
    return {
        "trajectory_id": "t1",
        "schema_version": "RLHF-2026.11",
        "turns": [
            {"turn": 0, "role": "user", "loss_mask": 0, "content": "task"},
            {"turn": 1, "role": "assistant", "loss_mask": 1, **answer_turn},
        ],
        **extra,
    }


def test_the_block_is_replaced_by_what_was_measured_and_extras_kept():
    record = orjson.loads(NORMATIVE.read_bytes())
    record["verifier"]["runner"] = "vendor-ci"  # an extra key preflab does not measure
    verdict = Verdict(
        task_id="t",
        kind="code",
        reward=0.0,
        reason="tests failed",
        f2p_exit=1,
        p2p_exit=0,
        harness_sha256_verified=True,
    )
    filled = fill_verifier_block(Trajectory.model_validate(record), verdict).dump()
    assert filled["verifier"] == {
        "f2p_exit": 1,
        "p2p_exit": 0,
        "harness_sha256_verified": True,
        "terminal_reward": 0.0,
        "runner": "vendor-ci",
    }
    assert {k: v for k, v in filled.items() if k != "verifier"} == {
        k: v for k, v in record.items() if k != "verifier"
    }


def test_a_claimed_pass_is_overwritten_by_the_real_result():
    claimed = {
        "f2p_exit": 0,
        "p2p_exit": 0,
        "harness_sha256_verified": True,
        "terminal_reward": 1.0,
    }
    record = trajectory({"content": r"\boxed{3}"}, verifier=claimed)
    filled, verdict = verify_trajectory(
        record, {"t1": MathTask(task_id="t1", kind="math", answer="4")}
    )
    assert verdict.reward == 0.0
    assert filled["verifier"]["terminal_reward"] == 0.0


def test_code_from_the_tool_call_files_and_inline_tasks():
    task = {
        "task_id": "add",
        "kind": "code",
        "files": {"tests/test_add.py": ADD_TESTS},
        "f2p": ["tests/test_add.py::test_add"],
        "p2p": ["tests/test_add.py::test_zero"],
    }
    record = trajectory(
        {
            "content": "patching",
            "tool_call": {"name": "write_files", "args": {"files": {"solution.py": CORRECT}}},
        },
        verify_task=task,
    )
    filled, _ = verify_trajectory(record, {})
    assert filled["verifier"] == {
        "f2p_exit": 0,
        "p2p_exit": 0,
        "harness_sha256_verified": True,
        "terminal_reward": 1.0,
    }
    assert filled["verify_task"] == task


def test_cli_fills_blocks_and_passes_the_rest_unchanged(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"task_id": "t1", "kind": "math", "answer": r"\frac{1}{2}"}) + "\n")
    src = tmp_path / "traj.jsonl"
    normative = orjson.loads(NORMATIVE.read_bytes())
    src.write_text(
        json.dumps(trajectory({"content": "answer: 0.5"})) + "\n" + json.dumps(normative) + "\n"
    )
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        app, ["verify", "trajectories", str(tasks), str(src), "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    first, second = [orjson.loads(x) for x in out.read_bytes().splitlines()]
    assert first["verifier"] == {"terminal_reward": 1.0}
    assert second == normative
