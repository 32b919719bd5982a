"""``preflab rl --reward verifier|rm|mix``: the verifier and format rewards as TRL reward
functions, the monitors (language drift, zero-variance groups, entropy) on constructed data, and
GRPO runs on CPU with a tiny policy and the bundled math tasks."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from preflab.cli import app
from preflab.train.rl import overoptimisation, read_rl_prompts
from preflab.train.rl_monitors import (
    dominant_script,
    language_drift,
    mean_language_drift,
    token_entropy,
    zero_variance_share,
)
from preflab.train.rl_rewards import (
    LanguageDriftMonitor,
    VerifierReward,
    format_reward,
    has_format,
)
from preflab.verify.rollouts import load_tasks_with_meta

STAGES = Path(__file__).resolve().parents[2] / "examples" / "stages"


@pytest.fixture
def math_tasks(tmp_path) -> Path:
    rows = [
        line
        for line in (STAGES / "tasks.jsonl").read_text().splitlines()
        if json.loads(line)["kind"] == "math"
    ]
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(rows) + "\n")
    return path


# --- monitors on constructed completions ---------------------------------------------------


def test_language_drift_rises_with_foreign_script_text():
    prompt = "What is 1/3 + 1/4? Put the final answer in \\boxed{}."
    english = "The sum is \\boxed{7/12}."
    assert language_drift(prompt, english) == 0.0
    # digits, punctuation and LaTeX are not letters: a bare answer never drifts
    assert language_drift(prompt, "\\boxed{7/12} = 0.583") == 0.0
    half = "sum сумма"  # 3 Latin letters, 5 Cyrillic
    assert language_drift(prompt, half) == pytest.approx(5 / 8)
    assert language_drift(prompt, "Ответ: 7/12") == 1.0
    assert language_drift(prompt, "答案是 7/12") == 1.0
    drifts = [
        mean_language_drift([prompt] * 4, [english] * (4 - k) + ["Ответ 7/12"] * k)
        for k in range(5)
    ]
    assert drifts == sorted(drifts) and drifts[0] == 0.0 and drifts[-1] == 1.0
    # the prompt's script is the reference: a Russian prompt answered in Russian does not drift
    assert language_drift("Сколько будет 2+3?", "Ответ: 5") == 0.0
    assert language_drift("Сколько будет 2+3?", "The answer is 5") == 1.0
    # Japanese mixes kanji and kana: one script; fullwidth Latin is Latin
    assert language_drift("答えは何ですか", "答えはカタカナです") == 0.0
    assert dominant_script("ＡＢＣ abc") == "LATIN"
    assert language_drift("12 + 3", "Ответ") == 0.0  # a prompt without letters has no script


def test_zero_variance_share_is_one_when_every_group_is_flat_and_matches_trl():
    import torch

    assert zero_variance_share([0, 0, 0, 0, 1, 1, 1, 1], 4) == 1.0
    assert zero_variance_share([0.5] * 8, 2) == 1.0
    assert zero_variance_share([0, 1, 0, 1, 1, 0, 0, 0], 4) == 0.0
    assert zero_variance_share([0, 1, 1, 1, 1, 1], 2) == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="groups of 4"):
        zero_variance_share([0, 1, 0], 4)
    # TRL's definition (GRPOTrainer: std of each group's rewards is 0)
    rewards = [0.0, 1.0, 1.0, 1.0, 0.2, 0.2, 0.0, 0.0, 3.0]
    grouped = torch.tensor(rewards).view(-1, 3)
    trl = torch.isclose(grouped.std(dim=1), torch.zeros(3)).float().mean().item()
    assert zero_variance_share(rewards, 3) == pytest.approx(trl)


def test_entropy_from_logits():
    import torch
    from trl.trainer.utils import entropy_from_logits

    vocab = 7
    assert token_entropy(torch.zeros(2, 3, vocab)) == pytest.approx(math.log(vocab))
    peaked = torch.full((1, 2, vocab), -1e4)
    peaked[..., 0] = 0
    assert token_entropy(peaked) == pytest.approx(0.0, abs=1e-9)
    logits = torch.randn(2, 5, vocab, generator=torch.Generator().manual_seed(0))
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 0, 0, 0, 0]])
    expected = (entropy_from_logits(logits) * mask).sum() / mask.sum()
    assert token_entropy(logits, mask) == pytest.approx(expected.item(), rel=1e-5)
    # sharpening the distribution lowers it: the collapse the report watches for
    assert token_entropy(logits * 4, mask) < token_entropy(logits, mask)


def test_the_report_reads_the_monitors_trl_logs():
    log = [
        {
            "step": s,
            "reward": 0.1 * s,
            "kl": 0.01 * s,
            "completions/mean_length": 10 + s,
            "entropy": 2.0 - 0.5 * s,
            "frac_reward_zero_std": 1.0 - 0.25 * s,
            "rewards/verifier/mean": 0.1 * s,
            "rewards/format/mean": 0.5,
            "rewards/language_drift/mean": 0.2 * s,
        }
        for s in (1, 2, 3)
    ] + [{"train_runtime": 1.0, "step": 3}]
    report = overoptimisation(log, beta=0.04)
    assert [s["entropy"] for s in report["steps"]] == [1.5, 1.0, 0.5]
    assert [s["zero_variance_share"] for s in report["steps"]] == [0.75, 0.5, 0.25]
    assert report["steps"][2]["language_drift"] == pytest.approx(0.6)
    assert report["steps"][0]["rewards"] == {"verifier": 0.1, "format": 0.5}
    assert report["trend"]["entropy"] == -1.0
    assert report["monitors"]["language_drift"]["last"] == pytest.approx(0.6)


# --- reward functions ---------------------------------------------------------------------


def test_verifier_and_format_rewards_on_constructed_completions(math_tasks):
    tasks, _ = load_tasks_with_meta(math_tasks)
    verifier = VerifierReward(tasks)
    ids = ["math/fraction", "math/fraction", "math/interval", "math/interval"]
    completions = ["So \\boxed{7/12}.", "So \\boxed{1/2}.", "answer: (-2, 3]", "x is between"]
    assert verifier(["p"] * 4, completions, task_id=ids) == [1.0, 0.0, 1.0, 0.0]
    assert format_reward(tasks)(["p"] * 4, completions, task_id=ids) == [1.0, 1.0, 1.0, 0.0]
    # chat completions (TRL hands conversational ones as message lists)
    chat = [[{"role": "assistant", "content": "\\boxed{\\frac{7}{12}}"}]]
    assert verifier(["p"], chat, task_id=["math/fraction"]) == [1.0]
    assert has_format("code", "```python\nx = 1\n```") and not has_format("code", "x = 1")
    assert has_format("sql", "SELECT 1") and not has_format("sql", "the table")
    drift = LanguageDriftMonitor()(["What is it?", "What is it?"], ["It is 5", "Это 5"])
    assert drift == [0.0, 1.0]


def test_prompts_name_their_tasks(math_tasks, tmp_path):
    tasks, meta = load_tasks_with_meta(math_tasks)
    prompts = tmp_path / "grpo.jsonl"
    prompts.write_text(
        json.dumps({"task_id": "math/fraction"})
        + "\n"
        + json.dumps({"prompt": "own", "metadata": {"task_id": "math/surd"}})
        + "\n"
    )
    rows = read_rl_prompts(prompts, tasks, {t: m.prompt for t, m in meta.items()})
    assert [(r.prompt[:10], r.task_id) for r in rows] == [
        ("What is 1/", "math/fraction"),
        ("own", "math/surd"),
    ]
    prompts.write_text(json.dumps({"prompt": "x"}) + "\n" + json.dumps({"task_id": "nope"}) + "\n")
    with pytest.raises(ValueError) as info:
        read_rl_prompts(prompts, tasks)
    assert f"{prompts}:1: task_id: missing" in str(info.value)
    assert f"{prompts}:2: task_id: 'nope' is not a task" in str(info.value)


# --- GRPO on CPU -------------------------------------------------------------------------

GRPO_ARGS = ["--steps", "2", "--num-generations", "2", "--batch-size", "4"]
GRPO_ARGS += ["--max-completion-length", "6", "--learning-rate", "1e-3", "--beta", "0.1", "--json"]


def _run(*args) -> dict:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_rl_against_the_verifier_on_the_bundled_math_tasks(policy_dir, math_tasks, tmp_path):
    out = tmp_path / "rl"
    report = _run(
        "rl", "--reward", "verifier", "--policy", policy_dir, "--tasks", math_tasks,
        "--prompts", math_tasks, "--out", out, *GRPO_ARGS,
    )  # fmt: skip
    # math/choice is passed by the constant \boxed{1}: never optimised on
    assert report["guessable_left_out"] == {"math/choice": ["constant '1' (boxed)"]}
    assert report["prompts"] == 4 and report["tasks"] == 4
    assert report["reward"] == {
        "mode": "verifier",
        "functions": ["verifier", "format", "language_drift"],
        "weights": [1.0, 0.1, 0.0],
    }
    assert len(report["steps"]) == 2
    for step in report["steps"]:
        for key in ("reward", "kl", "entropy", "length", "zero_variance_share", "language_drift"):
            assert step[key] is not None and step[key] >= 0, key
        assert set(step["rewards"]) == {"verifier", "format"}
        # the random tiny policy never writes a marked answer: every group is flat at 0
        assert step["rewards"]["verifier"] == 0.0 and step["zero_variance_share"] == 1.0
        assert step["entropy"] > 0
    html = (out / "rl_report.html").read_text()
    assert html.count("<svg") == 5 and "language drift" in html and "math/choice" in html
    assert json.loads((out / "rl_report.json").read_text())["guessable_left_out"]
    assert (out / "config.json").is_file()


def test_rl_mix_sums_the_verifier_and_a_reward_model(
    policy_dir, backbone_dir, math_tasks, tmp_path
):
    report = _run(
        "rl", "--reward", "mix", "--policy", policy_dir, "--tasks", math_tasks,
        "--reward-model", backbone_dir, "--prompts", math_tasks, "--out", tmp_path / "rl",
        "--rm-weight", "0.5", "--format-weight", "0", "--no-guess-check", *GRPO_ARGS,
    )  # fmt: skip
    assert report["reward"]["functions"] == ["verifier", "format", "reward_model", "language_drift"]
    assert report["reward"]["weights"] == [1.0, 0.0, 0.5, 0.0]
    assert report["prompts"] == 5 and report["guessable_left_out"] == {}
    for step in report["steps"]:
        parts = step["rewards"]
        assert set(parts) == {"verifier", "format", "reward_model"}
        # r = 1·verifier + 0·format + 0.5·rm, averaged over the batch
        assert step["reward"] == pytest.approx(parts["verifier"] + 0.5 * parts["reward_model"])
        # an untrained RM scores every completion differently: no group is flat
        assert step["zero_variance_share"] == 0.0


def test_rl_refuses_what_it_cannot_score(policy_dir, math_tasks, tmp_path):
    runner = CliRunner()
    base = ["rl", "--policy", str(policy_dir), "--prompts", str(math_tasks), "-o", str(tmp_path)]
    for extra, message in (
        (["--reward", "verifier"], "--reward verifier needs --tasks FILE"),
        (["--reward", "mix", "--tasks", str(math_tasks)], "--reward mix needs --reward-model"),
        (["--reward", "rm"], "--reward rm needs --reward-model"),
        (["--reward", "bandit"], "choose one of rm, verifier, mix"),
    ):
        result = runner.invoke(app, base + extra)
        assert result.exit_code == 2 and message in " ".join(result.output.split()), result.output
