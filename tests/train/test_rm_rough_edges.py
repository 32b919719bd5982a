"""Issue 31, the reward-model loop: each distinct answer is scored once, a scored file keeps its
policy's ``model``, too few pairs are said out loud, and the printed figures read as numbers
people use (no ``-0.000``, whole pairs, a mixed best-of-N named as such)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from preflab.train.cli import _best_of, _signed
from preflab.train.evaluation import paired
from preflab.train.reward_model import (
    MIN_HELDOUT_PAIRS,
    MIN_TRAIN_PAIRS,
    heldout_warning,
    small_sample_warnings,
)


@pytest.fixture(scope="module")
def scorer_dir(tmp_path_factory, tokenizer, make_tiny_reward_model) -> Path:
    path = tmp_path_factory.mktemp("rm")
    make_tiny_reward_model().save_pretrained(path)
    tokenizer.save_pretrained(path)
    (path / "preflab_rm.json").write_text(json.dumps({"settings": {"max_length": 64}}))
    return path


def test_each_distinct_answer_is_encoded_once_and_rewards_keep_their_order(scorer_dir):
    from preflab.train.score import RewardScorer

    scorer = RewardScorer(scorer_dir, device="cpu")
    prompts = ["p1", "p1", "p2", "p1", "p2"]
    answers = ["a", "b", "a", "a", "a"]
    calls: list[int] = []
    rewards = scorer.score(prompts, answers, batch_size=2, progress=calls.append)
    assert sum(calls) == 3 == scorer.distinct(prompts, answers)  # (p1,a) (p1,b) (p2,a)
    alone = [scorer.score([p], [a])[0] for p, a in zip(prompts, answers, strict=True)]
    assert rewards == pytest.approx(alone, abs=1e-5)
    assert rewards[0] == rewards[3] and rewards[2] == rewards[4]
    assert len({round(r, 6) for r in rewards}) >= 2, "different answers, different rewards"


def test_score_rollouts_keeps_the_policy_model_and_adds_the_reward_model(scorer_dir, tmp_path):
    from preflab.train.score import RewardScorer, read_responses, score_rollouts

    src = tmp_path / "rollouts.jsonl"
    src.write_text(
        '{"prompt": "q", "response": "a", "model": "policy-v2", "task_id": "t1"}\n'
        '{"prompt": "q", "completion": "b"}\n'
    )
    rows = score_rollouts(RewardScorer(scorer_dir, device="cpu"), read_responses(src))
    assert rows[0]["model"] == "policy-v2" and rows[0]["task_id"] == "t1"
    assert rows[0]["reward_model"] == str(scorer_dir) and "model" not in rows[1]
    assert set(rows[1]) == {"prompt", "response", "reward", "reward_model"}


def test_too_few_pairs_are_named_with_the_fix():
    notes = small_sample_warnings(163, 16, 6)
    assert len(notes) == 2
    assert "only 16 training pairs of the 163" in notes[0] and "--no-length-gate" in notes[0]
    assert "only 6 held-out pairs" in notes[1] and "wide" in notes[1]
    assert small_sample_warnings(1000, MIN_TRAIN_PAIRS, MIN_HELDOUT_PAIRS) == []
    assert heldout_warning(MIN_HELDOUT_PAIRS - 1) is not None
    assert heldout_warning(0) is not None


def test_printed_differences_never_read_minus_zero():
    assert _signed(-0.0) == "0.000" and _signed(-0.0004) == "0.000"
    assert _signed(0.125) == "+0.125" and _signed(-0.25) == "-0.250"
    assert _signed(None) == "–"


def test_paired_counts_whole_pairs_beside_the_half_point_sums():
    a = np.array([1, 1, 0, 0.5, 1, 0.5])
    b = np.array([0, 1, 1, 0, 0.5, 0.5])
    v = paired(a, b)
    assert (v["a_right_b_wrong"], v["b_right_a_wrong"], v["one_side_tied"]) == (1, 1, 2)
    assert v["a_only"] == 2.0 and v["b_only"] == 1.0  # the half points, as documented


def test_best_of_names_a_mixed_n():
    assert _best_of([{"n_candidates": 4}, {"n_candidates": 4}]) == "best-of-4"
    assert _best_of([{"n_candidates": 2}, {"n_candidates": 12}]) == "best-of-2..12"
