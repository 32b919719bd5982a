"""Every train-layer command through the real CLI, on tiny models built from a config.

``rm train`` reads the PandaLM project from the database (it exports it first, so the model
card can name the export manifest's SHA-256), trains 2 steps, and writes model, tokenizer,
split and card; ``rm eval``, ``rm score``, ``bestofn`` and ``rl`` then use that model.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from preflab.cli import app
from preflab.train.data import read_pairs

pytestmark = pytest.mark.train
MAX_LENGTH = 48


def run(*args: str) -> str:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output + repr(result.exception)
    return result.stdout


def flat(output: str) -> str:
    """Rich wraps long error lines at the terminal width: compare words, not line breaks."""
    return " ".join(output.split())


@pytest.fixture(scope="module")
def trained(tmp_path_factory, project_db, backbone_dir) -> Path:
    out = tmp_path_factory.mktemp("rm") / "model"
    run(
        "rm",
        "train",
        "pandalm",
        "--db",
        project_db,
        "--out",
        out,
        "--backbone",
        backbone_dir,
        "--max-length",
        MAX_LENGTH,
        "--max-steps",
        2,
        "--batch-size",
        4,
        "--seed",
        0,
    )
    return out


def test_rm_train_writes_model_tokenizer_split_and_card(trained, tokenizer):
    for name in (
        "config.json",
        "model.safetensors",
        "tokenizer.json",
        "README.md",
        "preflab_rm.json",
        "split/train.jsonl",
        "split/heldout.jsonl",
        "data/manifest.json",
    ):
        assert (trained / name).is_file(), name
    card = json.loads((trained / "preflab_rm.json").read_text())
    manifest_bytes = (trained / "data" / "manifest.json").read_bytes()
    assert card["data"]["export_manifest_sha256"] == hashlib.sha256(manifest_bytes).hexdigest()
    manifest = json.loads(manifest_bytes)
    assert card["data"]["raters"] == manifest["raters"] == {"in": 3, "out": 3}
    assert card["data"]["rubrics"] == manifest["rubrics"]
    assert (
        card["training"]["steps"] == 2
        and card["training"]["train_loss"] == card["training"]["train_loss"]
    )
    assert card["training_arguments"]["bf16"] is False
    assert card["data"]["export_manifest_sha256"] in (trained / "README.md").read_text()


def test_rm_train_splits_by_prompt_and_keeps_every_pair(trained):
    card = json.loads((trained / "preflab_rm.json").read_text())
    train, held = (
        read_pairs(trained / "split/train.jsonl"),
        read_pairs(trained / "split/heldout.jsonl"),
    )
    assert not {p.prompt for p in train} & {p.prompt for p in held}
    assert (
        len(train) + len(held)
        == card["data"]["pairs"]
        == card["split"]["train_pairs"] + card["split"]["heldout_pairs"]
    )
    assert card["split"]["heldout_prompts"] == len({p.prompt for p in held}) > 0
    # the project's metadata travels with the pairs (for the eval strata)
    assert all(p.item_id and p.domain and p.n_raters == 3 for p in held)


def test_rm_train_balances_chosen_longer_and_shorter_by_default(trained, tokenizer):
    from preflab.train.encode import token_length

    card = json.loads((trained / "preflab_rm.json").read_text())
    train = read_pairs(trained / "split/train.jsonl")
    length = token_length(tokenizer)
    longer = sum(length(p.chosen) > length(p.rejected) for p in train)
    shorter = sum(length(p.chosen) < length(p.rejected) for p in train)
    # the default closes half the gap between the two sides (repeats of the rarer side)
    repeated = card["split"]["length_balance"]["repeated"]
    assert card["split"]["length_balance"] == {
        "enabled": True,
        "strength": 0.5,
        "repeated": repeated,
    }
    assert repeated == round(0.5 * abs(longer - shorter)) > 0  # the fixture has a side to repeat
    assert len(set(train)) == len(
        train
    )  # the split lists each pair once; repeats are in training only


def test_rm_train_counts_truncated_pairs(trained, tokenizer):
    card = json.loads((trained / "preflab_rm.json").read_text())
    train = read_pairs(trained / "split/train.jsonl")
    n = lambda t: len(tokenizer.encode(t, add_special_tokens=False))  # noqa: E731
    over = sum(n(p.prompt) + max(n(p.chosen), n(p.rejected)) + 1 > MAX_LENGTH for p in train)
    assert card["truncated_pairs"] == over > 0


def test_rm_train_from_an_export_directory_with_length_parity(tmp_path, export_dir, backbone_dir):
    out = tmp_path / "model"
    output = run(
        "rm",
        "train",
        export_dir,
        "--out",
        out,
        "--backbone",
        backbone_dir,
        "--max-steps",
        1,
        "--batch-size",
        2,
        "--length-parity",
        "--max-length",
        64,
    )
    card = json.loads((out / "preflab_rm.json").read_text())
    assert (
        card["split"]["length_parity"]["enabled"] and card["split"]["length_parity"]["dropped"] > 0
    )
    assert f"dropped {card['split']['length_parity']['dropped']} training pairs" in output
    assert card["data"]["source"] == str(export_dir) and card["data"]["project"] == "pandalm"


def test_rm_train_on_an_unknown_source_says_what_to_pass(tmp_path, project_db):
    result = CliRunner().invoke(
        app, ["rm", "train", "no-such-project", "--db", project_db, "--out", str(tmp_path / "m")]
    )
    assert result.exit_code == 2
    assert "neither an export directory nor a project" in flat(result.output)


def test_rm_eval_json_and_html(trained, tmp_path):
    html_path = tmp_path / "report.html"
    report = json.loads(run("rm", "eval", trained, "--json", "--out", html_path))
    held = read_pairs(trained / "split/heldout.jsonl")
    assert report["n_heldout"] == len(held)
    assert set(report["methods"]) == {"reward_model", "longer_wins", "shorter_wins", "tfidf_lr"}
    for method in report["methods"].values():
        assert 0 <= method["low"] <= method["accuracy"] <= method["high"] <= 1
        assert set(method["strata"]) == {"length", "domain", "agreement"}
    assert set(report["methods"]["reward_model"]["strata"]["domain"]) <= {p.domain for p in held}
    assert 0 <= report["calibration"]["reward_model"]["ece"] <= 0.5
    html = html_path.read_text()
    assert html.count("<svg") >= 5 and "<script" not in html and "cdn" not in html.lower()
    assert "Calibration" in html and "TF-IDF + LR" in html
    assert set(report["versus"]) == {"longer_wins", "shorter_wins", "tfidf_lr"}
    assert "exact McNemar" in html
    text = flat(run("rm", "eval", trained))
    assert "reward model vs TF-IDF + LR:" in text and "McNemar p =" in text


def test_rm_score_writes_rollouts_with_rewards(trained, tmp_path):
    src = tmp_path / "answers.jsonl"
    rows = [
        {"prompt": "Rewrite the sentence", "response": "Please let me know.", "model": "v2"},
        {"prompt": [{"role": "user", "content": "Rewrite"}], "completion": "let me know"},
        {"prompt": "Rewrite the sentence", "response": "Please let me know.", "model": "v1"},
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "rollouts.jsonl"
    run("rm", "score", trained, src, "--out", out)
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    # issue 31: the policy's `model` stays (the file still feeds `eval create`); the scorer is
    # `reward_model`; an answer given twice is scored once, with the same reward
    assert [set(r) for r in scored] == [
        {"prompt", "response", "reward", "model", "reward_model"},
        {"prompt", "response", "reward", "reward_model"},
        {"prompt", "response", "reward", "model", "reward_model"},
    ]
    assert [r.get("model") for r in scored] == ["v2", None, "v1"]
    assert scored[1]["prompt"] == "user: Rewrite" and scored[0]["reward_model"] == str(trained)
    assert scored[0]["reward"] == scored[2]["reward"]
    from preflab.train.score import RewardScorer

    assert scored[0]["reward"] == pytest.approx(
        RewardScorer(trained).score(["Rewrite the sentence"], ["Please let me know."])[0]
    )


def test_rm_score_reports_the_bad_line(trained, tmp_path):
    src = tmp_path / "bad.jsonl"
    src.write_text('{"prompt": "a", "response": "b"}\n{"prompt": "a"}\n')
    result = CliRunner().invoke(
        app, ["rm", "score", str(trained), str(src), "--out", str(tmp_path / "r.jsonl")]
    )
    assert result.exit_code == 2 and f"{src}:2: response: missing" in result.output.replace(
        "\n", ""
    )
    assert not (tmp_path / "r.jsonl").exists()


def test_bestofn_keeps_the_best_candidate_and_a_length_penalty_changes_it(trained, tmp_path):
    from preflab.train.score import RewardScorer

    scorer = RewardScorer(trained)
    answers = [
        "let me know",
        "Please let me know if you have any questions about my rate or the scope .",
    ]
    rewards = scorer.score(["Rewrite"] * 2, answers)
    src = tmp_path / "cands.jsonl"
    src.write_text(
        "".join(json.dumps({"prompt": "Rewrite", "response": a}) + "\n" for a in answers)
    )
    run("bestofn", trained, "--candidates", src, "--out", tmp_path / "plain")
    best = json.loads((tmp_path / "plain" / "train.jsonl").read_text())
    assert best == {"prompt": "Rewrite", "completion": answers[rewards.index(max(rewards))]}
    # a penalty larger than the reward gap per extra token makes the shorter answer win
    gap = abs(rewards[1] - rewards[0]) + 1.0
    run("bestofn", trained, "--candidates", src, "--out", tmp_path / "pen", "--length-penalty", gap)
    assert json.loads((tmp_path / "pen" / "train.jsonl").read_text())["completion"] == answers[0]
    scores = json.loads((tmp_path / "pen" / "scores.jsonl").read_text())
    assert scores["n_candidates"] == 2


def test_bestofn_samples_candidates_from_a_local_policy(trained, policy_dir, tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "Rewrite the sentence"}\n{"prompt": "Please let me know"}\n')
    run(
        "bestofn",
        trained,
        "--policy",
        policy_dir,
        "--prompts",
        prompts,
        "-n",
        3,
        "--max-new-tokens",
        5,
        "--out",
        tmp_path / "sampled",
    )
    rows = [
        json.loads(line) for line in (tmp_path / "sampled" / "train.jsonl").read_text().splitlines()
    ]
    assert [r["prompt"] for r in rows] == ["Rewrite the sentence", "Please let me know"]
    scores = [
        json.loads(line)
        for line in (tmp_path / "sampled" / "scores.jsonl").read_text().splitlines()
    ]
    assert all(s["n_candidates"] == 3 for s in scores)


def test_rl_runs_two_grpo_steps_with_a_kl_anchor_and_reports_reward_vs_kl(
    trained, policy_dir, tmp_path
):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        "".join(
            json.dumps({"prompt": p}) + "\n"
            for p in [
                "Rewrite the sentence",
                "Please let me know",
                "If you have any questions",
                "my rate",
            ]
        )
    )
    out = tmp_path / "rl"
    report = json.loads(
        run(
            "rl",
            "--policy",
            policy_dir,
            "--reward-model",
            trained,
            "--prompts",
            prompts,
            "--out",
            out,
            "--steps",
            2,
            "--beta",
            0.1,
            "--num-generations",
            2,
            "--batch-size",
            2,
            "--max-completion-length",
            6,
            "--learning-rate",
            1e-3,
            "--json",
        )
    )
    assert report["beta"] == 0.1 and len(report["steps"]) == 2
    for step in report["steps"]:
        assert step["kl"] is not None and step["kl"] >= 0  # logged only when beta > 0
        assert step["reward"] == step["reward"] and step["length"] > 0
    assert report["reward"] == {
        "mode": "rm",
        "functions": ["reward_model", "language_drift"],
        "weights": [1.0, 0.0],
    }
    assert all(s["entropy"] > 0 and s["language_drift"] is not None for s in report["steps"])
    assert (out / "config.json").is_file() and (out / "rl_report.html").read_text().count(
        "<svg"
    ) == 5


def test_a_failed_rm_train_leaves_nothing_at_out(tmp_path, export_dir):
    out = tmp_path / "model"
    result = CliRunner().invoke(
        app,
        ["rm", "train", str(export_dir), "--out", str(out), "--backbone", str(tmp_path / "none")],
    )
    assert result.exit_code == 2 and "not a Hugging Face model directory" in flat(result.output)
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_rm_train_refuses_to_overwrite_a_directory_it_did_not_write(
    tmp_path, export_dir, backbone_dir
):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    result = CliRunner().invoke(
        app, ["rm", "train", str(export_dir), "--out", str(out), "--backbone", str(backbone_dir)]
    )
    assert result.exit_code == 2 and "not an rm train output" in flat(result.output)
    assert (out / "keep.txt").read_text() == "mine"


def test_rm_eval_of_a_model_trained_from_an_export_directory_has_domain_and_agreement_strata(
    tmp_path, export_dir, backbone_dir, pandalm_records
):
    out = tmp_path / "model"
    run("rm", "train", export_dir, "--out", out, "--backbone", backbone_dir, "--max-steps", 1)
    report = json.loads(run("rm", "eval", out, "--json"))
    strata = report["methods"]["reward_model"]["strata"]
    domains = {r["motivation_app"].lower() for r in pandalm_records}
    assert set(strata["domain"]) <= domains and "none" not in strata["domain"]
    assert (
        set(strata["agreement"]) <= {"unanimous", "split"} and "unknown" not in strata["agreement"]
    )
    assert sum(s["n"] for s in strata["agreement"].values()) == report["n_heldout"]


def test_export_pair_metadata_follows_the_rows_of_the_export(export_dir, pandalm_records):
    from preflab.train.data import read_export

    pairs = read_export(export_dir).pairs
    domain_of = {r["idx"]: r["motivation_app"].lower() for r in pandalm_records}
    assert all(p.item_id and p.n_raters == 3 and 0.5 < p.agreement <= 1 for p in pairs)
    assert {p.domain for p in pairs} <= set(domain_of.values())


def test_a_pair_metadata_file_that_does_not_match_the_rows_is_refused(tmp_path, export_dir):
    import shutil

    from preflab.train.data import PairDataError, read_export

    copy = tmp_path / "reward"
    shutil.copytree(export_dir, copy)
    lines = (copy / "pair_metadata.jsonl").read_text().splitlines()
    (copy / "pair_metadata.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(PairDataError, match=r"pair_metadata.jsonl: \d+ rows for \d+ pairs"):
        read_export(copy)


@pytest.fixture(scope="module")
def trained_mean(tmp_path_factory, project_db, backbone_dir) -> Path:
    out = tmp_path_factory.mktemp("rm-mean") / "model"
    run(
        "rm", "train", "pandalm", "--db", project_db, "--out", out, "--backbone", backbone_dir,
        "--max-length", MAX_LENGTH, "--max-steps", 2, "--batch-size", 4, "--pooling", "mean",
        "--max-prompt-length", 4,
    )  # fmt: skip
    return out


def test_rm_train_with_mean_pooling_records_it_and_every_command_reads_it_back(trained_mean):
    import torch
    from transformers import AutoModel

    from preflab.train.pooling import MeanPooledRewardModel
    from preflab.train.score import RewardScorer

    assert json.loads((trained_mean / "config.json").read_text())["preflab_pooling"] == "mean"
    assert (
        json.loads((trained_mean / "preflab_rm.json").read_text())["settings"]["pooling"] == "mean"
    )
    scorer = RewardScorer(trained_mean)
    assert isinstance(scorer.model, MeanPooledRewardModel)
    # the reward by hand: the backbone's last hidden states, averaged over the text's tokens
    # (no padding counted), through the saved linear head
    from safetensors.torch import load_file

    weights = load_file(trained_mean / "model.safetensors")
    backbone = AutoModel.from_pretrained(str(trained_mean)).eval()
    backbone.load_state_dict(
        {k.removeprefix("backbone."): v for k, v in weights.items() if k.startswith("backbone.")}
    )
    short, long = ("Rewrite this", "ok"), ("Rewrite the sentence please", "Please let me know now.")
    by_hand = []
    for prompt, response in (short, long):
        ids = torch.tensor(
            [scorer.tokenizer(prompt, response)["input_ids"] + [scorer.tokenizer.eos_token_id]]
        )
        with torch.no_grad():
            hidden = backbone(input_ids=ids).last_hidden_state[0]
        by_hand.append(
            float(hidden.mean(0) @ weights["score.weight"][0] + weights["score.bias"][0])
        )
    together = scorer.score([short[0], long[0]], [short[1], long[1]])  # padded to one length
    alone = scorer.score([short[0]], [short[1]])
    assert together == pytest.approx(by_hand, abs=1e-5)
    assert alone[0] == pytest.approx(together[0], abs=1e-5)
    assert by_hand[0] != pytest.approx(by_hand[1], abs=1e-6)


def test_scoring_caps_the_prompt_as_training_did(trained_mean):
    from preflab.train.score import RewardScorer

    scorer = RewardScorer(trained_mean)
    card = json.loads((trained_mean / "preflab_rm.json").read_text())
    assert card["settings"]["max_prompt_length"] == scorer.max_prompt_length == 4
    long_prompt = "Once upon a time there was a sentence. Rewrite the sentence please"
    last_four = scorer.tokenizer.convert_tokens_to_string(
        scorer.tokenizer.tokenize(long_prompt)[-4:]
    )
    rewards = scorer.score([long_prompt, last_four, "Rewrite"], ["Please let me know."] * 3)
    assert rewards[0] == pytest.approx(rewards[1], abs=1e-6)
    assert rewards[0] != pytest.approx(rewards[2], abs=1e-6)


def test_rm_eval_reads_a_mean_pooled_model(trained_mean):
    report = json.loads(run("rm", "eval", trained_mean, "--json"))
    assert report["n_heldout"] == len(read_pairs(trained_mean / "split/heldout.jsonl"))
    assert 0 <= report["methods"]["reward_model"]["accuracy"] <= 1


def test_rm_train_refuses_an_unknown_pooling(tmp_path, project_db, backbone_dir):
    result = CliRunner().invoke(
        app,
        ["rm", "train", "pandalm", "--db", project_db, "--out", str(tmp_path / "m"),
         "--backbone", str(backbone_dir), "--pooling", "max"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--pooling: 'max' is not one of head, mean" in flat(result.output)
    assert not (tmp_path / "m").exists()


def test_a_train_share_keeps_the_heldout_split_and_trains_on_part_of_the_prompts(
    tmp_path, export_dir, backbone_dir
):
    from preflab.train.data import read_export
    from preflab.train.reward_model import RMSettings, train_reward_model

    settings = RMSettings(max_length=MAX_LENGTH, max_steps=1, batch_size=4, progress=False)
    whole = train_reward_model(
        read_export(export_dir), tmp_path / "whole", backbone=backbone_dir, settings=settings
    )
    part = train_reward_model(
        read_export(export_dir),
        tmp_path / "part",
        backbone=backbone_dir,
        settings=settings,
        train_share=0.5,
    )
    assert read_pairs(tmp_path / "part/split/heldout.jsonl") == read_pairs(
        tmp_path / "whole/split/heldout.jsonl"
    )
    part_train = read_pairs(tmp_path / "part/split/train.jsonl")
    whole_prompts = {p.prompt for p in read_pairs(tmp_path / "whole/split/train.jsonl")}
    assert {p.prompt for p in part_train} < whole_prompts
    assert len({p.prompt for p in part_train}) == round(len(whole_prompts) * 0.5)
    assert part.card["split"]["train_share"] == 0.5 and whole.card["split"]["train_share"] == 1.0
    assert part.card["split"]["train_pairs"] == len(part_train)
