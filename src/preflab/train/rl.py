"""``preflab rl``: optimise a policy against the verifiers, a reward model or both, with a KL
anchor (TRL GRPO).

TRL's ``GRPOTrainer`` (Shao et al. 2024, DeepSeekMath §4) samples ``num_generations`` answers per
prompt, scores them with the reward functions of :mod:`.rl_rewards` (``--reward verifier``: the
task's verifier plus a format reward; ``rm``: the reward model through
:class:`.score.RewardScorer`, the same encoding as training; ``mix``: the weighted sum of all
three) and penalises ``beta · KL(policy ‖ reference)`` against a frozen copy of the starting
policy. :func:`overoptimisation` then reads the run's logged steps: reward, KL, entropy, response
length, the share of zero-variance groups and language drift (:mod:`.rl_monitors`), and how the
reward and the answer length move as the KL grows (Gao et al. 2023).
"""

from __future__ import annotations

import json
import sys
from contextlib import redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .reward_model import device_settings
from .score import RewardScorer


@dataclass
class RLSettings:
    beta: float = 0.04
    num_generations: int = 4
    batch_size: int = 4
    max_completion_length: int = 64
    learning_rate: float = 1e-6
    max_steps: int = 100
    seed: int = 0
    logging_steps: int = 1
    temperature: float = 1.0
    progress: bool = True
    reward_weights: list[float] | None = None


RewardMode = Literal["rm", "verifier", "mix"]
REWARD_MODES = ("rm", "verifier", "mix")


@dataclass
class RewardSpec:
    """What the policy is optimised against; the weights of ``r = w_v·verifier + w_f·format +
    w_rm·rm`` (components absent from the mode are not computed)."""

    mode: RewardMode = "rm"
    verifier_weight: float = 1.0
    format_weight: float = 0.1
    rm_weight: float = 1.0
    workers: int = 1


@dataclass(frozen=True)
class RLPrompt:
    prompt: str
    task_id: str | None = None


@dataclass
class RLPrompts:
    rows: list[RLPrompt]
    #: task id -> labels of the trivial answers that passed its verifier (left out of the run)
    guessable: dict[str, list[str]] = field(default_factory=dict)


def read_prompts(path: Path) -> list[str]:
    """Prompts from a JSONL file of ``{"prompt": ...}`` rows (chat prompts rendered as text)."""
    from .data import PairDataError, as_text, jsonl_objects

    prompts: list[str] = []
    for line_no, row in jsonl_objects(path):
        if "prompt" not in row:
            raise PairDataError(f"{path}:{line_no}: prompt: missing; rows need a prompt")
        prompts.append(as_text(row["prompt"]))
    if not prompts:
        raise PairDataError(f"{path}: no prompts")
    return list(dict.fromkeys(prompts))


def read_rl_prompts(
    path: Path,
    tasks: dict[str, Any] | None = None,
    task_prompts: dict[str, Any] | None = None,
) -> list[RLPrompt]:
    """Prompts for RL from JSONL rows. With ``tasks`` (``--reward verifier|mix``) every row names
    its task (``task_id``, or ``metadata.task_id`` as rollouts carry it), and a row without a
    ``prompt`` takes its task's (``task_prompts``: a tasks file's ``prompt`` column), so the
    advisor's ``grpo.jsonl``, a prompts file or the tasks file itself all serve."""
    from .data import PairDataError, as_text, jsonl_objects

    rows: list[RLPrompt] = []
    errors: list[str] = []
    for line_no, row in jsonl_objects(path):
        meta = row.get("metadata")
        if not isinstance(meta, dict):
            meta = {}
        task_id = row.get("task_id", meta.get("task_id"))
        prompt = row.get("prompt")
        if tasks is not None:
            if not isinstance(task_id, str):
                errors.append(
                    f"{path}:{line_no}: task_id: missing (the task whose verifier scores it)"
                )
                continue
            if task_id not in tasks:
                errors.append(
                    f"{path}:{line_no}: task_id: {task_id!r} is not a task of the tasks file"
                )
                continue
            if prompt is None:
                prompt = (task_prompts or {}).get(task_id)
        if prompt is None:
            errors.append(f"{path}:{line_no}: prompt: missing; rows need a prompt")
            continue
        rows.append(RLPrompt(as_text(prompt), task_id if tasks is not None else None))
    if errors:
        raise PairDataError("\n".join(errors[:50]))
    if not rows:
        raise PairDataError(f"{path}: no prompts")
    return list(dict.fromkeys(rows))


def drop_guessable(
    prompts: list[RLPrompt], tasks: dict[str, Any], meta: dict[str, Any] | None = None
) -> RLPrompts:
    """The guessability check (:mod:`preflab.verify.guess`) on the run's tasks: a task a trivial
    answer passes would pay the guess, so its prompts are left out."""
    from ..verify.guess import check_guessability

    used = {p.task_id for p in prompts if p.task_id is not None}
    meta = meta or {}
    report = check_guessability(
        {t: tasks[t] for t in sorted(used)},
        {t: getattr(meta.get(t), "prompt", None) for t in used},
        {t: getattr(meta.get(t), "choices", None) for t in used},
    )
    kept = [p for p in prompts if p.task_id not in report.flagged]
    return RLPrompts(kept, report.flagged)


def grpo_config(out: Path, settings: RLSettings) -> Any:
    from trl import GRPOConfig

    device = device_settings()
    return GRPOConfig(
        output_dir=str(out / "checkpoints"),
        beta=settings.beta,
        num_generations=settings.num_generations,
        per_device_train_batch_size=settings.batch_size,
        max_completion_length=settings.max_completion_length,
        learning_rate=settings.learning_rate,
        max_steps=settings.max_steps,
        seed=settings.seed,
        temperature=settings.temperature,
        logging_steps=settings.logging_steps,
        report_to=[],
        save_strategy="no",
        disable_tqdm=not settings.progress,
        reward_weights=settings.reward_weights,
        **device,
    )


