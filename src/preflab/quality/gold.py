"""Gold checks: accuracy with a Wilson interval, qualification decisions, drift, leave-one-out.

Wilson, E. B. (1927). Probable inference, the law of succession, and statistical inference.
*JASA* 22(158). Drift: Page, E. S. (1954). Continuous inspection schemes. *Biometrika* 41
(the CUSUM), here the Bernoulli CUSUM of Reynolds and Stoumbos (1999, *J. Quality Technology*
31(1)): with in-control accuracy ``p0`` and the drop to detect ``p1``, each gold outcome adds its
log-likelihood ratio and the statistic ``C_t = max(0, C_{t-1} + llr_t)`` alarms above ``h``.

>>> [round(x, 4) for x in wilson_interval(8, 10)]
[0.4902, 0.9433]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..schema import GoldAnswer, JudgmentBase, PairwiseJudgment
from .table import as_array, factorize


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion; ``(0, 1)`` when ``n == 0``."""
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return 0.0, 1.0
    from scipy.stats import norm  # here, not at import (~0.9 s CPU)

    z = norm.ppf(1 - (1 - confidence) / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


@dataclass(frozen=True)
class GoldAccuracy:
    correct: int
    n: int
    accuracy: float
    low: float
    high: float

    def as_dict(self) -> dict[str, float]:
        return {
            "correct": self.correct,
            "n": self.n,
            "accuracy": self.accuracy,
            "low": self.low,
            "high": self.high,
        }


def gold_accuracy(correct: Sequence[bool], confidence: float = 0.95) -> GoldAccuracy:
    """Accuracy on gold items with its Wilson interval."""
    c = np.asarray(correct, dtype=bool)
    return gold_accuracy_from_counts(int(c.sum()), int(len(c)), confidence)


def gold_accuracy_from_counts(k: int, n: int, confidence: float = 0.95) -> GoldAccuracy:
    """:func:`gold_accuracy` of ``k`` correct answers out of ``n``."""
    low, high = wilson_interval(k, n, confidence)
    return GoldAccuracy(k, n, k / n if n else float("nan"), low, high)


Decision = Literal["pass", "fail", "continue"]


def qualification_decision(
    correct: Sequence[bool], bar: float = 0.8, min_items: int = 10, confidence: float = 0.95
) -> Decision:
    """``"pass"`` when, after at least ``min_items`` gold items, the Wilson lower bound reaches
    ``bar``; ``"fail"`` when the upper bound is below ``bar`` (at any count: the evidence is
    already conclusive); otherwise ``"continue"`` (ask for more gold items).

    >>> qualification_decision([True] * 20, bar=0.8, min_items=10)
    'pass'
    >>> qualification_decision([False] * 5, bar=0.8)
    'fail'
    """
    if not 0 < bar < 1:
        raise ValueError(f"bar must be in (0, 1), got {bar}")
    acc = gold_accuracy(correct, confidence)
    if acc.n >= min_items and acc.low >= bar:
        return "pass"
    if acc.n > 0 and acc.high < bar:
        return "fail"
    return "continue"


@dataclass
class DriftResult:
    """Outcome of a drift check on one rater's gold stream (evidence, not a verdict)."""

    drifted: bool
    alarm_at: int | None  # 0-based index of the gold outcome that raised the alarm
    change_start: int | None  # estimated start of the drop (last time the CUSUM was 0)
    statistic: list[float] = field(default_factory=list)
    threshold: float = 0.0
    accuracy_before: float | None = None
    accuracy_after: float | None = None
    p0: float = 0.0
    p1: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "drifted": self.drifted,
            "alarm_at": self.alarm_at,
            "change_start": self.change_start,
            "threshold": self.threshold,
            "accuracy_before": self.accuracy_before,
            "accuracy_after": self.accuracy_after,
            "p0": self.p0,
            "p1": self.p1,
            "max_statistic": max(self.statistic) if self.statistic else 0.0,
        }


def cusum_drift(
    correct: Sequence[bool], p0: float = 0.9, p1: float = 0.7, threshold: float = 7.0
) -> DriftResult:
    """Bernoulli CUSUM for a drop in gold accuracy from ``p0`` to ``p1``.

    Each correct answer adds ``log(p1/p0) < 0``, each error ``log((1-p1)/(1-p0)) > 0``; the
    statistic is clipped at 0 and an alarm is raised when it exceeds ``threshold`` (larger =
    fewer false alarms, slower detection). Evidence: the CUSUM path, the estimated change
    point and the accuracy before and after it.
    """
    if not 0 < p1 < p0 < 1:
        raise ValueError(f"need 0 < p1 < p0 < 1, got p0={p0}, p1={p1}")
    c = np.asarray(correct, dtype=bool)
    up, down = np.log((1 - p1) / (1 - p0)), np.log(p1 / p0)
    stat, path, last_zero, alarm = 0.0, [], 0, None
    for t, ok in enumerate(c):
        stat = max(0.0, stat + (down if ok else up))
        path.append(stat)
        if stat == 0.0:
            last_zero = t + 1
        if alarm is None and stat > threshold:
            alarm = t
            break
    start = last_zero if alarm is not None else None
    before = float(c[:start].mean()) if start else None
    after = float(c[start : alarm + 1].mean()) if alarm is not None else None
    return DriftResult(alarm is not None, alarm, start, path, threshold, before, after, p0, p1)


