"""The project policy typed once (``preflab.schema.policy``, issue 32): one set of defaults for
the server, the CLI and ``io``, stored policies loading as before, a refused stored value worded
as the export always worded it."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from preflab.io.export import AGGREGATORS, ExportError, ExportOptions, export_project
from preflab.io.export.base import project_policy
from preflab.io.export.length_gate import VerbosityPenalty
from preflab.quality.telemetry import TelemetrySettings
from preflab.schema import Item, PairwiseJudgment
from preflab.schema.export_options import export_options_from, length_gate_fits
from preflab.schema.policy import Policy, PolicyError, TelemetryPolicy, stored_policy
from preflab.server.policy import Policy as ServerPolicy
from preflab.store import make_engine, transaction
from preflab.store.db import upgrade
from preflab.store.repo import add_item, add_judgment, create_project


def test_the_defaults_are_the_ones_io_used():
    policy = stored_policy({})
    assert policy.min_alpha == 0.84  # agreement_gate's floor before the policy was typed
    assert policy.verbosity_penalty(math.e) == pytest.approx(1.0)
    assert policy.length_tokenizer is None and policy.verifiable_to_raters is False
    assert policy.imported_step_verdicts == "label"
    assert (policy.ai_labelers, policy.ai_labeler_patterns) == ([], [])
    # the telemetry thresholds: the statistics take the policy's defaults
    assert TelemetrySettings.of(TelemetryPolicy()) == TelemetrySettings()
    assert ServerPolicy is Policy and VerbosityPenalty is type(policy.verbosity_penalty)


def test_a_stored_policy_loads_as_stored():
    stored = {
        "version": 3,
        "title": "t",
        "policy": {
            "min_alpha": 0,
            "verbosity_penalty": {"per_log_ratio": 0},
            "telemetry": {"paste_share": 1},
            "ai_labeler_patterns": ["gpt-*"],
        },
    }
    policy = stored_policy(stored)
    assert policy.min_alpha == 0.0 and policy.verbosity_penalty(100.0) == 0.0
    assert TelemetrySettings.of(policy.telemetry).paste_share == 1.0
    assert policy.ai_labeler_patterns == ["gpt-*"]
    # a bad title is not the policy's problem: the policy still loads
    assert stored_policy({"title": 5, "policy": {"min_alpha": 0.5}}).min_alpha == 0.5


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        (
            {"min_alpha": 2},
            "policy.min_alpha: 2 is not a number in [0, 1]; set it with `preflab project set`",
        ),
        (
            {"min_alpha": "x"},
            "policy.min_alpha: 'x' is not a number in [0, 1]; set it with `preflab project set`",
        ),
        (
            {"verbosity_penalty": {"free_ratio": 0}},
            "policy.verbosity_penalty.free_ratio: 0 must be a number >= 0 (free_ratio > 0); "
            "set it with `preflab project set`",
        ),
        (
            {"verbosity_penalty": {"slope": 1}},
            "policy.verbosity_penalty: unknown key 'slope' "
            "(keys: free_ratio, per_log_ratio, max_penalty)",
        ),
        ({"telemetry": {"speed": 1}}, "policy.telemetry: unknown key 'speed' (keys: paste_share,"),
    ],
)
def test_a_refused_stored_value_names_the_setting(policy, message):
    with pytest.raises(PolicyError) as caught:
        stored_policy({"policy": policy})
    assert str(caught.value).startswith(message)
    with pytest.raises(ExportError) as in_export:
        project_policy({"policy": policy})
    assert str(in_export.value) == str(caught.value)


def test_one_length_gate_rule_and_the_web_options_typed():
    assert length_gate_fits((0.85, 1.2)) and length_gate_fits((1.0, 1.0))
    assert not length_gate_fits((0.0, 1.2)) and not length_gate_fits((0.9, 0.95))
    options = export_options_from(
        {
            "format": "verl",
            "aggregation": "dawid-skene",
            "require_reference": True,
            "min_raters": 2,
        },
        Path("out"),
    )
    assert options.aggregation == "dawid-skene" and options.min_raters == 2
    assert options.params == {"require_reference": True}
    assert options.length_gate is None  # the web's options name the gate, or it is off


def _pairwise_project(db_url: str):
    engine = make_engine(db_url)
    upgrade(engine)
    with transaction(engine) as s:
        proj = create_project(s, "agg", kinds=["pairwise"], settings={"policy": {"min_alpha": 0}})
        for n in range(3):
            add_item(
                s,
                proj,
                Item(
                    id=f"q{n}",
                    prompt=f"Question {n}?",
                    candidates=[{"id": "a", "text": "yes it is"}, {"id": "b", "text": "no"}],
                ),
            )
            for r, winner in enumerate(["a", "a", "b"]):
                add_judgment(
                    s,
                    proj,
                    PairwiseJudgment(
                        item_id=f"q{n}",
                        shown_order=("a", "b"),
                        winner=winner,
                        strength=2,
                        provenance={"rater_id": f"r{r}"},
                    ),
                )
    return engine


def test_the_aggregation_option_picks_the_aggregator(db_url, tmp_path):
    engine = _pairwise_project(db_url)
    for name in AGGREGATORS:
        by_option = export_project(
            engine,
            "agg",
            ExportOptions(
                format="trl-preference",
                out=tmp_path / f"o-{name}",
                aggregation=name,
                force=True,
                length_gate=None,
            ),
        )
        by_argument = export_project(
            engine,
            "agg",
            ExportOptions(
                format="trl-preference", out=tmp_path / f"a-{name}", length_gate=None, force=True
            ),
            aggregator=AGGREGATORS[name],
        )
        assert (tmp_path / f"o-{name}" / "train.jsonl").read_bytes() == (
            tmp_path / f"a-{name}" / "train.jsonl"
        ).read_bytes()
        assert by_option["aggregation"] == by_argument["aggregation"]
    with pytest.raises(ExportError, match="aggregation 'mode': choose from majority, dawid-skene"):
        export_project(
            engine, "agg", ExportOptions(format="raw", out=tmp_path / "x", aggregation="mode")
        )
