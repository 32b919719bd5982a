"""Per-item rubrics as rewards: a completion graded against its item's approved criteria by the
configured model judge (template ``criteria``), rewarded with
:func:`preflab.schema.criteria.criteria_reward` (weighted share met, an unmet must-have: 0).

Two shapes, one grading path (:func:`grade`, the judge runner's requests, retries and strict
parsing):

* :func:`compute_score`, verl's ``custom_reward_function``. Rows of preflab's ``verl`` export
  whose item has approved criteria are ``reward_model.style == "rubric"`` with the criteria set as
  JSON in ``ground_truth`` and ``extra_info.style == "rubric"``; every other row goes to
  :func:`preflab.verify.verl_reward.compute_score` unchanged, so one function serves a mixed
  export::

      reward.custom_reward_function.path=pkg://preflab.judge.rubric_reward
      reward.custom_reward_function.name=compute_score

* :class:`CriteriaReward`, a TRL ``GRPOTrainer`` reward function
  (``f(prompts, completions, **columns)``): the criteria come from the dataset's ``criteria``
  column (the set's JSON) or, for the ``verl`` export loaded as a dataset, its ``reward_model``
  column. A row without criteria gets ``None`` (TRL: not applicable to this sample).

**The judge**: ``PREFLAB_JUDGE_ENDPOINT`` (an OpenAI-compatible ``.../v1``), ``PREFLAB_JUDGE_MODEL``,
``PREFLAB_JUDGE_API_KEY`` (optional), ``PREFLAB_JUDGE_TEMPLATE`` (default ``criteria``, the newest
version), or the same as arguments (verl: ``+reward.custom_reward_function.reward_kwargs.judge_endpoint=...``).

**A failed grade** (the endpoint unreachable after its retries, or a reply still malformed after
``parse_retries`` more asks: not one JSON object, or not naming every criterion once) is never
guessed: verl gets ``score`` = ``failure_score`` (default 0.0) with ``judge_failed`` = 1.0 in its
extra info, TRL gets ``None`` (``GRPOTrainer`` sums rewards with ``nansum``: the sample gets no
reward from this function, and one no function scored is kept out of its group's baseline with
advantage 0, TRL 1.16); both record the reason (``CriteriaReward.failures``, and the
``preflab.judge`` logger).

Absolute imports only: verl may load this file by its path.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from preflab.judge.runner import JudgeConfig, criteria_task, run_tasks
from preflab.judge.templates import load_template
from preflab.schema import CriteriaJudgment, CriteriaSet, Message, prompt_as_text
from preflab.train.sampling import RetryPolicy
from preflab.verify.verl_reward import RoutingError
from preflab.verify.verl_reward import compute_score as verl_compute_score

log = logging.getLogger("preflab.judge")

RUBRIC_STYLE = "rubric"


class JudgeNotConfigured(ValueError):
    """No endpoint or model for the judge: says which variable or argument to set."""


def judge_config(
    endpoint: str | None = None,
    model: str | None = None,
    *,
    template: str | None = None,
    api_key: str | None = None,
    concurrency: int = 8,
    parse_retries: int = 2,
    retry: RetryPolicy | None = None,
) -> JudgeConfig:
    """The judge from the arguments, else from the ``PREFLAB_JUDGE_*`` environment variables."""
    endpoint = endpoint or os.environ.get("PREFLAB_JUDGE_ENDPOINT")
    model = model or os.environ.get("PREFLAB_JUDGE_MODEL")
    if not endpoint or not model:
        raise JudgeNotConfigured(
            "a rubric reward needs a judge: set PREFLAB_JUDGE_ENDPOINT (http://host:8000/v1) and "
            "PREFLAB_JUDGE_MODEL, or pass judge_endpoint= and judge_model="
        )
    tmpl = load_template(template or os.environ.get("PREFLAB_JUDGE_TEMPLATE") or "criteria")
    if tmpl.kind != "criteria":
        raise JudgeNotConfigured(f"template {tmpl.label} is a {tmpl.kind} template, not criteria")
    return JudgeConfig(
        endpoint=endpoint,
        model=model,
        template=tmpl,
        concurrency=concurrency,
        parse_retries=parse_retries,
        api_key=api_key or os.environ.get("PREFLAB_JUDGE_API_KEY") or None,
        retry=retry or RetryPolicy(),
    )


@dataclass
class Grade:
    """One completion's grade: the reward and what was met, or the failure (never both)."""

    reward: float | None
    met: dict[str, bool] = field(default_factory=dict)
    failure: str | None = None


