"""``verl``: RL prompts for verl's ``RLHFDataset`` (PPO/GRPO), one row per item.

Format (verl docs, "Prepare Data for Post-Training":
https://verl.readthedocs.io/en/latest/preparation/prepare_data.html, and
``verl/utils/dataset/README.md``)::

    {"data_source": str, "prompt": [chat messages], "ability": str,
     "reward_model": {"style": "rule" | "model", "ground_truth": str | None},
     "extra_info": {"split": str, "index": int, "item_id": str}}

``style`` is ``"rule"`` for verifiable items (``metadata.verifiable``: code / sql / math) with
the verifier's ground truth (the math answer, or the task's JSON) and ``extra_info.verifier``
naming the verifier (``extra_info.verify_task``: the task's JSON); else ``"rule"`` with the item's hidden ``reference`` as ``ground_truth``
when it has one, else ``"model"`` (a reward model scores the rollout; ``ground_truth`` is null).
``data_source`` is the item's ``metadata.source`` or the project name (verl picks the reward
function by it); ``ability`` the item's first domain, else ``"general"``. With
``params={"require_reference": True}`` only items with a reference are exported.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pyarrow as pa

from ...schema.routing import rule_ground_truth, verifiable_route, verify_task
from .base import MESSAGES, Batch, ExportData, Exporter, ExportOptions, chunked, prompt_value

REWARD_MODEL = pa.struct([("style", pa.string()), ("ground_truth", pa.string())])
EXTRA_INFO = pa.struct([("split", pa.string()), ("index", pa.int64()), ("item_id", pa.string())])
#: with verifiable items in the export, ``extra_info`` also names the verifier and holds the whole
#: task as JSON (a math ``ground_truth`` is the bare answer, verl's convention, which would lose a
#: task's ``tolerance``); null elsewhere
EXTRA_INFO_VERIFIED = pa.struct([*EXTRA_INFO, ("verifier", pa.string()), ("verify_task", pa.string())])


class Verl(Exporter):
    name = "verl"
    description = "verl RL prompts (data_source, prompt, ability, reward_model, extra_info): PPO/GRPO"
    needs = frozenset()
    reference = "https://verl.readthedocs.io/en/latest/preparation/prepare_data.html"
    params = {"require_reference": False}
    task_categories = ("reinforcement-learning", "text-generation")

    def schema(self, data: ExportData, options: ExportOptions) -> pa.Schema:
        return pa.schema(
            [
                ("data_source", pa.string()),
                ("prompt", MESSAGES),
                ("ability", pa.string()),
                ("reward_model", REWARD_MODEL),
                ("extra_info", EXTRA_INFO_VERIFIED if _any_verifiable(data) else EXTRA_INFO),
            ]
        )

    def batches(self, data: ExportData, options: ExportOptions) -> Iterator[Batch]:
        items = list(data.items.values())
        if self.param(options, "require_reference"):
            items = [i for i in items if i.reference is not None]
        for rows in chunked(len(items)):
            part = items[rows.start : rows.stop]
            yield {
                "data_source": [str(i.metadata.get("source") or data.project) for i in part],
                "prompt": [prompt_value(i.prompt, True) for i in part],
                "ability": [i.domains[0] if i.domains else "general" for i in part],
                "reward_model": [_reward_model(i) for i in part],
                "extra_info": [_extra_info(i, options.split, rows.start + k) for k, i in enumerate(part)],
            }


def _reward_model(item) -> dict:
    """Verifiable items (see :mod:`preflab.schema.routing`) are scored by their verifier: rule
    style with the verifier's ground truth; else rule with the hidden reference, else a model."""
    if verifiable_route(item) is not None:
        return {"style": "rule", "ground_truth": rule_ground_truth(item)}
    return {"style": "rule" if item.reference is not None else "model", "ground_truth": item.reference}


def _any_verifiable(data: ExportData) -> bool:
    return any(verifiable_route(i) is not None for i in data.items.values())


def _extra_info(item, split: str, index: int) -> dict:
    info = {"split": split, "index": index, "item_id": item.id}
    route = verifiable_route(item)
    if route is not None:  # what preflab's compute_score routes by (preflab/verify/adapters.py)
        info["verifier"] = f"preflab.verify:{route}"
        task = verify_task(item)
        info["verify_task"] = json.dumps({"task_id": item.id, "kind": route, **task}, sort_keys=True) if task else None
    return info