def reward_functions(
    spec: RewardSpec, reward_dir: Path | None, tasks: dict[str, Any] | None
) -> tuple[list[Any], list[float]]:
    """The TRL reward functions of ``spec.mode`` and their weights; the language-drift monitor
    rides along with weight 0 (logged, never optimised)."""
    from .rl_rewards import LanguageDriftMonitor, VerifierReward, format_reward

    funcs: list[Any] = []
    weights: list[float] = []
    if spec.mode in ("verifier", "mix"):
        if not tasks:
            raise ValueError(f"--reward {spec.mode} needs --tasks FILE (the verifiable tasks)")
        funcs += [VerifierReward(tasks, workers=spec.workers), format_reward(tasks)]
        weights += [spec.verifier_weight, spec.format_weight]
    if spec.mode in ("rm", "mix"):
        if reward_dir is None:
            raise ValueError(f"--reward {spec.mode} needs --reward-model DIR")
        funcs.append(RewardScorer(reward_dir).reward_function())
        weights.append(spec.rm_weight if spec.mode == "mix" else 1.0)
    funcs.append(LanguageDriftMonitor())
    weights.append(0.0)
    return funcs, weights


def train_rl(
    policy_dir: Path,
    reward_dir: Path | None,
    prompts: list[str] | list[RLPrompt],
    out: Path,
    settings: RLSettings | None = None,
    *,
    reward: RewardSpec | None = None,
    tasks: dict[str, Any] | None = None,
    policy: Any = None,
    tokenizer: Any = None,
) -> dict[str, Any]:
    """Run GRPO, save the policy to ``out`` and return the report (monitors per step).

    ``policy`` / ``tokenizer`` may be passed as objects (tests build tiny ones from a config).
    """
    import dataclasses

    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    settings = settings or RLSettings()
    reward = reward or RewardSpec()
    rows = [p if isinstance(p, RLPrompt) else RLPrompt(p) for p in prompts]
    funcs, weights = reward_functions(reward, reward_dir, tasks)
    settings = dataclasses.replace(settings, reward_weights=weights)
    columns: dict[str, list[Any]] = {"prompt": [r.prompt for r in rows]}
    if reward.mode != "rm":
        columns["task_id"] = [r.task_id for r in rows]
    if tokenizer is None:
        tokenizer = AutoTokenizer.from_pretrained(str(policy_dir), local_files_only=True)
    if policy is None:
        policy = AutoModelForCausalLM.from_pretrained(str(policy_dir), local_files_only=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    trainer = GRPOTrainer(
        model=policy,
        reward_funcs=funcs,
        args=grpo_config(out, settings),
        train_dataset=datasets.Dataset.from_dict(columns),
        processing_class=tokenizer,
    )
    with redirect_stdout(sys.stderr):  # trainer logs on stderr: stdout stays for results (--json)
        trainer.train()
    out.mkdir(parents=True, exist_ok=True)
    trainer.save_model(str(out))
    tokenizer.save_pretrained(str(out))
    report = overoptimisation(trainer.state.log_history, beta=settings.beta)
    report.update(
        policy=str(policy_dir),
        reward_model=str(reward_dir) if reward_dir is not None else None,
        prompts=len(rows),
        reward={
            "mode": reward.mode,
            "functions": [getattr(f, "__name__", type(f).__name__) for f in funcs],
            "weights": weights,
        },
        group_size=settings.num_generations,
        tasks=len({r.task_id for r in rows if r.task_id is not None}) or None,
    )
    (out / "rl_report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


#: report key -> the key TRL (1.x) logs it under
MONITORS = {
    "kl": "kl",
    "reward": "reward",
    "length": "completions/mean_length",
    "entropy": "entropy",
    "zero_variance_share": "frac_reward_zero_std",
    "language_drift": "rewards/language_drift/mean",
}


def overoptimisation(
    log_history: list[dict[str, Any]], *, beta: float | None = None
) -> dict[str, Any]:
    """Per logged step: KL to the reference, mean reward (the weighted sum), mean completion
    length, mean per-token entropy, the share of zero-variance groups and language drift (see
    :data:`MONITORS`), plus each reward function's mean (``rewards``: ``verifier``, ``format``,
    ``reward_model``).

    ``trend`` compares the last logged step with the first: a reward that climbs while KL and
    length climb with it is the over-optimisation pattern to look at by hand; entropy falling
    towards 0 or drift rising are the RLVR failures to stop a run for.
    """
    steps = []
    for log in log_history:
        if "reward" not in log:
            continue
        step: dict[str, Any] = {"step": log.get("step")}
        step.update({k: log.get(v) for k, v in MONITORS.items()})
        step["rewards"] = {
            key[len("rewards/") : -len("/mean")]: value
            for key, value in log.items()
            if key.startswith("rewards/") and key.endswith("/mean") and "language_drift" not in key
        }
        steps.append(step)
    trend = None
    if len(steps) >= 2:
        first, last = steps[0], steps[-1]
        trend = {
            k: (last[k] - first[k]) if last[k] is not None and first[k] is not None else None
            for k in MONITORS
        }
    return {"beta": beta, "steps": steps, "trend": trend, "monitors": _summary(steps)}


def _summary(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """First, last and mean of each monitor over the logged steps."""
    out: dict[str, Any] = {}
    for k in MONITORS:
        values = [s[k] for s in steps if s.get(k) is not None]
        out[k] = (
            {"first": values[0], "last": values[-1], "mean": sum(values) / len(values)}
            if values
            else None
        )
    return out
