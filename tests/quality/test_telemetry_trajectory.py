"""Trajectory telemetry (RLHF-2026.11 ``telemetry``) is evaluated like web UI telemetry (issue 16 §2).

The record is tests/data/trajectory-rlhf-2026.11.json (iki_cv 0.74, revision_ratio 0.165,
untrusted_paste_chars 0: a human-looking trace); each test changes one signal.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from preflab.io.formats import ConvertOptions
from preflab.io.formats.generic import TRAJECTORY
from preflab.quality.telemetry import TelemetrySettings, judgment_flags, telemetry_flags

RECORD = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "trajectory-rlhf-2026.11.json").read_text()
)


def trajectory_judgment(**telemetry):
    record = {**RECORD, "telemetry": {**RECORD["telemetry"], **telemetry}}
    # the steps judgment (the record's rubric grades come as rubric judgments with the same provenance)
    (judgment,) = [
        j for j in TRAJECTORY.convert(record, ConvertOptions()).judgments if j.kind == "steps"
    ]
    return judgment


def flags_of(judgment, settings=None):
    return [name for name, _ in judgment_flags(judgment, None, settings)]


def test_a_human_looking_trace_has_no_flag():
    assert flags_of(trajectory_judgment()) == []


def test_regular_typing_is_flagged_although_a_trajectory_never_reports_typed_chars():
    # Before: machine_typing needed typed_chars >= 20, which trajectories never carry, so 0.02 passed.
    judgment = trajectory_judgment(iki_cv=0.02)
    assert judgment.provenance.telemetry.typed_chars is None
    assert flags_of(judgment) == ["machine_typing"]


def test_no_revision_at_all_is_flagged():
    assert flags_of(trajectory_judgment(revision_ratio=0.0)) == ["no_revision"]


def test_untrusted_paste_beyond_the_threshold_is_flagged():
    assert flags_of(trajectory_judgment(untrusted_paste_chars=200)) == []
    judgment = trajectory_judgment(untrusted_paste_chars=1500)
    assert judgment.provenance.telemetry.untrusted_paste_chars == 1500
    assert flags_of(judgment) == ["untrusted_paste"]


def test_the_annotator_hash_is_the_rater_verbatim():
    assert trajectory_judgment().provenance.rater_id == RECORD["telemetry"]["annotator_hash"]


def test_thresholds_come_from_the_project_policy():
    judgment = trajectory_judgment(iki_cv=0.2)
    assert flags_of(judgment) == []
    strict = TelemetrySettings.from_policy({"min_iki_cv": 0.25})
    assert flags_of(judgment, strict) == ["machine_typing"]
    assert telemetry_flags([judgment], settings=strict)[0]["flag"] == "machine_typing"
    with pytest.raises(ValueError, match=r"policy.telemetry: unknown setting\(s\) \['min_ikicv'\]"):
        TelemetrySettings.from_policy({"min_ikicv": 0.25})
