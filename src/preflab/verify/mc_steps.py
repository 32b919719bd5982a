"""Monte Carlo checks of step labels (``preflab verify steps``).

A step-labelled solution (a ``steps`` judgment: the candidate split into steps, a human verdict
per step in {+1, 0, -1} up to the first error) is checked against the policy's own rollouts, as
Math-Shepherd estimates step labels (Wang et al. 2024, *Math-Shepherd: Verify and Reinforce
LLMs Step-by-step without Human Annotations*, §3.3, the "soft estimation"): from the prefix
ending at step ``i`` the policy completes the solution ``N`` times, each final answer goes
through the task's verifier, and

    MC estimate of step i  =  (rollouts from the prefix up to step i that reach a correct answer) / N

A sound step keeps a correct answer reachable; after a wrong one, rollouts mostly fail. The human
verdict is scored ``+1 -> 1``, ``-1 -> 0`` (a neutral ``0`` is not compared), and a step
**disagrees** when ``|human score - estimate| > threshold`` (default 0.5: a step labelled correct
from which fewer than half of the rollouts succeed, or one labelled wrong from which more than
half do). Agreement figures binarise the estimate at 0.5 (sound when ``estimate >= 0.5``):
per-step agreement (share of compared steps where both say the same) and Cohen's κ.

Caveats, written in the report: the estimate depends on the policy (a weak policy fails from
sound prefixes: low estimates on steps people call correct), a policy may recover from a wrong
step (high estimates on steps people call wrong), and ``N`` rollouts carry binomial noise (the
standard error is ``sqrt(p(1-p)/N)``, 0.18 at ``p = 0.5``, ``N = 8``). A disagreement is a
reason for a person to look, not a verdict.

The rollouts come from any OpenAI-compatible endpoint or a local model
(:func:`preflab.train.sampling.sample`, with its cache). The prefix is sent as one user message
(:func:`prefix_prompt`), which every chat server accepts (no assistant-prefill extension needed).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .pool import Submission, verify_many

HUMAN_SCORE = {1: 1.0, -1: 0.0}
SOUND_AT = 0.5
PREFIX_TEMPLATE = (
    "{prompt}\n\nHere is the beginning of a solution:\n\n{steps}\n\n"
    "Continue this solution from its last step to the end, without changing the steps above, "
    "and give the final answer."
)


@dataclass(frozen=True)
class StepUnit:
    """One steps judgment to check: the solution, its verdicts and the task its answers go to."""

    item_id: str
    candidate_id: str
    prompt: str
    steps: list[str]
    verdicts: list[int]
    task: Any
    judgment_id: int | None = None
    rater: str | None = None


def prefix_prompt(prompt: str, steps: Sequence[str], upto: int) -> str:
    """The request for rollouts from the prefix ending at step ``upto`` (1-based)."""
    shown = "\n".join(f"Step {i + 1}: {s}" for i, s in enumerate(steps[:upto]))
    return PREFIX_TEMPLATE.format(prompt=prompt, steps=shown)


@dataclass
class StepCheck:
    item_id: str
    candidate_id: str
    judgment_id: int | None
    rater: str | None
    step: int  # 1-based
    step_text: str
    human_verdict: int
    mc_estimate: float
    mc_correct: int
    mc_n: int
    disagree: bool
    evidence: list[str] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        return asdict(self)


Sampler = Callable[[list[tuple[str, str]], int], list[list[str]]]


def check_steps(
    units: Sequence[StepUnit],
    n: int,
    sampler: Sampler,
    *,
    threshold: float = 0.5,
    workers: int = 1,
    evidence: int = 3,
) -> list[StepCheck]:
    """Sample ``n`` rollouts from every labelled step's prefix, verify them, compare.

    ``sampler(requests, n)`` takes ``[(request id, prompt text)]`` and returns, per request, its
    ``n`` completions (:func:`endpoint_sampler`, or a list in tests)."""
    if not 0 <= threshold <= 1:
        raise ValueError(f"threshold {threshold}: expected a number in [0, 1]")
    requests: list[tuple[str, str]] = []
    where: list[tuple[int, int]] = []
    for u_index, unit in enumerate(units):
        for i in range(len(unit.verdicts)):
            requests.append(
                (
                    f"{unit.item_id}::{unit.candidate_id}::step{i + 1}",
                    prefix_prompt(unit.prompt, unit.steps, i + 1),
                )
            )
            where.append((u_index, i))
    completions = sampler(requests, n) if requests else []
    tasks: dict[str, Any] = {}
    subs: list[Submission] = []
    for (u_index, _), texts in zip(where, completions, strict=True):
        unit = units[u_index]
        key = f"mc::{u_index}"
        tasks[key] = unit.task
        subs += [Submission(key, t) for t in texts]
    verdicts = verify_many(tasks, subs, workers=workers) if subs else []
    out: list[StepCheck] = []
    at = 0
    for (u_index, i), texts in zip(where, completions, strict=True):
        unit = units[u_index]
        passed = [v.passed for v in verdicts[at : at + len(texts)]]
        at += len(texts)
        estimate = sum(passed) / len(passed) if passed else math.nan
        human = unit.verdicts[i]
        score = HUMAN_SCORE.get(human)
        disagree = score is not None and abs(score - estimate) > threshold
        shown = [
            f"{'correct' if ok else 'wrong'}: {t.strip()[-160:]}"
            for t, ok in zip(texts, passed, strict=True)
            if (ok if human == -1 else not ok)
        ][:evidence]
        out.append(
            StepCheck(
                item_id=unit.item_id,
                candidate_id=unit.candidate_id,
                judgment_id=unit.judgment_id,
                rater=unit.rater,
                step=i + 1,
                step_text=unit.steps[i],
                human_verdict=human,
                mc_estimate=estimate,
                mc_correct=sum(passed),
                mc_n=len(passed),
                disagree=disagree,
                evidence=shown if disagree else [],
            )
        )
    return out


def agreement(checks: Sequence[StepCheck], *, threshold: float = 0.5) -> dict[str, Any]:
    """Per-step agreement and Cohen's κ between the human verdicts (±1) and the estimate
    binarised at 0.5; the mean estimate by human verdict; the disagreements."""
    from preflab.quality.agreement.cohen import cohens_kappa

    compared = [c for c in checks if c.human_verdict in HUMAN_SCORE]
    human = [c.human_verdict for c in compared]
    mc = [1 if c.mc_estimate >= SOUND_AT else -1 for c in compared]
    same = sum(h == m for h, m in zip(human, mc, strict=True))
    kappa = cohens_kappa(human, mc, labels=[-1, 1]) if compared else math.nan
    by_verdict = {}
    for verdict in (1, 0, -1):
        values = [c.mc_estimate for c in checks if c.human_verdict == verdict]
        by_verdict[str(verdict)] = {
            "steps": len(values),
            "mean_estimate": sum(values) / len(values) if values else None,
        }
    table = {
        f"human {h:+d}, mc {m:+d}": sum(
            1 for a, b in zip(human, mc, strict=True) if (a, b) == (h, m)
        )
        for h in (1, -1)
        for m in (1, -1)
    }
    return {
        "steps_checked": len(checks),
        "solutions": len({(c.item_id, c.candidate_id, c.judgment_id) for c in checks}),
        "compared": len(compared),
        "neutral": sum(1 for c in checks if c.human_verdict == 0),
        "agreement": same / len(compared) if compared else None,
        "kappa": None if math.isnan(kappa) else kappa,
        "confusion": table,
        "by_human_verdict": by_verdict,
        "threshold": threshold,
        "sound_at": SOUND_AT,
        "disagreements": sum(c.disagree for c in checks),
    }


def evidence_note(check: StepCheck, threshold: float) -> str:
    """What a reviewer reads on the label sent back (the review request's note)."""
    said = {1: "correct (+1)", -1: "wrong (-1)"}[check.human_verdict]
    lines = [
        f"Monte Carlo check: step {check.step} labelled {said}, but {check.mc_correct} of "
        f"{check.mc_n} rollouts from the solution up to this step reach a correct answer "
        f"(estimate {check.mc_estimate:.2f}; disagreement beyond {threshold:.2f}).",
        f"Step {check.step}: {check.step_text}",
    ]
    lines += [f"rollout ({e})" for e in check.evidence]
    return "\n".join(lines)


def endpoint_sampler(**kwargs: Any) -> Sampler:
    """A :data:`Sampler` over :func:`preflab.train.sampling.sample` (``endpoint``/``model`` or
    ``local``, ``params``, ``seed``, ``cache_path``, ``concurrency``, ...)."""

    def run(requests: list[tuple[str, str]], n: int) -> list[list[str]]:
        from preflab.train.sampling import PromptRow, sample

        rows, _ = sample([PromptRow(rid, text) for rid, text in requests], n, **kwargs)
        # rows come in request order, n each (a cached row may carry another request's id:
        # two raters labelling the same solution share its prefixes and their rollouts)
        return [[r["response"] for r in rows[k * n : (k + 1) * n]] for k in range(len(requests))]

    return run
