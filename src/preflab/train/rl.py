"""``preflab rl``: optimise a policy against the reward model with a KL anchor (TRL GRPO).

TRL's ``GRPOTrainer`` (Shao et al. 2024, DeepSeekMath §4) samples ``num_generations`` answers per
prompt, scores them with the reward model (through :class:`.score.RewardScorer`, the same
encoding as training) and penalises ``beta · KL(policy ‖ reference)`` against a frozen copy of
the starting policy. :func:`overoptimisation` then reads the run's logged steps: how the RM
reward and the answer length move as the KL grows (Gao et al. 2023).
"""

from __future__ import annotations

import json
import sys
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
        **device,
    )


def train_rl(
    policy_dir: Path,
    reward_dir: Path,
    prompts: list[str],
    out: Path,
    settings: RLSettings | None = None,
    *,
    policy: Any = None,
    tokenizer: Any = None,
) -> dict[str, Any]:
    """Run GRPO, save the policy to ``out`` and return the over-optimisation report.

    ``policy`` / ``tokenizer`` may be passed as objects (tests build tiny ones from a config).
    """
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOTrainer

    settings = settings or RLSettings()
    if tokenizer is None:
        tokenizer = AutoTokenizer.from_pretrained(str(policy_dir), local_files_only=True)
    if policy is None:
        policy = AutoModelForCausalLM.from_pretrained(str(policy_dir), local_files_only=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    scorer = RewardScorer(reward_dir)
    trainer = GRPOTrainer(
        model=policy,
        reward_funcs=scorer.reward_function(),
        args=grpo_config(out, settings),
        train_dataset=datasets.Dataset.from_dict({"prompt": prompts}),
        processing_class=tokenizer,
    )
    with redirect_stdout(sys.stderr):  # trainer logs on stderr: stdout stays for results (--json)
        trainer.train()
    out.mkdir(parents=True, exist_ok=True)
    trainer.save_model(str(out))
    tokenizer.save_pretrained(str(out))
    report = overoptimisation(trainer.state.log_history, beta=settings.beta)
    report.update(policy=str(policy_dir), reward_model=str(reward_dir), prompts=len(prompts))
    (out / "rl_report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def overoptimisation(
    log_history: list[dict[str, Any]], *, beta: float | None = None
) -> dict[str, Any]:
    """Per logged step: KL to the reference, mean RM reward, mean completion length.

    ``trend`` compares the last logged step with the first: a reward that climbs while KL and
    length climb with it is the over-optimisation pattern to look at by hand.
    """
    steps = [
        {
            "step": log.get("step"),
            "kl": log.get("kl"),
            "reward": log.get("reward"),
            "length": log.get("completions/mean_length"),
        }
        for log in log_history
        if "reward" in log
    ]
    trend = None
    if len(steps) >= 2:
        first, last = steps[0], steps[-1]
        trend = {
            k: (last[k] - first[k]) if last[k] is not None and first[k] is not None else None
            for k in ("kl", "reward", "length")
        }
    return {"beta": beta, "steps": steps, "trend": trend}
