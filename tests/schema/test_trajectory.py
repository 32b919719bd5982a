"""The RLHF-2026.11 trajectory record from the foundation issue must round-trip verbatim."""

import orjson
import pytest
from pydantic import ValidationError

from preflab.schema import Trajectory

RECORD = (
    '{"trajectory_id":"traj_swe_prm_9041","schema_version":"RLHF-2026.11","env":{"oci_image":'
    '"ghcr.io/bestrlhfdata/swe-rust-tokio@sha256:3d91b8a4","net_ns":"CLONE_NEWNET","base_commit":'
    '"a18f402d"},"turns":[{"turn":0,"role":"user","loss_mask":0,"content":"Fix lost wake-up in '
    'BoundedMpsc::send_async when receiver drops concurrently with permit release."},{"turn":1,'
    '"role":"assistant","loss_mask":1,"prm_steps":[{"step":1,"text":"Inspecting '
    'src/channel/mpsc.rs atomic state flags around CLOSED_BIT and waker registration.","verdict":1},'
    '{"step":2,"text":"Found race: rx_drop sets CLOSED_BIT with Ordering::Relaxed before reading '
    'tx_waker; upgrading to AcqRel and re-checking state after waker.register().","verdict":1}],'
    '"tool_call":{"name":"apply_patch_and_test","args":{"diff_lines":19}}},{"turn":2,"role":"tool",'
    '"loss_mask":0,"content":"cargo test --test loom_mpsc_drop ... ok (482loom permutations passed, '
    '0 failed)"}],"verifier":{"f2p_exit":0,"p2p_exit":0,"harness_sha256_verified":true,'
    '"terminal_reward":0.98},"rubric":{"reasoning_validity":1.0,"constraint_obedience":1.0,'
    '"verbosity_penalty":-0.02},"telemetry":{"annotator_hash":"hmac_sha256:77a1e09c","iki_cv":0.74,'
    '"revision_ratio":0.165,"untrusted_paste_chars":0}}'
)


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
