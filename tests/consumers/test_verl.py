"""A preflab ``verl`` export, loaded and scored by verl 0.9.1's own code (issue 15 §3-4).

verl's ``RLHFDataset`` reads the parquet file, its ``collate_fn`` batches the rows, and the
reward function preflab ships (``preflab.verify.verl_reward.compute_score``, loaded the way verl
loads ``reward.custom_reward_function.path=pkg://...``) scores a mixed file: a math row (the
verifier), a reference row (exact match) and a preference row (a reward model by path).
"""

from __future__ import annotations

import math
import re

import pytest

from preflab.io.export import ExportOptions, export_project
from preflab.schema import Item
from preflab.store import db, transaction
from preflab.store.repo import add_item, create_project

HALF = {"task_id": "half", "kind": "math", "answer": r"\frac{1}{2}"}


@pytest.fixture
def mixed_export(tmp_path, sqlite_url):
    """A verl parquet export with one row of each route."""
    engine = db.open_db(sqlite_url)
    with transaction(engine) as s:
        project = create_project(s, "rl", kinds=["pairwise"])
        add_item(
            s,
            project,
            Item(
                id="m",
                prompt="Half of one?",
                candidates=[{"id": "c", "text": "1/2"}],
                metadata={"verifiable": "math", "verify_task": HALF},
            ),
        )
        add_item(
            s,
            project,
            Item(
                id="ref",
                prompt="Capital of France?",
                reference="Paris",
                candidates=[{"id": "c", "text": "Paris"}],
                metadata={"source": "geo-quiz"},
            ),
        )
        add_item(
            s,
            project,
            Item(
                id="pref",
                prompt="Write a haiku about rain.",
                candidates=[{"id": "c", "text": "Rain on the roof"}],
            ),
        )
    out = tmp_path / "verl"
    manifest = export_project(
        engine, "rl", ExportOptions(format="verl", out=out, file_format="parquet")
    )
    engine.dispose()
    return out, manifest


def _verl_batch(out, tokenizer, tmp_path):
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    config = OmegaConf.create(
        {
            "prompt_key": "prompt",
            "max_prompt_length": 128,
            "filter_overlong_prompts": False,
            "cache_dir": str(tmp_path / "verl-cache"),
            "truncation": "error",
        }
    )
    dataset = RLHFDataset(str(out / "train.parquet"), tokenizer, config)
    return len(dataset), collate_fn([dataset[i] for i in range(len(dataset))])


def test_rlhf_dataset_and_collate_fn_batch_every_row_with_the_routing_fields(
    consumers_path, mixed_export, tokenizer, tmp_path
):
    out, _ = mixed_export
    n, batch = _verl_batch(out, tokenizer, tmp_path)
    assert n == 3
    infos = {info["item_id"]: info for info in batch["extra_info"]}
    assert {k: (v["style"], v["verifier"]) for k, v in infos.items()} == {
        "m": ("rule", "preflab.verify:math"),
        "ref": ("rule", "preflab.verify:exact"),
        "pref": ("model", None),
    }
    assert infos["pref"]["prompt_text"] == "Write a haiku about rain."
    # verl 0.9.1 keeps the chat messages (its agent loop applies the chat template) and batches tensors
    assert [m[-1]["role"] for m in batch["raw_prompt"]] == ["user", "user", "user"]
    assert batch["dummy_tensor"].shape[0] == 3


def test_verls_default_reward_refuses_the_rows_the_shipped_function_scores(
    consumers_path, mixed_export, tokenizer, tmp_path, reward_model_dir
):
    from verl.utils.import_utils import load_extern_object
    from verl.utils.reward_score import default_compute_score

    out, _ = mixed_export
    _, batch = _verl_batch(out, tokenizer, tmp_path)
    # verl's own loader, as reward.custom_reward_function.path=pkg://preflab.verify.verl_reward does
    compute_score = load_extern_object("pkg://preflab.verify.verl_reward", "compute_score")
    answers = {
        "m": r"so the answer is \boxed{0.5}",
        "ref": " paris ",
        "pref": "Drops on the tin roof",
    }
    scores = {}
    for source, reward_model, info in zip(
        batch["data_source"], batch["reward_model"], batch["extra_info"], strict=True
    ):
        answer = answers[info["item_id"]]
        with pytest.raises(
            NotImplementedError
        ):  # what verl does without preflab's function (issue 15 §3)
            default_compute_score(source, answer, reward_model["ground_truth"], info)
        scores[info["item_id"]] = compute_score(
            data_source=source,
            solution_str=answer,
            ground_truth=reward_model["ground_truth"],
            extra_info=info,
            reward_model_path=str(reward_model_dir),
        )["score"]
    assert (scores["m"], scores["ref"]) == (1.0, 1.0)
    assert math.isfinite(scores["pref"])
    from preflab.verify.verl_reward import RewardModelScorer  # the same model, called directly

    assert scores["pref"] == RewardModelScorer(str(reward_model_dir)).score(
        "Write a haiku about rain.", "Drops on the tin roof"
    )


def test_wrong_answers_score_zero_and_a_preference_row_without_a_model_says_what_to_set(
    consumers_path,
):
    from preflab.verify.verl_reward import RoutingError, compute_score

    assert (
        compute_score(
            "x", r"\boxed{3}", r"\frac{1}{2}", {"style": "rule", "verifier": "preflab.verify:math"}
        )["score"]
        == 0.0
    )
    assert (
        compute_score("x", "Lyon", "Paris", {"style": "rule", "verifier": "preflab.verify:exact"})[
            "score"
        ]
        == 0.0
    )
    with pytest.raises(RoutingError, match="reward_model_path"):
        compute_score("x", "text", None, {"style": "model", "verifier": None, "prompt_text": "p"})
    with pytest.raises(RoutingError, match="extra_info.style"):
        compute_score("x", "text", None, {"split": "train"})


def test_the_card_shows_the_verl_config_lines_and_warns_about_unknown_data_sources(mixed_export):
    out, manifest = mixed_export
    card = (out / "README.md").read_text()
    block = re.search(r"## Training with verl.*?```\n(.*?)```", card, re.S).group(1).split()
    assert block == [
        "data.train_files=path/to/export/train.parquet",
        "reward.custom_reward_function.path=pkg://preflab.verify.verl_reward",
        "reward.custom_reward_function.name=compute_score",
        "+reward.custom_reward_function.reward_kwargs.reward_model_path=/path/to/reward-model",
    ]
    warnings = manifest["format_notes"]["warnings"]
    assert [w.split(" (")[0] for w in warnings] == ["data_source 'geo-quiz'", "data_source 'rl'"]
    assert manifest["format_notes"]["rows_by_style"] == {"rule": 2, "model": 1}
