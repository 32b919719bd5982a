"""Gold checks, drift, simulation, bias audits, telemetry flags and adjudication routing."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from preflab.quality import (
    LabelTable,
    RaterProfile,
    cusum_drift,
    dawid_skene,
    formatting_bias,
    gold_accuracy,
    leave_one_out_agreement,
    length_bias,
    length_parity_gate,
    majority_vote,
    overlap_items_for_alpha_ci,
    position_bias,
    qualification_decision,
    route_for_adjudication,
    simulate_class_labels,
    simulate_gold_stream,
    simulate_pairwise,
    telemetry_flags,
    wilson_interval,
)
from preflab.schema import PairwiseJudgment, StepsJudgment


def test_wilson_interval_reference():
    # Wilson (1927); e.g. Newcombe (1998) Stat Med 17, table I: 81/263 -> (0.2553, 0.3662)
    lo, hi = wilson_interval(81, 263)
    assert (round(lo, 4), round(hi, 4)) == (0.2553, 0.3662)
    assert gold_accuracy([True, False, True, True]).accuracy == 0.75


def test_qualification_decision():
    assert qualification_decision([True] * 9, bar=0.7, min_items=10) == "continue"
    assert qualification_decision([True] * 15, bar=0.7, min_items=10) == "pass"
    assert qualification_decision([True, False] * 10, bar=0.8, min_items=10) == "fail"
    assert qualification_decision([True, False, True], bar=0.5) == "continue"
    with pytest.raises(ValueError, match="bar must be"):
        qualification_decision([True], bar=80)


def test_cusum_catches_drop_from_0_9_to_0_6_within_60_gold_items():
    delays, false_alarms = [], 0
    for seed in range(50):
        stream = simulate_gold_stream(300, 0.9, drift_at=200, drift_accuracy=0.6, seed=seed)
        res = cusum_drift(stream, p0=0.9, p1=0.6, threshold=7.0)
        if res.alarm_at is not None and res.alarm_at < 200:
            false_alarms += 1
        else:
            assert res.drifted, f"seed {seed}: drop never detected"
            delays.append(res.alarm_at - 200)
    # stated detection budget (threshold 7): median delay <= 20 gold items, 90th pct <= 60;
    # false alarms in 200 in-control items for at most ~10% of raters
    assert np.median(delays) <= 20 and np.percentile(delays, 90) <= 60
    assert false_alarms <= 5
    steady = [
        cusum_drift(simulate_gold_stream(200, 0.9, seed=s), 0.9, 0.6, 7.0).drifted
        for s in range(50)
    ]
    assert sum(steady) <= 5


def test_leave_one_out_agreement():
    units = [1, 1, 1, 2, 2, 2]
    raters = ["a", "b", "c"] * 2
    values = [1, 1, 0, 0, 0, 1]
    loo = leave_one_out_agreement(units, raters, values)
    assert loo["a"]["agreement"] == pytest.approx((0.5 + 0.5) / 2)  # others tie in both units
    assert loo["c"]["agreement"] == 0.0


def test_dawid_skene_beats_majority_vote_with_a_few_experts_among_guessers():
    acc = [0.95] * 4 + [0.4] * 12
    units, raters, labels, truth = simulate_class_labels(
        acc, n_units=1500, raters_per_unit=5, seed=4
    )
    ds = dawid_skene(units, raters, labels)
    mv = majority_vote(units, raters, labels)
    assert np.mean(ds.labels == truth) > np.mean(mv.labels.astype(int) == truth) + 0.03


def test_position_audit_catches_biased_rater():
    profiles = {
        "fair": RaterProfile(accuracy=0.7),
        "biased": RaterProfile(accuracy=0.4, position_bias=0.4),
    }
    _, judgments, _ = simulate_pairwise(profiles, n_items=300, raters_per_item=2, seed=1)
    pb = position_bias(judgments)
    assert pb["per_rater"]["biased"]["flagged"] and not pb["per_rater"]["fair"]["flagged"]
    s = pb["per_rater"]["biased"]
    assert s["p_value"] == pytest.approx(binomtest(s["first_chosen"], s["n"], 0.5).pvalue)


def test_length_bias_and_parity_gate():
    rng = np.random.default_rng(0)
    a, b = rng.integers(10, 300, 500), rng.integers(10, 300, 500)
    longer_wins = rng.random(500) < 0.8  # raters pick the longer answer 80% of the time
    chosen = np.where(longer_wins, np.maximum(a, b), np.minimum(a, b))
    rejected = np.where(longer_wins, np.minimum(a, b), np.maximum(a, b))
    lb = length_bias(chosen, rejected)
    assert 0.75 < lb["share_chosen_longer"] < 0.85 and lb["logistic"]["slope_low"] > 0
    neutral = length_bias(a, b)
    assert neutral["logistic"]["slope_low"] < 0 < neutral["logistic"]["slope_high"]
    gate = length_parity_gate([100, 130, 80, 5], [100, 100, 100, 0])
    assert gate.keep.tolist() == [True, False, False, False]
    assert gate.reasons[1].startswith("chosen_too_long: ratio 1.30 > 1.20")
    assert gate.counts() == {"chosen_too_long": 1, "chosen_too_short": 1, "empty_rejected": 1}
    with pytest.raises(ValueError, match="one per pair"):
        length_parity_gate([1, 2], [1])


def test_hh_rlhf_chosen_final_reply_longer_share():
    import gzip
    import json
    from pathlib import Path

    # the first 300 pairs of hh-rlhf harmless-base test (tests/data/LICENSE-DATA)
    with gzip.open(
        Path(__file__).resolve().parents[1] / "data" / "hh-rlhf-300.jsonl.gz", "rt"
    ) as fh:
        rows = [json.loads(line) for line in fh]

    def final(text):  # the last assistant turn
        return text.rsplit("\n\nAssistant:", 1)[1].strip()

    # counted in characters of the final reply; pairs of equal length are left out.
    # Reference: scripts/cut-test-data.py counts 127 of 295 pairs without preflab (on the whole
    # set the data README gives 0.445 of 2,301 pairs: the chosen reply is mostly the shorter).
    lb = length_bias(
        [len(final(r["chosen"])) for r in rows], [len(final(r["rejected"])) for r in rows]
    )
    assert lb["n_differ"] == 295
    assert lb["share_chosen_longer"] == pytest.approx(127 / 295)


def test_formatting_and_sycophancy_markers():
    fb = formatting_bias(
        ["# Title\n- a\n- b\n**bold** Great question!", "plain"], ["plain", "plain"]
    )
    assert fb["headers"]["chosen_share"] == 0.5 and fb["bullets"]["chosen_more_share"] == 1.0
    assert fb["sycophancy"]["n_differ"] == 1


def test_telemetry_flags():
    profiles = {
        "paster": RaterProfile(paste_rate=1.0),
        "fast": RaterProfile(ms_per_word=5),
        "ok": RaterProfile(),
    }
    items, judgments, _ = simulate_pairwise(profiles, n_items=30, raters_per_item=3, seed=2)
    lens = {it.id: sum(len(c.as_text().split()) for c in it.candidates) for it in items}
    flags = telemetry_flags(judgments, lambda j: lens[j.item_id])
    kinds = {(f["rater"], f["flag"]) for f in flags}
    assert ("paster", "paste_dominant") in kinds and ("fast", "too_fast") in kinds
    assert not any(r == "ok" and f in ("paste_dominant", "too_fast") for r, f in kinds)
    # simulated rationales are templated: near-duplicates across raters are found
    assert any(f == "near_duplicate_rationale" for _, f in kinds)


def test_overlap_planning_scales_with_width():
    n_wide = overlap_items_for_alpha_ci(0.2, n_sims=60)
    n_narrow = overlap_items_for_alpha_ci(0.1, n_sims=60)
    assert 2.5 < n_narrow / n_wide < 6


def test_adjudication_routing():
    def pw(item, rater, score):
        return PairwiseJudgment.from_canonical(item, ("x", "y"), score, {"rater_id": rater})

    js = [pw("i1", "a", -3), pw("i1", "b", 3), pw("i1", "c", 0), pw("i2", "a", 2), pw("i2", "b", 2)]
    js += [
        StepsJudgment(
            item_id="s",
            candidate_id="c",
            steps=["1", "2"],
            verdicts=[1, -1],
            provenance={"rater_id": "a"},
        ),
        StepsJudgment(
            item_id="s",
            candidate_id="c",
            steps=["1", "2"],
            verdicts=[1, 1],
            provenance={"rater_id": "b"},
        ),
    ]
    queue = route_for_adjudication(LabelTable.from_judgments(js))
    assert [q["item_id"] for q in queue] == ["i1", "s"]
    assert any(r.startswith("winner_entropy 1.58") for r in queue[0]["reasons"])


def test_position_audit_corrects_for_testing_every_rater():
    # The audit found 49 of 3,801 raters flagged at raw p < 0.05 on a corpus with no position
    # bias. 400 fair raters with 20 labels each: raw p flags some by chance; Benjamini-Hochberg
    # q-values (checked against statsmodels' fdr_bh) flag none. (A biased rater with enough
    # labels is still flagged: test_position_audit_catches_biased_rater.)
    from statsmodels.stats.multitest import multipletests

    profiles = {f"fair{i}": RaterProfile(accuracy=0.7) for i in range(400)}
    _, judgments, _ = simulate_pairwise(profiles, n_items=4000, raters_per_item=2, seed=3)
    per = position_bias(judgments)["per_rater"]
    assert sum(s["p_value"] < 0.05 for s in per.values()) >= 5
    assert not any(s["flagged"] for s in per.values())
    ref = multipletests([s["p_value"] for s in per.values()], method="fdr_bh")[1]
    np.testing.assert_allclose([s["q_value"] for s in per.values()], ref, rtol=1e-12)
