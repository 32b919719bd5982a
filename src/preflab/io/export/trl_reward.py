"""``trl-reward``: the preference type plus ``margin`` for TRL's ``RewardTrainer``.

TRL reads an optional ``margin`` column and uses ``-log σ(r_chosen - r_rejected - margin)``
(TRL docs, "Reward Modeling", adding a margin to the loss:
https://huggingface.co/docs/trl/reward_trainer; Llama 2 paper §3.2.2). ``margin`` is the
resolved preference strength on the 0..3 scale (median strength of the winning raters; see
:mod:`.resolve`); scale it in the trainer if you want another range.
"""

from __future__ import annotations

from .trl_preference import TRLPreference


class TRLReward(TRLPreference):
    name = "trl-reward"
    description = "TRL reward modelling (prompt, chosen, rejected, margin): RewardTrainer"
    reference = "https://huggingface.co/docs/trl/reward_trainer"
    task_categories = ("text-classification",)
    margin = True