def parse_criteria(value: Any) -> CriteriaSet:
    """A criteria set from a dataset cell (its JSON, or the dict); it must be approved."""
    data = json.loads(value) if isinstance(value, str | bytes) else value
    cset = CriteriaSet.model_validate(data)
    if not cset.approved:
        raise RoutingError(
            f"criteria v{cset.version} are not approved: only approved criteria reward "
            "(preflab criteria approve), then export again"
        )
    return cset


def grade(jobs: Sequence[tuple[str, str, CriteriaSet]], config: JudgeConfig) -> list[Grade]:
    """Grade ``(prompt, completion, criteria)`` jobs with the judge, concurrently; a grade per job."""
    tasks = [
        criteria_task(f"rollout{i}", "completion", prompt, completion, cset, config)
        for i, (prompt, completion, cset) in enumerate(jobs)
    ]
    outcomes, _ = run_tasks(tasks, config, cache_path=None)
    grades = []
    for outcome, (_, _, cset) in zip(outcomes, jobs, strict=True):
        judgment = outcome.judgment
        if isinstance(judgment, CriteriaJudgment):
            grades.append(Grade(cset.reward(judgment.met), dict(judgment.met)))
        else:
            reason = outcome.failure or "no grade"
            log.warning("rubric reward: judge failed, no grade: %s", reason)
            grades.append(Grade(None, failure=reason))
    return grades


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    *,
    judge_endpoint: str | None = None,
    judge_model: str | None = None,
    judge_template: str | None = None,
    failure_score: float = 0.0,
    **verl_kwargs: Any,
) -> dict[str, Any]:
    """verl's reward for one rollout: rubric rows graded by the judge, others by
    :mod:`preflab.verify.verl_reward`."""
    info = extra_info or {}
    if info.get("style") != RUBRIC_STYLE:
        return verl_compute_score(data_source, solution_str, ground_truth, info, **verl_kwargs)
    cset = parse_criteria(ground_truth)
    config = judge_config(judge_endpoint, judge_model, template=judge_template)
    (result,) = grade([(str(info.get("prompt_text") or ""), solution_str, cset)], config)
    if result.reward is None:
        return {"score": float(failure_score), "route": 3.0, "judge_failed": 1.0}
    return {"score": result.reward, "route": 3.0, "judge_failed": 0.0}


def _prompt_text(prompt: Any) -> str:
    """TRL hands a prompt as text or as a list of chat messages."""
    if isinstance(prompt, list):
        return prompt_as_text([Message.model_validate(m) for m in prompt])
    return str(prompt)


def _completion_text(completion: Any) -> str:
    if isinstance(completion, list):
        return "\n\n".join(str(m.get("content", "")) for m in completion if isinstance(m, Mapping))
    return str(completion)


def _row_criteria(
    i: int, criteria: Sequence[Any] | None, reward_model: Sequence[Any] | None
) -> Any:
    if criteria is not None and criteria[i] is not None:
        return criteria[i]
    if reward_model is not None and isinstance(reward_model[i], Mapping):
        if reward_model[i].get("style") == RUBRIC_STYLE:
            return reward_model[i].get("ground_truth")
    return None


class CriteriaReward:
    """TRL reward function (``__name__`` ``criteria``): each completion graded by the judge
    against its row's criteria; ``None`` for a row without criteria or a failed grade."""

    __name__ = "criteria"

    def __init__(self, config: JudgeConfig | None = None) -> None:
        self.config = config or judge_config()
        self.calls = 0
        self.failures: list[str] = []

    def __call__(
        self,
        prompts: Sequence[Any],
        completions: Sequence[Any],
        criteria: Sequence[Any] | None = None,
        reward_model: Sequence[Any] | None = None,
        **_: Any,
    ) -> list[float | None]:
        rewards: list[float | None] = [None] * len(completions)
        jobs, where = [], []
        for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
            raw = _row_criteria(i, criteria, reward_model)
            if raw is None:
                continue
            jobs.append((_prompt_text(p), _completion_text(c), parse_criteria(raw)))
            where.append(i)
        self.calls += len(jobs)
        for i, result in zip(where, grade(jobs, self.config) if jobs else [], strict=True):
            rewards[i] = result.reward
            if result.failure is not None:
                self.failures.append(result.failure)
        return rewards
