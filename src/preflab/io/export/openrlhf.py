"""``openrlhf``: OpenRLHF reward-model / DPO data: ``prompt``, ``chosen``, ``rejected``, ``margin``.

OpenRLHF's ``RewardDataset`` reads ``--prompt_key``, ``--chosen_key``, ``--rejected_key``
columns and an optional ``margin`` (openrlhf/datasets/reward_dataset.py, ``preprocess_data``;
https://github.com/OpenRLHF/OpenRLHF). Train with ``--prompt_key prompt --chosen_key chosen
--rejected_key rejected``; conversational rows (message lists, concatenated as
``prompt + chosen``) need ``--apply_chat_template``. ``margin`` is the 0..3 strength.
"""

from __future__ import annotations

from .trl_preference import TRLPreference


class OpenRLHF(TRLPreference):
    name = "openrlhf"
    description = "OpenRLHF reward/DPO (prompt, chosen, rejected, margin): --prompt_key prompt --chosen_key chosen --rejected_key rejected"
    reference = "https://github.com/OpenRLHF/OpenRLHF/blob/main/openrlhf/datasets/reward_dataset.py"
    task_categories = ("text-classification",)
    margin = True
