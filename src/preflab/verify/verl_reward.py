"""verl's ``custom_reward_function`` for preflab's ``verl`` export: one function, routed by the row.

verl never reads ``reward_model.style``: with its defaults every row goes to
``verl.utils.reward_score.default_compute_score(data_source, ...)``, which raises
``NotImplementedError`` for a ``data_source`` it does not know (every preflab source). The
``verl`` export therefore copies ``style`` and the verifier kind into ``extra_info``, and this
function routes on them:

* ``style == "rule"`` with a verifier (``extra_info["verifier"]`` = ``preflab.verify:math`` /
  ``:code`` / ``:sql``): preflab's sandboxed verifier, the task read from ``ground_truth``
  (see :func:`preflab.verify.adapters.compute_score`);
* ``style == "rule"`` with ``preflab.verify:exact``: the item's hidden reference answer, equal
  after normalising whitespace and case (1.0) or not (0.0);
* ``style == "model"``: a sequence-classification reward model (``reward_model_path``, a local
  Hugging Face directory, passed through verl's ``reward_kwargs``) scores prompt + response;
  its raw logit is the score.

verl 0.9.1 config (``reward.custom_reward_function`` is where 0.9.1 reads it; the top-level
``custom_reward_function.*`` of older configs is migrated to it)::

    reward.custom_reward_function.path=pkg://preflab.verify.verl_reward
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.reward_model_path=/path/to/reward-model

Absolute imports only: verl may also load this file by its path (``path=/.../verl_reward.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from preflab.verify.adapters import compute_score as verify_score

VERIFIER_PREFIX = "preflab.verify:"
EXACT = VERIFIER_PREFIX + "exact"


class RoutingError(ValueError):
    """A row this function cannot score; the message says which field to fix."""


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    *,
    reward_model_path: str | None = None,
    **_verl_kwargs: Any,
) -> dict[str, Any]:
    """Score one rollout of a preflab ``verl`` row; a dict with ``score`` (verl logs the rest)."""
    info = extra_info or {}
    style = info.get("style")
    if style == "rule":
        verifier = info.get("verifier")
        if verifier == EXACT:
            return {"score": exact_match(solution_str, ground_truth), "route": 0.0}
        if isinstance(verifier, str) and verifier.startswith(VERIFIER_PREFIX):
            return {**verify_score(data_source, solution_str, ground_truth, info), "route": 1.0}
        raise RoutingError(
            f"extra_info.verifier: expected {VERIFIER_PREFIX}<math|code|sql|exact> on a rule row, "
            f"got {verifier!r}; export the file again with preflab"
        )
    if style == "model":
        if not reward_model_path:
            raise RoutingError(
                "a preference row (extra_info.style 'model') needs a reward model: set "
                "+reward.custom_reward_function.reward_kwargs.reward_model_path=/path/to/model"
            )
        prompt = str(info.get("prompt_text") or "")
        return {"score": _reward_model(reward_model_path).score(prompt, solution_str), "route": 2.0}
    if style == "rubric":  # an item's own criteria: graded by a judge, not here
        raise RoutingError(
            "a rubric row (extra_info.style 'rubric') is graded by a judge: set "
            "reward.custom_reward_function.path=pkg://preflab.judge.rubric_reward (it routes "
            "every other row here)"
        )
    raise RoutingError(
        f"extra_info.style: expected 'rule' or 'model', got {style!r} (data_source {data_source!r}); "
        "the row does not come from preflab's verl export"
    )


def exact_match(solution: str, reference: Any) -> float:
    """1.0 when the answer equals the reference after collapsing whitespace and case."""

    def norm(text: Any) -> str:
        return " ".join(str(text).split()).casefold()

    return float(reference is not None and norm(solution) == norm(reference))


class RewardModelScorer:
    """A local sequence-classification model (one logit) that scores prompt + response."""

    def __init__(self, path: str) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForSequenceClassification.from_pretrained(path).eval()

    def score(self, prompt: str, response: str) -> float:
        import torch

        if getattr(self.tokenizer, "chat_template", None):
            text = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": prompt}, {"role": "assistant", "content": response}],
                tokenize=False,
            )
            inputs = self.tokenizer(
                text, return_tensors="pt", truncation=True, add_special_tokens=False
            )
        else:  # an encoder RM: prompt and response as a text pair
            inputs = self.tokenizer(prompt, response, return_tensors="pt", truncation=True)
        with torch.no_grad():
            return float(self.model(**inputs).logits[0, 0])


@lru_cache(maxsize=2)
def _reward_model(path: str) -> RewardModelScorer:
    """Loaded once per worker process: verl calls the function once per rollout."""
    return RewardModelScorer(path)