def rolling_accuracy(correct: Sequence[bool], window: int = 20) -> np.ndarray:
    """Accuracy over the last ``window`` gold outcomes (NaN until the window is full)."""
    c = np.asarray(correct, dtype=float)
    out = np.full(len(c), np.nan)
    if len(c) >= window:
        csum = np.concatenate([[0.0], np.cumsum(c)])
        out[window - 1 :] = (csum[window:] - csum[:-window]) / window
    return out


def leave_one_out_agreement(units: Any, raters: Any, values: Any) -> dict[Any, dict[str, float]]:
    """Each rater's agreement with the majority of the *other* raters on shared units.

    For every label, the consensus is the most frequent value among the other raters' labels of
    that unit (ties: the label counts as half agreement when it is one of the tied values).
    Units the rater labelled alone are skipped. Returns ``{rater: {"agreement", "n"}}``.
    """
    vals = as_array(values, "values", dtype=float)
    n = len(vals)
    u_raw = as_array(units, "units", n)
    r_raw = as_array(raters, "raters", n)
    keep = ~np.isnan(vals)
    u, _ = factorize(u_raw[keep])
    r, r_labels = factorize(r_raw[keep])
    c, cats = factorize(vals[keep])
    k = len(cats)
    counts = np.bincount(u * k + c, minlength=(u.max() + 1) * k).reshape(-1, k)
    others = counts[u].copy()
    others[np.arange(len(u)), c] -= 1
    has_others = others.sum(axis=1) > 0
    top = others.max(axis=1)
    is_top = others == top[:, None]
    n_top = is_top.sum(axis=1)
    score = np.where(is_top[np.arange(len(u)), c], 1.0 / n_top, 0.0)
    score = np.where(n_top == 1, score, np.where(is_top[np.arange(len(u)), c], 0.5, 0.0))
    out = {}
    for j, rater in enumerate(r_labels.tolist()):
        sel = (r == j) & has_others
        out[rater] = {
            "agreement": float(score[sel].mean()) if sel.any() else float("nan"),
            "n": int(sel.sum()),
        }
    return out


# -- scoring a judgment against a gold item: one rule for the server, the report and exports --


def expected_judgment(item_id: str, gold: dict[str, Any]) -> JudgmentBase:
    return GoldAnswer.model_validate(gold).expected(item_id)


def score_gold(judgment: JudgmentBase, item_id: str, gold: dict[str, Any]) -> bool | None:
    """Whether ``judgment`` matches the gold answer; ``None`` when the kind cannot be scored.

    Pairwise: the preferred candidate (or a tie) must match; strength counts only within
    ``tolerance`` when the gold sets one above 0. Other kinds: every label-table value of the
    expected answer must be matched within ``tolerance``.
    """
    answer = GoldAnswer.model_validate(gold)
    expected = expected_judgment(item_id, gold)
    if expected.kind != judgment.kind:
        return False
    if isinstance(judgment, PairwiseJudgment) and isinstance(expected, PairwiseJudgment):
        if expected.pair != judgment.pair:
            return False
        same_side = expected.direction == judgment.direction
        if answer.tolerance > 0 and expected.score is not None and judgment.score is not None:
            return same_side and abs(expected.score - judgment.score) <= answer.tolerance
        return same_side
    want = {(r.unit, r.dimension): r.value for r in expected.label_rows()}
    if not want:
        return None
    got = {(r.unit, r.dimension): r.value for r in judgment.label_rows()}
    return all(
        key in got and abs(got[key] - value) <= answer.tolerance for key, value in want.items()
    )


def gold_outcomes(
    judgments: Sequence[JudgmentBase], gold_of: dict[str, dict[str, Any]]
) -> dict[str, list[bool]]:
    """Each rater's gold outcomes in submission order: ``gold_of`` maps an item id to its gold
    answer (``GoldAnswer`` as a dict); judgments of other items, and kinds the gold answer cannot
    score, are skipped. Review and adjudication passes are not graded (they set the answer)."""
    graded = [j for j in judgments if j.item_id in gold_of and int(j.provenance.review_pass) == 0]
    graded.sort(key=lambda j: (j.provenance.submitted_at is None, j.provenance.submitted_at or 0))
    out: dict[str, list[bool]] = {}
    for j in graded:
        correct = score_gold(j, j.item_id, gold_of[j.item_id])
        if correct is not None:
            out.setdefault(j.provenance.rater_id, []).append(correct)
    return out
