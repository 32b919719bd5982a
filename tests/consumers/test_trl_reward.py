"""``trl-reward`` and TRL 1.16's ``DataCollatorForPreference`` (the RewardTrainer's collator).

The collator builds one margin tensor per batch (``trl/trainer/reward_trainer.py``): a null
margin on one row fails the batch, so preflab writes ``margin`` on every row or on none.
"""

from __future__ import annotations

import json

import pytest
from datasets import load_dataset
from trl.trainer.reward_trainer import DataCollatorForPreference

from preflab.io.export import ExportOptions, export_project
from preflab.io.importer import import_files
from preflab.store import db, transaction
from preflab.store.repo import create_project


def _export(tmp_path, sqlite_url, records):
    engine = db.open_db(sqlite_url)
    with transaction(engine) as s:
        create_project(s, "p", kinds=["pairwise"])
    source = tmp_path / "c.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    import_files(engine, "p", [source])
    out = tmp_path / "out"
    export_project(engine, "p", ExportOptions(format="trl-reward", out=out))
    engine.dispose()
    return load_dataset("json", data_files=str(out / "train.jsonl"), split="train")


def _collate(rows):
    examples = [
        {
            "chosen_ids": [1, 2, 3],
            "rejected_ids": [4, 5],
            **({"margin": r["margin"]} if "margin" in r else {}),
        }
        for r in rows
    ]
    return DataCollatorForPreference(pad_token_id=0)(examples)


@pytest.mark.parametrize(
    ("strengths", "margins"), [((3, 1), [3.0, 1.0]), ((3, None), None), ((None, None), None)]
)
def test_the_collator_gets_real_margins_on_every_row_or_none(
    tmp_path, sqlite_url, strengths, margins
):
    records = [
        {"prompt": f"Q{k}?", "chosen": "yes", "rejected": "no", **({"strength": s} if s else {})}
        for k, s in enumerate(strengths)
    ]
    rows = list(_export(tmp_path, sqlite_url, records))
    batch = _collate(rows)
    assert (batch["margin"].tolist() if "margin" in batch else None) == margins
    assert batch["input_ids"].shape[0] == 4


def test_a_null_margin_would_fail_trls_collator():
    """Why a partly known margin is left out of ``trl-reward``."""
    with pytest.raises((TypeError, RuntimeError)):
        DataCollatorForPreference(pad_token_id=0)(
            [
                {"chosen_ids": [1], "rejected_ids": [2], "margin": 3.0},
                {"chosen_ids": [1], "rejected_ids": [2], "margin": None},
            ]
        )
