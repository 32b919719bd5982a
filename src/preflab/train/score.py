"""Scoring with a trained reward model: rollouts, best-of-N (rejection sampling).

Every reward here goes through :class:`RewardScorer`, which encodes with the same rule as
training (:func:`.encode.encode`), so a score at serving time means what it meant in training.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .data import PairDataError, as_text, jsonl_objects
from .encode import encode, token_length

Progress = Callable[[int], None]


class RewardScorer:
    """A reward model directory (``rm train`` output or any 1-label HF classifier) as a function."""

    def __init__(
        self, model_dir: Path, *, max_length: int | None = None, device: str | None = None
    ) -> None:
        import torch
        from transformers import AutoTokenizer

        from .pooling import load_reward_model

        if not (model_dir / "config.json").is_file():
            raise FileNotFoundError(
                f"{model_dir}: not a model directory (no config.json); train one with `preflab rm train`"
            )
        card_path = model_dir / "preflab_rm.json"
        card = json.loads(card_path.read_text()) if card_path.is_file() else {}
        self.card = card
        self.name = str(model_dir)
        self.max_length = max_length or card.get("settings", {}).get("max_length", 512)
        #: the prompt cap the model was trained with (scoring encodes as training did)
        self.max_prompt_length = card.get("settings", {}).get("max_prompt_length")
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = load_reward_model(model_dir)
        if self.model.config.num_labels != 1:
            raise ValueError(
                f"{model_dir}: a reward model has num_labels=1, this one has {self.model.config.num_labels}"
            )
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device).eval()
        self.length = token_length(self.tokenizer)

    def score(
        self,
        prompts: Sequence[str],
        responses: Sequence[str],
        *,
        batch_size: int = 32,
        progress: Progress | None = None,
    ) -> list[float]:
        """One scalar reward per (prompt, response). Each distinct pair is encoded and scored
        once (an evaluation set repeats its answers: 200 distinct arguments made 5,126 texts),
        and the rewards are given back in the order asked; ``progress`` counts distinct pairs."""
        import torch

        if len(prompts) != len(responses):
            raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
        slot: dict[tuple[str, str], int] = {}
        where = [
            slot.setdefault((p, r), len(slot)) for p, r in zip(prompts, responses, strict=True)
        ]
        distinct = list(slot)
        rewards: list[float] = []
        for start in range(0, len(distinct), batch_size):
            ids = [
                encode(self.tokenizer, p, r, self.max_length, self.max_prompt_length).ids
                for p, r in distinct[start : start + batch_size]
            ]
            batch = self.tokenizer.pad({"input_ids": ids}, return_tensors="pt").to(self.device)
            with torch.inference_mode():
                logits = self.model(
                    input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
                ).logits
            rewards.extend(logits[:, 0].float().cpu().tolist())
            if progress is not None:
                progress(len(ids))
        return [rewards[i] for i in where]

    def distinct(self, prompts: Sequence[str], responses: Sequence[str]) -> int:
        """How many (prompt, response) pairs :meth:`score` will encode (a progress total)."""
        return len(set(zip(prompts, responses, strict=True)))

    def reward_function(self) -> Callable[..., list[float]]:
        """A TRL reward function (``GRPOTrainer(reward_funcs=...)``): prompts, completions -> rewards."""

        def reward_model(prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
            return self.score([as_text(p) for p in prompts], [as_text(c) for c in completions])

        reward_model.__name__ = "reward_model"
        return reward_model


@dataclass(frozen=True)
class Response:
    prompt: str
    response: str
    #: the row's other fields (``model``, ``task_id``, ...), carried to the scored row
    extra: Mapping[str, Any] = field(default_factory=dict)


def read_responses(path: Path) -> list[Response]:
    """``{"prompt", "response"}`` rows (``rollouts.jsonl`` shape); ``completion`` is accepted too."""
    rows: list[Response] = []
    for line_no, row in jsonl_objects(path):
        text = row.get("response", row.get("completion"))
        if "prompt" not in row or text is None:
            missing = "prompt" if "prompt" not in row else "response"
            raise PairDataError(
                f"{path}:{line_no}: {missing}: missing; rows need prompt and response"
            )
        extra = {k: v for k, v in row.items() if k not in {"prompt", "response", "completion"}}
        rows.append(Response(as_text(row["prompt"]), as_text(text), extra))
    return rows


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> int:
    """Write atomically (a temporary file renamed into place): nothing half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    n = 0
    with open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    tmp.replace(path)
    return n


def score_rollouts(
    scorer: RewardScorer,
    responses: Sequence[Response],
    *,
    batch_size: int = 32,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """``rollouts.jsonl`` rows: ``{"prompt", "response", "reward", "reward_model"}`` plus the
    input row's other fields: its ``model`` (the policy that wrote the answer) stays, so a scored
    file still feeds ``preflab eval create``; the scorer is ``reward_model``."""
    rewards = scorer.score(
        [r.prompt for r in responses],
        [r.response for r in responses],
        batch_size=batch_size,
        progress=progress,
    )
    return [
        {
            **r.extra,
            "prompt": r.prompt,
            "response": r.response,
            "reward": w,
            "reward_model": scorer.name,
        }
        for r, w in zip(responses, rewards, strict=True)
    ]


def best_of_n(
    scorer: RewardScorer,
    candidates: Sequence[Response],
    *,
    length_penalty: float = 0.0,
    batch_size: int = 32,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """Per prompt, the candidate with the highest ``reward - length_penalty * tokens``.

    Rows are TRL SFT rows (``{"prompt", "completion"}``) plus the reward, the adjusted score
    and the number of candidates; prompts keep their first-seen order. Ties go to the first.
    """
    rewards = scorer.score(
        [c.prompt for c in candidates],
        [c.response for c in candidates],
        batch_size=batch_size,
        progress=progress,
    )
    best: dict[str, dict[str, Any]] = {}
    for c, reward in zip(candidates, rewards, strict=True):
        adjusted = reward - length_penalty * scorer.length(c.response)
        row = best.setdefault(
            c.prompt,
            {
                "prompt": c.prompt,
                "completion": c.response,
                "reward": reward,
                "score": adjusted,
                "n_candidates": 0,
            },
        )
        row["n_candidates"] += 1
        if adjusted > row["score"]:
            row.update(completion=c.response, reward=reward, score=adjusted)
    return list(best.values())


def generate_candidates(
    policy_dir: Path,
    prompts: Sequence[str],
    n: int,
    *,
    max_new_tokens: int = 64,
    temperature: float = 1.0,
    seed: int = 0,
) -> list[Response]:
    """``n`` sampled answers per prompt from a local causal LM directory."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(str(policy_dir), local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(str(policy_dir), local_files_only=True).eval()
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    out: list[Response] = []
    for prompt in prompts:
        enc = tokenizer(prompt, return_tensors="pt")
        with torch.inference_mode():
            gen = model.generate(
                **enc,
                do_sample=True,
                temperature=temperature,
                max_new_tokens=max_new_tokens,
                num_return_sequences=n,
                pad_token_id=pad,
            )
        for seq in gen[:, enc["input_ids"].shape[1] :]:
            text = tokenizer.decode(seq, skip_special_tokens=True)
            assert isinstance(text, str)  # one sequence decodes to one string
            out.append(Response(prompt, text))
    return out
