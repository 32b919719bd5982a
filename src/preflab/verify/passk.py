"""pass@k: the probability that at least one of k samples passes, estimated without bias.

Chen et al. 2021 (*Evaluating Large Language Models Trained on Code*, arXiv:2107.03374, §2.1):
draw ``n >= k`` samples of a task, count the ``c`` that pass; then

    pass@k = E_tasks[ 1 - C(n - c, k) / C(n, k) ]

is unbiased, where ``1 - (1 - c/n)^k`` is not. :func:`pass_at_k` computes it with exact integer
binomials (:func:`math.comb`, exact for any n); :func:`pass_at_k_stable` is the paper's
numerically stable product form (its Figure 3),
``1 - prod_{i = n-c+1}^{n} (1 - k / i)``; the tests check both against each other and against
enumerating every k-subset of the samples on small n.

Aggregates: per task, per domain (the mean over its tasks with ``n >= k``) and overall (the mean
over every such task), with percentile bootstrap confidence intervals that resample *tasks*
(the unit of sampling; a seeded :class:`numpy.random.Generator`, so a report is reproducible).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

DEFAULT_KS = (1, 8, 16, 32)


def pass_at_k(n: int, c: int, k: int) -> float:
    """``1 - C(n-c, k) / C(n, k)``, exactly (integers until the one division)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_at_k_stable(n: int, c: int, k: int) -> float:
    """The paper's form: ``1 - prod(1 - k / arange(n - c + 1, n + 1))``."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def mixed_group_share(n: int, c: int, group: int) -> float:
    """The probability that a GRPO group of ``group`` samples holds both a pass and a fail
    (reward variance > 0), from ``c`` passes in ``n`` samples: drawn without replacement when
    ``group <= n`` (``1 - [C(c,G) + C(n-c,G)] / C(n,G)``), else with the pass rate ``p = c/n``
    (``1 - p^G - (1-p)^G``). 0 whenever ``c == 0`` or ``c == n``."""
    if not 0 <= c <= n or n < 1 or group < 1:
        raise ValueError(f"need 0 <= c <= n, n >= 1, group >= 1; got n={n}, c={c}, G={group}")
    if c in (0, n) or group == 1:
        return 0.0
    if group <= n:
        same = math.comb(c, group) + math.comb(n - c, group)
        return 1.0 - same / math.comb(n, group)
    p = c / n
    return float(1.0 - p**group - (1.0 - p) ** group)


@dataclass(frozen=True)
class TaskCounts:
    task_id: str
    domain: str
    n: int
    c: int

    def pass_at(self, ks: Iterable[int]) -> dict[int, float]:
        return {k: pass_at_k(self.n, self.c, k) for k in ks if k <= self.n}


def _bootstrap(values: np.ndarray, resamples: int, rng: np.random.Generator, level: float):
    if len(values) == 0:
        return None, None
    if len(values) == 1 or resamples < 1:
        v = float(values.mean())
        return v, v
    idx = rng.integers(0, len(values), size=(resamples, len(values)))
    means = values[idx].mean(axis=1)
    alpha = (1.0 - level) / 2
    return float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def summarise(
    counts: Sequence[TaskCounts],
    ks: Sequence[int] = DEFAULT_KS,
    *,
    resamples: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, Any]:
    """``{"ks", "tasks": {id: {...}}, "domains": {d: {...}}, "overall": {...}}``; each group
    entry maps ``pass@k`` to ``{"value", "ci": [lo, hi], "tasks"}`` for the ks its tasks allow."""
    rng = np.random.default_rng(seed)
    ks = sorted({k for k in ks if k >= 1})
    usable = [k for k in ks if any(t.n >= k for t in counts)]
    per_task = {
        t.task_id: {
            "domain": t.domain,
            "n": t.n,
            "c": t.c,
            **{f"pass@{k}": v for k, v in t.pass_at(usable).items()},
        }
        for t in counts
    }

    def group(members: Sequence[TaskCounts]) -> dict[str, Any]:
        out: dict[str, Any] = {"tasks": len(members), "samples": sum(t.n for t in members)}
        for k in usable:
            values = np.array([pass_at_k(t.n, t.c, k) for t in members if t.n >= k], dtype=float)
            if len(values) == 0:
                continue
            lo, hi = _bootstrap(values, resamples, rng, level)
            out[f"pass@{k}"] = {"value": float(values.mean()), "ci": [lo, hi], "tasks": len(values)}
        return out

    domains: dict[str, list[TaskCounts]] = {}
    for t in counts:
        domains.setdefault(t.domain, []).append(t)
    return {
        "ks": usable,
        "bootstrap": {"resamples": resamples, "seed": seed, "level": level, "over": "tasks"},
        "tasks": per_task,
        "domains": {d: group(members) for d, members in sorted(domains.items())},
        "overall": group(list(counts)),
    }


def counts_from_rewards(
    rewards: Mapping[str, Sequence[float]], domains: Mapping[str, str]
) -> list[TaskCounts]:
    """Per task: n samples, c of them with reward > 0."""
    return [
        TaskCounts(task_id, domains[task_id], len(values), sum(1 for r in values if r > 0))
        for task_id, values in rewards.items()
        if values
    ]
