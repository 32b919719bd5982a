"""``trl-reward``: the preference type plus ``margin`` for TRL's ``RewardTrainer``.

TRL reads an optional ``margin`` column and uses ``-log σ(r_chosen - r_rejected - margin)``
(TRL docs, "Reward Modeling", adding a margin to the loss:
https://huggingface.co/docs/trl/reward_trainer; Llama 2 paper §3.2.2). ``margin`` is the
resolved preference strength on the 0..3 scale (median strength of the winning raters; see
:mod:`.resolve`); scale it in the trainer if you want another range.

No invented margins: a pair whose raters gave no strength (PandaLM, hh-rlhf, comparisons
without ``strength``) has none. TRL's collator (``trl/trainer/reward_trainer.py``, 1.16.0) turns
the margins of a batch into one tensor, so a null on one row fails the batch: the ``margin``
column is written only when every row has a real margin, and left out otherwise (the manifest's
``format_notes.margin`` says how many rows had one and why it was left out).
"""

from __future__ import annotations

from typing import Any

from .trl_preference import TRLPreference


class TRLReward(TRLPreference):
    name = "trl-reward"
    description = "TRL reward modelling (prompt, chosen, rejected, margin): RewardTrainer"
    reference = "https://huggingface.co/docs/trl/reward_trainer"
    task_categories = ("text-classification",)
    margin = "all"
    margin_rule = (
        "TRL's RewardTrainer needs a margin on every row of a batch or on none, so the column "
        "is left out rather than filled with a number nobody gave"
    )

    def usage(self, manifest: dict[str, Any]) -> list[str]:
        return ["## Training with TRL", "", *self.margin_card_lines(manifest)]
