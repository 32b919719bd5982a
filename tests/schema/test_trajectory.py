"""The RLHF-2026.11 trajectory record from the foundation issue must round-trip verbatim."""

from pathlib import Path

import orjson
import pytest
from pydantic import ValidationError

from preflab.schema import Trajectory

RECORD = (Path(__file__).resolve().parents[1] / "data" / "trajectory-rlhf-2026.11.json").read_text()


def test_reference_record_round_trips_without_loss():
    data = orjson.loads(RECORD)
    traj = Trajectory.model_validate(data)
    assert traj.dump() == data
    assert orjson.loads(orjson.dumps(traj.dump())) == data
    assert traj.turns[1].prm_steps[1].verdict == 1
    assert traj.verifier.terminal_reward == 0.98
    assert traj.prompt_messages()[0]["role"] == "user"


def test_unknown_keys_are_kept():
    data = orjson.loads(RECORD)
    data["turns"][1]["reasoning_trace_id"] = "rt-1"
    data["vendor"] = {"batch": 7}
    assert Trajectory.model_validate(data).dump() == data


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("turns", 2, "loss_mask"), 1, "loss_mask 0"),
        (("schema_version",), "RLHF-2025.01", "RLHF-2026.11"),
        (("turns", 1, "prm_steps", 0, "verdict"), 2, "verdict"),
    ],
)
def test_invalid_records_say_where(path, value, message):
    data = orjson.loads(RECORD)
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ValidationError, match=message):
        Trajectory.model_validate(data)
