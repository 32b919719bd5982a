"""The quality report in memory that does not grow with the project: item by item accumulators.

:class:`ReportAccumulator` takes a project one item at a time (the item and its judgments, as
the store or a JSONL file yields them), resolves that item's labels (the label-set rule is per
unit, and every unit belongs to one item) and folds them at once into sums; nothing of the item
is kept but what the statistics need. :meth:`ReportAccumulator.result` gives the dict of
:func:`preflab.quality.report.build_report`.

What is exact and what is sampled (``bounds``, :class:`Bounds`):

* Exact at any size (sums over units or judgments): the label-set counts, every count in the
  report, alpha's point estimate (the coincidence matrix is a sum over units; kept as the
  integer sums of :class:`~.mergeable.GroupAgreement`, which the sharded path merges, and
  finished by the same :func:`~.mergeable.alpha_figures`), percent agreement and Gwet's AC
  (sums over units), leave-one-out agreement and the confusion tables against the
  others' consensus (per unit, summed per rater), gold accuracy, position bias, formatting bias,
  the length-bias counts, share and histogram, intransitive triads, every telemetry flag of a
  judgment's own telemetry, the adjudication queue's top ``max_queue`` rows and its total.
* Kept whole up to a bound, then sampled (seeded, uniform, reservoir sampling), and said so:
  the units of one agreement row (``units``, 50,000): above it the bootstrap interval of alpha
  is computed on a sample of that many pairable units, the row says
  ``"ci_sample": {"units": 50000, "of": N}``; the chosen/rejected length pairs (``pairs``,
  500,000): above it the length ratio quantiles and the logistic slope come from a sample,
  ``length_bias["sample"] = {"pairs": ..., "of": ...}``; the raters' active times, a budget
  shared by all raters (``times``, 500,000 times, 4 MB, :class:`SharedReservoirs`; and at
  most ``times_per_rater``, 250,000, for one rater): above it the raters with the most times
  keep an equal share and their median is a sample's,
  ``raters[r]["median_seconds_sample"] = {"labels": ..., "of": ...}``; the rationales compared
  for near duplicates (``rationales``, 50,000): the first that many,
  ``telemetry_flags_sample = {"rationales": ..., "of": ...}`` in the report.
* Kept on disk past a bound, the result unchanged: the names of an exact agreement row's units
  (:class:`KeptUnits`), past 1 MiB a row or 8 MiB over every row together
  (:class:`NamesInMemory`: a project of many batches has many rows).

Below every bound the result equals :func:`build_report` on the same judgments (the unit
bootstrap draws the same units: the kept rows go through the same functions).
"""

from __future__ import annotations

import hashlib
import heapq
import math
import os
import random
import tempfile
import weakref
from array import array
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableSequence, Sequence
from dataclasses import dataclass
from itertools import accumulate, combinations
from typing import Any

import numpy as np

from preflab.schema import Item, JudgmentBase, PairwiseJudgment

from .adjudication import (
    AdjudicationSettings,
    group_labels,
    queue_order,
    reasons_for,
    unit_scores,
)
from .agreement.cohen import Weights
from .agreement.gwet import gwet_ac, gwet_weights
from .agreement.krippendorff import krippendorff_alpha_ci
from .agreement.percent import percent_agreement
from .agreement.preference import DEFAULT_LEVELS, level_for
from .bias import (
    FEATURE_NAMES,
    FormattingCounts,
    length_bias,
    position_bias_from_counts,
    text_features,
    word_length,
)
from .gold import gold_accuracy_from_counts, score_gold
from .labels import ADJUDICATION, LABEL_SET_RULE, resolve_labels
from .mergeable import GroupAgreement, alpha_figures, fold_unit_values
from .spans import SpanTally
from .telemetry import TelemetrySettings, judgment_flags, near_duplicate_pairs
from .text_stats import MEMO

Batches = Mapping[str, Any] | Callable[[JudgmentBase], Any] | None


@dataclass(frozen=True)
class Bounds:
    """Above these sizes a statistic that needs per-unit data works on a seeded sample (module
    docstring); below them everything is exact."""

    # Chosen so that a project reaches every bound by a few hundred thousand judgments (the
    # report's memory is flat from there, docs/benchmarks.md "Stop 44"), with samples still far
    # larger than the figures need (the 1M bench project, 83,334 units a row and 1,000,000
    # pairs: alpha's interval ends on a 50,000-unit sample within 0.0035 of the whole's, the
    # length slope's standard error 0.011 on 500,000 pairs against 0.008 on all of them).
    units: int = 50_000
    pairs: int = 500_000
    times_per_rater: int = 250_000
    #: the active times kept over all raters (:class:`SharedReservoirs`): 8 bytes each
    times: int = 500_000
    rationales: int = 50_000
    text_cache: int = 65_536


def guideline_version_of(judgment: JudgmentBase) -> str:
    """``v3`` for the guideline (project settings) version a rater saw; ``unrecorded`` when the
    label does not say (imports without the field, judgments from before 0010)."""
    version = judgment.provenance.guideline_version
    return "unrecorded" if version is None else f"v{version}"


class Reservoir:
    """The first ``bound`` things added, then a uniform sample of that size (algorithm R,
    seeded): ``seen`` counts everything added."""

    def __init__(self, bound: int, seed: int = 0, typecode: str | None = None) -> None:
        self.bound = bound
        # numbers in an array: 8 bytes each instead of a Python object's 32
        self.items: MutableSequence[Any] = array(typecode) if typecode else []
        self.seen = 0
        self._rng = random.Random(seed)

    @property
    def sampled(self) -> bool:
        return self.seen > self.bound

    def add(self, thing: Any) -> None:
        self.seen += 1
        if len(self.items) < self.bound:
            self.items.append(thing)
            return
        k = self._rng.randrange(self.seen)
        if k < self.bound:
            self.items[k] = thing


class SharedReservoirs:
    """One :class:`Reservoir` per key (a rater's active times) under a total budget: every
    value is kept while the values added number at most ``total`` (exact below it), and no
    reservoir holds more than ``per_key``. When the kept values pass ``total``, the reservoirs
    are given one common bound, the largest that fits them in 7/8 of ``total`` (water-filling:
    a key with fewer values keeps all of them, the others an equal share), and each one over it
    is cut to a uniform subsample of that size (seeded) and goes on sampling with that bound
    (algorithm R's invariant holds: a uniform subsample of a uniform sample is uniform). A key
    added later starts with the common bound. So the memory is ``8 * total`` bytes however many
    keys and values there are (with ``total`` >= the number of keys: each keeps one value)."""

    def __init__(self, total: int, per_key: int, seed: int = 0, typecode: str = "d") -> None:
        self.total = total
        self.bound = per_key
        self.seed = seed
        self.typecode = typecode
        self.by_key: dict[Any, Reservoir] = {}
        self.kept = 0

    def add(self, key: Any, value: Any) -> None:
        res = self.by_key.get(key)
        if res is None:
            res = self.by_key[key] = Reservoir(self.bound, seed=self.seed, typecode=self.typecode)
        grew = len(res.items) < res.bound
        res.add(value)
        if grew:
            self.kept += 1
            if self.kept > self.total:
                self._shrink()

    def _shrink(self) -> None:
        target = max(self.total - self.total // 8, len(self.by_key))
        sizes = sorted(len(r.items) for r in self.by_key.values())
        # the largest common bound b with sum(min(size, b)) <= target
        below, bound = 0, sizes[-1]
        for i, size in enumerate(sizes):
            share = (target - below) // (len(sizes) - i)
            if size > share:
                bound = max(share, 1)
                break
            below += size
        self.bound = min(self.bound, bound)
        self.kept = 0
        for res in self.by_key.values():
            res.bound = self.bound
            items = res.items
            if len(items) > self.bound:
                keep = sorted(res._rng.sample(range(len(items)), self.bound))
                res.items = array(self.typecode, [items[i] for i in keep])
            self.kept += len(res.items)


class Patterns:
    """Units' sorted values (their *patterns*) interned: a unit is kept as a 4-byte pattern id,
    the pattern once (a preference label takes a handful of values, so a row of 200,000 units
    has a few dozen patterns)."""

    def __init__(self) -> None:
        self.ids: dict[tuple[float, ...], int] = {}
        self.values: list[tuple[float, ...]] = []

    def __len__(self) -> int:
        return len(self.values)

    def id(self, pattern: tuple[float, ...]) -> int:
        found = self.ids.get(pattern)
        if found is None:
            found = self.ids[pattern] = len(self.values)
            self.values.append(pattern)
        return found

    def compacted(self, kept: MutableSequence[int]) -> Patterns:
        """A table of the patterns ``kept`` refers to, ``kept`` renumbered in place (a
        reservoir's replaced units leave patterns behind: with continuous values, many)."""
        out = Patterns()
        for k, old in enumerate(kept):
            kept[k] = out.id(self.values[old])
        return out


#: the bytes of unit names a :class:`KeptUnits` holds in memory; past it they are appended to
#: a temporary file (a row's kept units: up to ``Bounds.units`` names, ~60 bytes each)
KEPT_NAMES = 1 << 20
#: the bytes of unit names (and their 8-byte ends) all the rows of one report hold in memory
#: together (:class:`NamesInMemory`): a project of many batches has many rows below their own
#: :data:`KEPT_NAMES`
KEPT_NAMES_TOTAL = 8 << 20


class NamesInMemory:
    """The unit-name bytes the :class:`KeptUnits` of one report hold in memory together, and
    those rows: past ``limit`` (:data:`KEPT_NAMES_TOTAL`) the rows holding the most write
    theirs to their files until at most half the limit is held. Without it each row holds up
    to :data:`KEPT_NAMES` of its own, so the report's memory grew with the number of batches
    (a row per batch x kind x dimension: ~0.6 MB a row of 8,000 units, 80 rows at 40 batches
    of 1M judgments). Writing names out changes nothing but where they are kept (they are read
    back in order), so the report is the same."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = KEPT_NAMES_TOTAL if limit is None else limit
        self.held = 0
        self.rows: weakref.WeakSet[KeptUnits] = weakref.WeakSet()

    def grew(self, size: int) -> None:
        self.held += size
        if self.held > self.limit:
            for kept in sorted(self.rows, key=KeptUnits.held, reverse=True):
                if self.held <= self.limit // 2:
                    break
                kept._write()


class KeptUnits:
    """The units of an agreement row while it is exact, compactly: each unit's pattern id in
    memory (4 bytes), its name as UTF-8 (bytes sort as the strings do, but the names are decoded
    back for the same ``np.unique`` order as the reference) with its end offset in a buffer of at
    most ``spill`` (:data:`KEPT_NAMES`) bytes, written to a temporary file whenever it is full
    and read back by :meth:`unit_names` (a row of 200,000 kept units, the bound before stop 44,
    held ~12 MB of names in memory, the ten rows of a 3M project ~100 MB at the report's feed).
    The file is opened only to append a buffer or to read the names, and removed with the units
    (or :meth:`close`)."""

    def __init__(self, spill: int | None = None, shared: NamesInMemory | None = None) -> None:
        self.spill = KEPT_NAMES if spill is None else spill
        #: the names held by every row of the report together (``None``: this row's alone)
        self.shared = shared
        if shared is not None:
            shared.rows.add(self)
        self.names = bytearray()  # the names not written yet
        self.ends = array("q")  # their ends in ``names``
        self.pattern_ids = array("I")
        self.patterns = Patterns()
        #: the temporary file's path (``None``: nothing written) and the names written to it
        self.path: str | None = None
        self.n_written = 0
        self._remove: weakref.finalize[[str], KeptUnits] | None = None

    def __len__(self) -> int:
        return len(self.pattern_ids)

    def held(self) -> int:
        """The bytes of names (and their ends) in memory."""
        return len(self.names) + 8 * len(self.ends)

    def add(self, unit: str, values: tuple[float, ...]) -> None:
        name = unit.encode("utf-8", "surrogatepass")
        self.names += name
        self.ends.append(len(self.names))
        self.pattern_ids.append(self.patterns.id(values))
        if self.shared is not None:
            self.shared.grew(len(name) + 8)
        if len(self.names) > self.spill:
            self._write()

    def add_many(self, units: Sequence[str], values: Iterable[tuple[float, ...]]) -> None:
        """:meth:`add` of each unit in order (an ASCII run of names in one append)."""
        before = self.held()
        joined = "".join(units)
        if joined.isascii():
            ends = accumulate(map(len, units), initial=len(self.names))
            next(ends)
            self.names += joined.encode("ascii")
            self.ends.extend(ends)
        else:
            for unit in units:
                self.names += unit.encode("utf-8", "surrogatepass")
                self.ends.append(len(self.names))
        self.pattern_ids.extend(map(self.patterns.id, values))
        if self.shared is not None:
            self.shared.grew(self.held() - before)
        if len(self.names) > self.spill:
            self._write()

    def _write(self) -> None:
        """The buffer appended to the file: its names' count and byte length, their ends,
        their bytes."""
        if not self.ends:
            return
        if self.path is None:
            fd, self.path = tempfile.mkstemp(prefix="preflab-kept-units-")
            os.close(fd)
            self._remove = weakref.finalize(self, _remove_file, self.path)
        with open(self.path, "ab") as f:
            f.write(array("q", (len(self.ends), len(self.names))).tobytes())
            f.write(self.ends.tobytes())
            f.write(self.names)
        self.n_written += len(self.ends)
        self._drop_buffer()

    def _drop_buffer(self) -> None:
        if self.shared is not None:
            self.shared.held -= self.held()
        self.names = bytearray()
        self.ends = array("q")

    def close(self) -> None:
        """Remove the file and the names in memory (the names are gone)."""
        self._drop_buffer()
        if self.shared is not None:
            self.shared.rows.discard(self)
        if self._remove is not None:
            self._remove()

    def values(self) -> Iterator[tuple[float, ...]]:
        patterns = self.patterns.values
        return (patterns[i] for i in self.pattern_ids)

    def unit_names(self) -> list[str]:
        out: list[str] = []
        if self.path is not None:
            with open(self.path, "rb") as f:
                while head := f.read(16):
                    n, size = array("q", head)
                    ends = array("q")
                    ends.frombytes(f.read(8 * n))
                    _decode(out, f.read(size), ends)
        _decode(out, self.names, self.ends)
        return out


def _decode(out: list[str], names: bytes | bytearray, ends: Sequence[int]) -> None:
    start = 0
    for end in ends:
        out.append(names[start:end].decode("utf-8", "surrogatepass"))
        start = end


def _remove_file(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


class AgreementGroup:
    """One agreement row (a batch or guideline version, kind and dimension), unit by unit.

    Keeps each unit's values (with its name, for the unit order the bootstrap draws from;
    :class:`KeptUnits`) until more than ``bound`` units have values; then only sums over units
    (patterns of values, folded into the coincidence matrix and Gwet's sums) and a reservoir of
    pairable units for the interval (their pattern ids)."""

    def __init__(self, bound: int, names: NamesInMemory | None = None) -> None:
        self.bound = bound
        self.n_labels = 0
        self.n_units = 0
        self.n_pairable_units = 0
        self.raters: set[Any] = set()
        self.integral = True
        self.units = KeptUnits(shared=names)  # units with a value, while exact
        self.sample: Reservoir | None = None
        self.sample_patterns = Patterns()
        self.patterns: Counter[tuple[float, ...]] = Counter()
        self.n_pairable = 0  # units with two or more values (the bootstrap's units)
        # sums over units (only once sampled): alpha's coincidences and percent agreement as
        # the integer sums of mergeable.GroupAgreement (one implementation with the sharded
        # path's), Gwet's
        self.coincidence: dict[int, dict[tuple[float, float], int]] = {}
        self.agree: dict[int, tuple[int, int]] = {}
        self.gwet_s: defaultdict[tuple[float, float], float] = defaultdict(float)
        self.gwet_t = 0.0
        self.gwet_pi: defaultdict[float, float] = defaultdict(float)
        self.gwet_rated = 0

    def add_unit(self, unit: str, values: Sequence[float], raters: Iterable[Any]) -> None:
        self.add_sorted(unit, len(values), _finite_sorted(values), raters)

    def add_sorted(
        self, unit: str, n_values: int, finite: tuple[float, ...], raters: Iterable[Any]
    ) -> None:
        """:meth:`add_unit` of a unit of ``n_values`` values whose finite ones, sorted, are
        ``finite`` (an item's unit is in two rows: its batch's and its guideline version's)."""
        self.n_labels += n_values
        self.n_units += 1
        self.n_pairable_units += n_values >= 2
        self.raters.update(raters)
        if not finite:
            return
        if self.integral and any(v != round(v) for v in finite):
            self.integral = False
        if len(finite) >= 2:
            self.n_pairable += 1
        if self.sample is None:
            self.units.add(unit, finite)
            if len(self.units) > self.bound:
                self._start_sampling()
            return
        self.patterns[finite] += 1
        if len(finite) >= 2:
            self._keep(finite)
        if len(self.patterns) > 4 * self.bound:
            self._fold()

    def add_sorted_many(
        self,
        units: Sequence[str],
        n_values: Sequence[int],
        finites: Sequence[tuple[float, ...]],
        raters: Iterable[Any],
    ) -> None:
        """:meth:`add_sorted` of each unit in order (``raters``: all their raters): while the
        row stays exact (its kept units at most ``bound``) and every unit has a value, the
        counts and kept units in bulk; the rest unit by unit."""
        self.raters.update(raters)
        done = 0
        if self.sample is None and all(finites):
            done = min(len(units), max(self.bound - len(self.units), 0))
        if done:
            head = finites[:done]
            counts = n_values[:done]
            self.n_labels += sum(counts)
            self.n_units += done
            self.n_pairable_units += sum(n >= 2 for n in counts)
            if self.integral and any(v != round(v) for f in set(head) for v in f):
                self.integral = False
            self.n_pairable += sum(len(f) >= 2 for f in head)
            self.units.add_many(units[:done], head)
        for k in range(done, len(units)):
            self.add_sorted(units[k], n_values[k], finites[k], ())

    def _keep(self, finite: tuple[float, ...]) -> None:
        assert self.sample is not None
        self.sample.add(self.sample_patterns.id(finite))
        if len(self.sample_patterns) > 2 * self.bound:
            self.sample_patterns = self.sample_patterns.compacted(self.sample.items)

    def _start_sampling(self) -> None:
        self.sample = Reservoir(self.bound, seed=0, typecode="I")
        for finite in self.units.values():
            self.patterns[finite] += 1
            if len(finite) >= 2:
                self._keep(finite)
        self.units.close()
        self.units = KeptUnits()  # not added to again
        self._fold()

    def _fold(self) -> None:
        """Add the patterns to the sums (a pattern is a unit's sorted values)."""
        for finite, times in self.patterns.items():
            counts = Counter(finite)
            m = len(finite)
            self.gwet_rated += times
            for c, n_c in counts.items():
                self.gwet_pi[c] += times * n_c / m
            if m < 2:
                continue
            fold_unit_values(self.coincidence, self.agree, counts, times)
            self.gwet_t += times / (m - 1)
            for c, n_c in counts.items():
                for k, n_k in counts.items():
                    self.gwet_s[(c, k)] += times * n_c * n_k / (m * (m - 1))
        self.patterns.clear()

    def row(
        self, key: tuple[str, str, str], levels: Mapping[str, str], n_boot: int
    ) -> dict[str, Any]:
        batch, kind, dim = key
        level = level_for(dim, np.array([] if self.integral else [0.5]), levels)
        gwet_w: Weights = (
            None if level == "nominal" else ("linear" if level == "ordinal" else "quadratic")
        )
        head = {
            "batch": batch,
            "kind": kind,
            "dimension": dim,
            "level": level,
            "n_labels": self.n_labels,
            "n_units": self.n_units,
            "n_pairable_units": self.n_pairable_units,
            "n_raters": len(self.raters),
        }
        if self.sample is None:
            units, values = _long(self.units.unit_names(), list(self.units.values()))
            ci = krippendorff_alpha_ci(units, values, level, n_boot=n_boot, seed=0)
            return {
                **head,
                "alpha": ci.estimate,
                "alpha_low": ci.low,
                "alpha_high": ci.high,
                "percent_agreement": percent_agreement(units, values),
                "gwet_ac": gwet_ac(units, values, gwet_w),
            }
        self._fold()
        patterns = self.sample_patterns.values
        units, values = _long(
            [str(k) for k in range(len(self.sample.items))],
            [patterns[i] for i in self.sample.items],
        )
        ci = krippendorff_alpha_ci(units, values, level, n_boot=n_boot, seed=0)
        sums = GroupAgreement(
            self.n_labels,
            self.n_units,
            self.n_pairable,
            self.n_pairable_units,
            frozenset(),
            self.integral,
            self.coincidence,
            self.agree,
        )
        figures = alpha_figures(sums, level)
        return {
            **head,
            "alpha": figures["alpha"],
            "alpha_low": ci.low,
            "alpha_high": ci.high,
            "percent_agreement": figures["percent_agreement"],
            "gwet_ac": self._gwet(gwet_w),
            "ci_sample": {"units": len(self.sample.items), "of": self.sample.seen},
        }

    def _gwet(self, weights: Weights) -> float:
        cats = np.array(sorted(self.gwet_pi))
        q = len(cats)
        paired = sum(units for units, _ in self.agree.values())
        if q < 2:
            return 1.0 if paired else float("nan")
        if not paired:
            return float("nan")
        w = gwet_weights(cats, weights)
        idx = {v: i for i, v in enumerate(cats.tolist())}
        p_a = (
            sum(w[idx[c], idx[k]] * s for (c, k), s in self.gwet_s.items()) - self.gwet_t
        ) / paired
        pi_k = np.array([self.gwet_pi[c] / self.gwet_rated for c in cats.tolist()])
        p_e = float(w.sum() / (q * (q - 1)) * (pi_k * (1 - pi_k)).sum())
        if p_e >= 1:
            return float("nan")
        return float((p_a - p_e) / (1 - p_e))


def _finite_sorted(values: Iterable[float]) -> tuple[float, ...]:
    return tuple(sorted(v for v in values if not math.isnan(v)))


def _long(
    unit_names: Sequence[str], patterns: Sequence[tuple[float, ...]]
) -> tuple[np.ndarray, np.ndarray]:
    """The long ``(units, values)`` columns of kept units (a name and its values each), each
    unit as its name's rank among the names (``np.unique``'s codes): the agreement functions
    read units only through :func:`~.table.factorize`, whose codes of these ranks are the
    ranks themselves, as its codes of the names are; one sort of the names, not one per
    function of every label's name."""
    ranks = _ranks(unit_names)
    lengths = np.fromiter((len(v) for v in patterns), dtype=np.int64, count=len(patterns))
    values = np.fromiter((x for v in patterns for x in v), dtype=float, count=int(lengths.sum()))
    return np.repeat(ranks, lengths), values


def _ranks(unit_names: Sequence[str]) -> np.ndarray:
    """Each name's rank among the distinct names (``np.unique(names, return_inverse=True)``'s
    codes): distinct strings ranked by Python's sort of their positions (its string comparison
    is the order ``np.unique`` sorts an object array in, ~3x faster than numpy's object
    sort); anything else through ``np.unique``."""
    names = list(unit_names)
    n = len(names)
    if all(type(x) is str for x in names) and len(set(names)) == n:
        ranks = np.empty(n, dtype=np.int64)
        ranks[sorted(range(n), key=names.__getitem__)] = np.arange(n, dtype=np.int64)
        return ranks
    objects = np.empty(n, dtype=object)
    objects[:] = names
    _, codes = np.unique(objects, return_inverse=True)
    out: np.ndarray = codes.reshape(-1).astype(np.int64)
    return out


class TextFeatures:
    """Word length and formatting features of candidate texts, computed once per distinct text
    (a bounded LRU keyed by a hash of the text): one hash and one entry a text, its length at
    once, its features when first asked for (only a decided pair's texts need them)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._entries: OrderedDict[bytes, list[Any]] = OrderedDict()

    @staticmethod
    def key(text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def entry(self, text: str) -> list[Any]:
        """``[word length, features or None]`` of ``text`` (:meth:`features_of` fills the second);
        both as stored when the text was written, when they were (:mod:`.text_stats`)."""
        stored = MEMO.get(text)
        if stored is not None:
            return [stored[2], dict(zip(FEATURE_NAMES, stored[3], strict=True))]
        key = self.key(text)
        cache = self._entries
        hit = cache.get(key)
        if hit is not None:
            cache.move_to_end(key)
            return hit
        made = cache[key] = [word_length(text), None]
        if len(cache) > self.size:
            cache.popitem(last=False)
        return made

    @staticmethod
    def features_of(entry: list[Any], text: str) -> dict[str, int]:
        feats: dict[str, int] | None = entry[1]
        if feats is None:
            feats = entry[1] = text_features(text)
        return feats

    def length(self, text: str) -> int:
        result: int = self.entry(text)[0]
        return result

    def features(self, text: str) -> dict[str, int]:
        return self.features_of(self.entry(text), text)


class ReportAccumulator:
    """Feed items with :meth:`add` (each item once, with all its judgments in row order), then
    :meth:`result`. See the module docstring for what is exact and what is sampled."""

    def __init__(
        self,
        batches: Batches = None,
        metrics: Mapping[str, str] | None = None,
        n_boot: int = 200,
        adjudication: AdjudicationSettings | None = None,
        max_queue: int = 200,
        include_ai: bool = False,
        bounds: Bounds | None = None,
        telemetry: TelemetrySettings | None = None,
    ) -> None:
        self.batches = batches
        self.metrics = dict(metrics or {})
        self.n_boot = n_boot
        self.adjudication = adjudication
        self.max_queue = max_queue
        self.include_ai = include_ai
        self.bounds = bounds or Bounds()
        self.telemetry = telemetry or TelemetrySettings()
        self.texts = TextFeatures(self.bounds.text_cache)
        self.judgments_in = 0
        self.n_used = 0
        self.n_labels = 0
        self.set_aside: Counter[str] = Counter()
        self.kinds: set[str] = set()
        self.any_item = False
        self.any_pairwise = False
        self.groups: dict[tuple[str, str, str], AgreementGroup] = {}
        self.by_version: dict[tuple[str, str, str], AgreementGroup] = {}
        #: the unit names every exact row holds in memory, together
        self.kept_names = NamesInMemory()
        self.any_version = False
        self.labels: Counter[str] = Counter()
        self.rater_order: dict[str, None] = {}
        self.times = SharedReservoirs(self.bounds.times, self.bounds.times_per_rater)
        self.loo: dict[str, list[float]] = {}
        self.confusion: dict[str, Counter[tuple[float, float]]] = {}
        self.main_values: set[float] = set()
        self.gold: dict[str, list[int]] = {}
        self.position: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.formatting = FormattingCounts()
        self.pairs_c = array("q")
        self.pairs_r = array("q")
        self.pair_sample: Reservoir | None = None
        self.pending_c: list[int] = []
        self.pending_r: list[int] = []
        self.pair_sums = [0, 0, 0]  # pairs, pairs of different lengths, chosen longer
        self.pair_hist = np.zeros(24, dtype=np.int64)
        # telemetry flags: with too_fast (needs pairwise judgments somewhere) and without
        self.flags: list[list[dict[str, Any]]] = [[], []]
        self.flag_counts: list[dict[str, dict[str, int]]] = [{}, {}]
        self.rationales: list[tuple[int, str, str, str]] = []
        self.n_rationales = 0
        #: the near-duplicate search (``near_duplicate_pairs``'s signature); a caller that searched
        #: these rationales already answers from that search
        #: (:class:`~preflab.quality.near_duplicate_index.NearDuplicateIndex`)
        self.pair_search: Callable[..., list[tuple[int, int, float]]] = near_duplicate_pairs
        self.triads: dict[str, list[int]] = {}
        self.queue: list[tuple[Any, ...]] = []  # a heap of the top max_queue rows
        self.queue_total = 0
        self._queue_seq = 0
        self.span_tally = SpanTally()

    # ---------------------------------------------------------------- per item

    def _batch(self, j: JudgmentBase) -> str:
        if self.batches is None:
            return "all"
        if callable(self.batches):
            return str(self.batches(j))
        return str(self.batches.get(j.item_id, "all"))

    def add(self, judgments: Sequence[JudgmentBase], item: Item | None = None) -> None:
        """One item's judgments (all of them, in row order) and the item when known."""
        js = self._resolve(judgments)
        base = self.n_used
        self.n_used += len(js)
        if item is not None:
            self.any_item = True
        if not js:
            return
        self.span_tally.add(js)
        cols: dict[str, list[Any]] = {k: [] for k in ("u", "r", "v", "i", "d", "k", "b", "g")}
        # the label table's columns, appended to directly: a pairwise judgment's rows are
        # spelled out here (its ``label_rows``, without building a LabelRow per row: ~15 % of
        # the report's time at 1M judgments); every other kind goes through ``label_rows``
        u_add, r_add, v_add, i_add = (cols[c].append for c in "urvi")
        d_add, k_add, b_add, g_add = (cols[c].append for c in "dkbg")
        labels, rater_order, kinds = self.labels, self.rater_order, self.kinds
        for j in js:
            p = j.provenance
            rater = p.rater_id
            kind = j.kind
            kinds.add(kind)
            labels[rater] += 1
            rater_order.setdefault(rater, None)
            gv = p.guideline_version
            if gv is not None:
                self.any_version = True
            batch, version = self._batch(j), "unrecorded" if gv is None else f"v{gv}"
            if type(j) is PairwiseJudgment:
                # PairwiseJudgment.label_rows: the pair's unit, the direction, the signed strength
                item_id = j.item_id
                a, b = j.shown_order
                lo, hi = (a, b) if a <= b else (b, a)
                unit = f"{item_id}::{lo}|{hi}"
                winner = j.winner
                direction = (
                    0 if winner == "tie" else (-1 if (a if winner == "a" else b) == lo else 1)
                )
                strength = j.strength
                for dim, value in (
                    (("winner", direction),)
                    if strength is None
                    else (("winner", direction), ("strength", direction * strength))
                ):
                    u_add(unit)
                    r_add(rater)
                    v_add(float(value))
                    i_add(item_id)
                    d_add(dim)
                    k_add(kind)
                    b_add(batch)
                    g_add(version)
            else:
                for row in j.label_rows():
                    u_add(row.unit)
                    r_add(row.rater)
                    v_add(row.value)
                    i_add(row.item_id)
                    d_add(row.dimension)
                    k_add(row.kind)
                    b_add(batch)
                    g_add(version)
            self._time(j)
        self.n_labels += len(cols["v"])
        units = _item_units(cols)
        if units is None:
            self._agreement(cols)
        else:
            self._agreement_of_units(units, cols["b"][0], cols["g"][0])
        self._main(cols)
        self._item_tables(cols, js, units)
        lens = self._candidate_lengths(item)
        self._gold_and_bias(js, item, lens)
        self._telemetry(js, base, lens)

    def _resolve(self, judgments: Sequence[JudgmentBase]) -> Sequence[JudgmentBase]:
        """The item's label set (:func:`~.labels.resolve_labels`), its counts added. The usual
        item takes a shortcut with the same result: pairwise labels of one item, each of a
        different (pair, rater), none adjudicated, none by a model unless those count (then
        every label counts: no revision, no adjudication, nothing set aside)."""
        seen: set[tuple[str, str, str]] = set()
        include_ai = self.include_ai
        item_id = judgments[0].item_id if judgments else None
        for j in judgments:
            if type(j) is not PairwiseJudgment or j.item_id != item_id:
                break
            p = j.provenance
            if (p.source == "ai" and not include_ai) or int(p.review_pass) >= ADJUDICATION:
                break
            a, b = j.shown_order
            key = (a, b, p.rater_id) if a <= b else (b, a, p.rater_id)
            if key in seen:
                break
            seen.add(key)
        else:
            self.judgments_in += len(judgments)
            return judgments
        label_set = resolve_labels(judgments, include_ai=self.include_ai)
        self.judgments_in += label_set.judgments_in
        self.set_aside.update(label_set.set_aside)
        return label_set.judgments

    def _time(self, j: JudgmentBase) -> None:
        p = j.provenance
        ms: float | None = None
        if p.telemetry is not None and p.telemetry.active_ms is not None:
            ms = p.telemetry.active_ms
        elif p.started_at and p.submitted_at:
            ms = (p.submitted_at - p.started_at).total_seconds() * 1000
        if ms is None:
            return
        self.times.add(p.rater_id, ms)

    def _agreement(self, cols: Mapping[str, list[Any]]) -> None:
        bound = self.bounds.units
        keys = list(zip(cols["k"], cols["d"], cols["u"]))
        for groups, batch_col in ((self.groups, "b"), (self.by_version, "g")):
            # per (batch, kind, dimension, unit): its values and raters in row order; each row
            # of agreement gets its units in the order they first appear (as the reference's)
            units: dict[tuple[Any, str, str, str], tuple[list[float], list[Any]]] = {}
            for b, key, v, r in zip(cols[batch_col], keys, cols["v"], cols["r"]):
                full = (b, *key)
                vals_raters = units.get(full)
                if vals_raters is None:
                    units[full] = ([v], [r])
                else:
                    vals_raters[0].append(v)
                    vals_raters[1].append(r)
            for (b, kind, dim, unit), (vals, raters) in units.items():
                group = groups.get((b, kind, dim))
                if group is None:
                    group = groups[(b, kind, dim)] = AgreementGroup(bound, self.kept_names)
                group.add_unit(unit, vals, raters)

    def _agreement_of_units(self, units: ItemUnits, batch: Any, version: str) -> None:
        """:meth:`_agreement` of an item of one batch and guideline version: each unit's
        values sorted once for both its rows (the same calls to each row as there)."""
        bound = self.bounds.units
        groups, by_version = self.groups, self.by_version
        for (kind, dim, unit), (vals, raters) in units.items():
            finite = _finite_sorted(vals)
            for rows, key in ((groups, (batch, kind, dim)), (by_version, (version, kind, dim))):
                group = rows.get(key)
                if group is None:
                    group = rows[key] = AgreementGroup(bound, self.kept_names)
                group.add_sorted(unit, len(vals), finite, raters)

    def _main(self, cols: Mapping[str, list[Any]]) -> None:
        """Leave-one-out agreement and confusion against the others' consensus (winner, thumb)."""
        by_unit: dict[str, list[tuple[str, float]]] = {}
        for u, r, v, d in zip(cols["u"], cols["r"], cols["v"], cols["d"]):
            if d == "winner" or d == "thumb":
                unit_labels = by_unit.get(u)
                if unit_labels is None:
                    by_unit[u] = [(r, float(v))]
                else:
                    unit_labels.append((r, float(v)))
        loo, confusion = self.loo, self.confusion
        for labels in by_unit.values():
            finite = [(r, v) for r, v in labels if not math.isnan(v)]
            counts: dict[float, int] = {}
            for _, v in finite:
                counts[v] = counts.get(v, 0) + 1
            self.main_values.update(counts)
            # distinct raters and no missing value (the usual unit): the others' consensus of
            # the confusion table is the leave-one-out top
            simple = len(finite) == len(labels) and len({r for r, _ in labels}) == len(labels)
            for r, v in finite:
                acc = loo.get(r)
                if acc is None:
                    acc = loo[r] = [0.0, 0]
                if len(finite) < 2:
                    continue  # nobody else labelled the unit
                top, n_top, top_value = -1, 0, v
                for w, n in counts.items():
                    if w == v:
                        n -= 1
                    if n > top:
                        top, n_top, top_value = n, 1, w
                    elif n == top:
                        n_top += 1
                mine_top = counts[v] - 1 == top
                acc[0] += (1.0 if mine_top else 0.0) if n_top == 1 else (0.5 if mine_top else 0.0)
                acc[1] += 1
                if simple and n_top == 1:
                    table = confusion.get(r)
                    if table is None:
                        table = confusion[r] = Counter()
                    table[(v, top_value)] += 1
            if not simple:
                self._confusion(labels)

    def _confusion(self, labels: Sequence[tuple[str, float]]) -> None:
        """Each rater's label against the majority of the other raters' labels of a unit."""
        for r, v in labels:
            rest = [w for other, w in labels if other != r]
            if not rest:
                continue
            if any(math.isnan(w) for w in rest):  # np.unique's NaN rule, as build_report
                vals, n = np.unique(rest, return_counts=True)
                tops = [float(vals[np.argmax(n)])] if (n == n.max()).sum() == 1 else []
            else:
                votes = Counter(rest)
                most = max(votes.values())
                tops = [w for w, c in votes.items() if c == most]
            if len(tops) == 1:
                table = self.confusion.setdefault(r, Counter())
                if not (math.isnan(v) or math.isnan(tops[0])):
                    table[(v, tops[0])] += 1

    def _item_tables(
        self,
        cols: Mapping[str, list[Any]],
        js: Sequence[JudgmentBase],
        units: ItemUnits | None = None,
    ) -> None:
        """Intransitive triads and the adjudication queue: both per item (``units``: the
        item's :func:`_item_units`, when it has them)."""
        # a triad needs three pairs of one item judged by one rater (a pairwise item has one)
        if len({u for u, d in zip(cols["u"], cols["d"]) if d == "winner"}) >= 3:
            for rater, t in _triads(cols).items():
                acc = self.triads.setdefault(rater, [0, 0])
                acc[0] += t[0]
                acc[1] += t[1]
        if any(int(j.provenance.review_pass) == 2 for j in js):
            return  # an item an adjudicator already settled is not queued again
        if units is None or "step_verdict" in cols["d"]:
            groups, item_of = group_labels(cols["u"], cols["i"], cols["k"], cols["d"], cols["v"])
        else:
            groups, item_of = _unit_groups(units, str(cols["i"][0]))
        for (kind, unit), dims in groups.items():
            row = unit_scores(kind, unit, item_of[(kind, unit)], dims)
            reasons = reasons_for(row, self.adjudication)
            if not reasons:
                continue
            row["reasons"] = reasons
            self.queue_push(row, kind, unit)

    def queue_push(self, row: dict[str, Any], kind: str, unit: str) -> None:
        """A unit's adjudication row (its ``reasons`` set) into the bounded queue, in
        build_report's order: most reasons, then highest scores, then (kind, unit)."""
        self.queue_total += 1
        most, highest = queue_order(row)
        key = (-most, -highest, _Desc(kind), _Desc(unit))
        entry = (key, self._queue_seq, row)
        self._queue_seq += 1
        if len(self.queue) < self.max_queue:
            heapq.heappush(self.queue, entry)
        elif self.max_queue and key > self.queue[0][0]:
            heapq.heapreplace(self.queue, entry)

    def _candidate_lengths(self, item: Item | None) -> dict[str | None, tuple[str, list[Any]]]:
        """Each candidate's text and its :meth:`TextFeatures.entry` (word length first)."""
        if item is None:
            return {}
        out: dict[str | None, tuple[str, list[Any]]] = {}
        entry = self.texts.entry
        for c in item.candidates:
            text = c.as_text()
            out[c.id] = (text, entry(text))
        return out

    def _gold_and_bias(
        self,
        js: Sequence[JudgmentBase],
        item: Item | None,
        lens: Mapping[str | None, tuple[str, list[Any]]],
    ) -> None:
        gold = item.gold.model_dump() if item is not None and item.gold is not None else None
        chosen: list[int] = []
        rejected: list[int] = []
        features_of = self.texts.features_of
        for j in js:
            rater = j.provenance.rater_id
            if gold is not None and item is not None and int(j.provenance.review_pass) == 0:
                correct = score_gold(j, item.id or j.item_id, gold)
                if correct is not None:
                    acc = self.gold.setdefault(rater, [0, 0])
                    acc[0] += int(correct)
                    acc[1] += 1
            if not isinstance(j, PairwiseJudgment):
                continue
            self.any_pairwise = True
            if j.first_shown_chosen is not None:
                pos = self.position[rater]
                pos[0] += int(j.first_shown_chosen)
                pos[1] += 1
            c_id, r_id = j.chosen, j.rejected
            if c_id is None or r_id is None or c_id not in lens or r_id not in lens:
                continue
            (text_c, entry_c), (text_r, entry_r) = lens[c_id], lens[r_id]
            chosen.append(entry_c[0])
            rejected.append(entry_r[0])
            # an entry keeps its text's features once computed (an item's raters share them)
            self.formatting.add(features_of(entry_c, text_c), features_of(entry_r, text_r))
        self._queue_pairs(chosen, rejected)

    def _queue_pairs(self, chosen: list[int], rejected: list[int]) -> None:
        """An item's (chosen, rejected) lengths onto the pending columns, folded every 65,536."""
        if chosen:
            self.pending_c.extend(chosen)
            self.pending_r.extend(rejected)
            if len(self.pending_c) >= 65_536:
                self._pairs()

    def _pairs(self) -> None:
        """Fold the pending chosen/rejected lengths into the sums and the kept pairs."""
        chosen, rejected = self.pending_c, self.pending_r
        self.pending_c, self.pending_r = [], []
        if not chosen:
            return
        c = np.array(chosen, dtype=float)
        r = np.array(rejected, dtype=float)
        differ = c != r
        self.pair_sums[0] += len(c)
        self.pair_sums[1] += int(differ.sum())
        self.pair_sums[2] += int((c[differ] > r[differ]).sum())
        ok = (c > 0) & (r > 0)
        self.pair_hist += np.histogram(np.log2(c[ok] / r[ok]), bins=np.linspace(-3, 3, 25))[0]
        if self.pair_sample is None:
            self.pairs_c.extend(chosen)
            self.pairs_r.extend(rejected)
            if len(self.pairs_c) <= self.bounds.pairs:
                return
            # a pair as one int64 (chosen << 32 | rejected: word counts fit 32 bits)
            self.pair_sample = Reservoir(self.bounds.pairs, seed=0, typecode="q")
            for c_len, r_len in zip(self.pairs_c, self.pairs_r):
                self.pair_sample.add(c_len << 32 | r_len)
            self.pairs_c, self.pairs_r = array("q"), array("q")
            return
        for c_len, r_len in zip(chosen, rejected):
            self.pair_sample.add(c_len << 32 | r_len)

    def _telemetry(
        self,
        js: Sequence[JudgmentBase],
        base: int,
        lens: Mapping[str | None, tuple[str, list[Any]]],
    ) -> None:
        cfg = self.telemetry
        for k, j in enumerate(js):
            if j.provenance.telemetry is not None:
                words = sum(lens[c][1][0] for c in j.candidate_ids() if c in lens) if lens else 0
                for name, evidence in judgment_flags(j, words or None, cfg):
                    entry = self._flag_entry(base + k, j, name, evidence)
                    self._count_flag(entry, 0)
                    if name != "too_fast":
                        self._count_flag(entry, 1)
            if j.rationale and len(j.rationale) >= 20:
                self.n_rationales += 1
                if len(self.rationales) < self.bounds.rationales:
                    self.rationales.append(
                        (base + k, j.item_id, j.provenance.rater_id, j.rationale)
                    )

    @staticmethod
    def _flag_entry(index: int, j: JudgmentBase, name: str, evidence: Any) -> dict[str, Any]:
        return {
            "index": index,
            "item_id": j.item_id,
            "rater": j.provenance.rater_id,
            "flag": name,
            "evidence": evidence,
        }

    def _count_flag(self, entry: dict[str, Any], which: int) -> None:
        if len(self.flags[which]) < 1000:
            self.flags[which].append(entry)
        per = self.flag_counts[which].setdefault(entry["rater"], {})
        per[entry["flag"]] = per.get(entry["flag"], 0) + 1

    # ---------------------------------------------------------------- the report

    def result(self) -> dict[str, Any]:
        """The report dict (as :func:`preflab.quality.report.build_report`'s, plus the
        ``*_sample`` notes of the module docstring where a bound was passed)."""
        # the text cache serves the feed only (an item added after this fills it again): ~28 MB
        # freed before the rows' bootstraps and the length fit, the report's peak
        self.texts = TextFeatures(self.bounds.text_cache)
        agreement = [
            g.row(key, self.metrics, self.n_boot) for key, g in sorted(self.groups.items())
        ]
        by_version = []
        if self.any_version:
            for key, g in sorted(self.by_version.items()):
                row = g.row(key, self.metrics, self.n_boot)
                by_version.append({"guideline_version": row.pop("batch"), **row})
        raters: dict[str, dict[str, Any]] = {
            r: {"labels": self.labels[r]} for r in self.rater_order
        }
        for r, times in self.times.by_key.items():
            raters[r]["median_seconds"] = float(np.median(np.asarray(times.items))) / 1000
            if times.sampled:
                raters[r]["median_seconds_sample"] = {"labels": len(times.items), "of": times.seen}
        for r, (total, n) in sorted(self.loo.items()):
            raters[r]["consensus_agreement"] = total / n if n else float("nan")
            raters[r]["consensus_n"] = n
        confusions = {}
        if self.loo or self.confusion:
            cats = np.array(sorted(self.main_values))
            index = {v: i for i, v in enumerate(cats.tolist())}
            for r, pairs in self.confusion.items():
                tab = np.zeros((len(cats), len(cats)), dtype=int)
                for (mine, cons), n in pairs.items():
                    tab[index[mine], index[cons]] += n
                confusions[r] = {"categories": cats.tolist(), "table": tab.tolist()}
        honeypots = {r: acc for r, acc in self.gold.items()}
        for r, (k, n) in honeypots.items():
            raters[r]["gold"] = gold_accuracy_from_counts(k, n).as_dict()
        pos = position_bias_from_counts(self.position) if self.any_pairwise else None
        if pos:
            for r, s in pos["per_rater"].items():
                raters[r]["first_shown_share"] = s["share"]
        self._pairs()
        length = formatting = None
        if self.any_item and self.any_pairwise and self.pair_sums[0]:
            length, formatting = self._length(), self.formatting.result()
        which = 0 if self.any_item and self.any_pairwise else 1
        flags = list(self.flags[which])
        counts = {r: dict(per) for r, per in self.flag_counts[which].items()}
        for f in self._near_duplicates():
            if len(flags) < 1000:
                flags.append(f)
            per = counts.setdefault(f["rater"], {})
            per[f["flag"]] = per.get(f["flag"], 0) + 1
        for r, per in counts.items():
            raters[r]["flags"] = per
        for r, (triads, cycles) in self.triads.items():
            if triads:
                raters[r]["intransitive_rate"] = cycles / triads
        queue = [row for _, _, row in sorted(self.queue, reverse=True)]
        report: dict[str, Any] = {
            "label_set": {
                "rule": LABEL_SET_RULE,
                "include_ai": self.include_ai,
                "judgments_in": self.judgments_in,
                "judgments_used": self.n_used,
                "set_aside": dict(sorted(self.set_aside.items())),
            },
            "n_judgments": self.n_used,
            "n_labels": self.n_labels,
            "n_raters": len(raters),
            "kinds": sorted(self.kinds),
            "agreement": agreement,
            "agreement_by_guideline_version": by_version,
            "raters": {r: raters[r] for r in sorted(raters)},
            "confusion": confusions,
            "position_bias": pos,
            "length_bias": length,
            "formatting_bias": formatting,
            "telemetry_flags": flags,
            "adjudication_queue": queue,
            "adjudication_total": self.queue_total,
            "gold_accuracy": gold_accuracy_from_counts(
                sum(k for k, _ in honeypots.values()), sum(n for _, n in honeypots.values())
            ).as_dict()
            if honeypots
            else None,
        }
        if self.span_tally.any_spans:  # only a project with critique spans has the section
            report["spans"] = self.span_tally.result()
        if self.n_rationales > len(self.rationales):
            report["telemetry_flags_sample"] = {
                "rationales": len(self.rationales),
                "of": self.n_rationales,
            }
        return report

    def length_pairs(self) -> tuple[list[int], list[int]]:
        """The chosen and rejected word lengths the length-bias figures were measured on (every
        decided pair below ``bounds.pairs``, the seeded sample above), after :meth:`result`."""
        self._pairs()
        if self.pair_sample is None:
            return list(self.pairs_c), list(self.pairs_r)
        sample = np.asarray(self.pair_sample.items, dtype=np.int64)
        return [int(v) for v in sample >> 32], [int(v) for v in sample & 0xFFFFFFFF]

    def length_columns(self) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`length_pairs` as two int64 numpy columns (8 bytes a pair, not a Python int's
        ~36: ~70 MB less for the 983,070 pairs of a 1M project), after :meth:`result`."""
        self._pairs()
        if self.pair_sample is None:
            return np.array(self.pairs_c, dtype=np.int64), np.array(self.pairs_r, dtype=np.int64)
        sample = np.asarray(self.pair_sample.items, dtype=np.int64)
        return sample >> 32, sample & 0xFFFFFFFF

    def _length(self) -> dict[str, Any]:
        if self.pair_sample is None:
            return length_bias(self.pairs_c, self.pairs_r)
        # the sample as two numpy columns, not lists: a list of 2,000,000 numpy scalars cost
        # ~80 MB a column (the report's peak at 10M judgments when that was the bound)
        sample = np.asarray(self.pair_sample.items, dtype=np.int64)
        chosen = (sample >> 32).astype(float)  # as length_bias reads them: no copy there
        rejected = (sample & 0xFFFFFFFF).astype(float)
        del sample
        out = length_bias(chosen, rejected)
        del chosen, rejected
        n, n_differ, longer = self.pair_sums
        out.update(
            n_pairs=n,
            n_differ=n_differ,
            share_chosen_longer=longer / n_differ if n_differ else float("nan"),
            ratio_histogram=self.pair_hist.tolist(),
            sample={"pairs": len(self.pair_sample.items), "of": self.pair_sample.seen},
        )
        return out

    def _near_duplicates(self) -> list[dict[str, Any]]:
        cfg = self.telemetry
        kept = self.rationales
        dups = self.pair_search(
            [t for *_, t in kept],
            [r for _, _, r, _ in kept],
            cfg.min_jaccard,
            cfg.shingle,
            cfg.num_perm,
        )
        out = []
        for a, b, sim in dups:
            (ia, item_a, ra, _), (ib, item_b, rb, _) = kept[a], kept[b]
            out.append(
                {
                    "index": ia,
                    "item_id": item_a,
                    "rater": ra,
                    "flag": "near_duplicate_rationale",
                    "evidence": {"other_index": ib, "other_rater": rb, "jaccard": sim},
                }
            )
            out.append(
                {
                    "index": ib,
                    "item_id": item_b,
                    "rater": rb,
                    "flag": "near_duplicate_rationale",
                    "evidence": {"other_index": ia, "other_rater": ra, "jaccard": sim},
                }
            )
        return out


#: an item's label values and raters per ``(kind, dimension, unit)``, in row order
ItemUnits = dict[tuple[str, str, str], tuple[list[float], list[Any]]]


def _item_units(cols: Mapping[str, list[Any]]) -> ItemUnits | None:
    """The item's values and raters per ``(kind, dimension, unit)`` (each key where its first
    row is), when every row has one item id, one batch and one guideline version (the usual
    item); ``None`` otherwise."""
    b_col, g_col, i_col = cols["b"], cols["g"], cols["i"]
    n = len(b_col)
    if not n or b_col.count(b_col[0]) != n or g_col.count(g_col[0]) != n:
        return None
    if i_col.count(i_col[0]) != n:
        return None
    units: ItemUnits = {}
    for key, v, r in zip(zip(cols["k"], cols["d"], cols["u"]), cols["v"], cols["r"]):
        vals_raters = units.get(key)
        if vals_raters is None:
            units[key] = ([v], [r])
        else:
            vals_raters[0].append(v)
            vals_raters[1].append(r)
    return units


def _unit_groups(
    units: ItemUnits, item_id: str
) -> tuple[dict[tuple[str, str], dict[str, list[float]]], dict[tuple[str, str], str]]:
    """:func:`~.adjudication.group_labels` of an item's units (no step verdicts: those group
    by candidate), from :func:`_item_units`: values per ``(kind, unit)`` and dimension, NaN
    left out, in row order."""
    groups: dict[tuple[str, str], dict[str, list[float]]] = {}
    item_of: dict[tuple[str, str], str] = {}
    for (kind, dim, unit), (vals, _) in units.items():
        finite = [float(v) for v in vals if not math.isnan(v)]
        if not finite:
            continue
        key = (str(kind), str(unit))
        dims = groups.get(key)
        if dims is None:
            dims = groups[key] = {}
            item_of[key] = item_id
        dims[str(dim)] = finite
    return groups, item_of


class _Desc:
    """A string that sorts in reverse (so that a max-heap key keeps ascending ``(kind, unit)``)."""

    __slots__ = ("s",)

    def __init__(self, s: str) -> None:
        self.s = s

    def __lt__(self, other: _Desc) -> bool:
        return self.s > other.s

    def __gt__(self, other: _Desc) -> bool:
        return self.s < other.s

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.s == other.s

    def __hash__(self) -> int:
        return hash(self.s)


def _triads(cols: Mapping[str, list[Any]]) -> dict[str, tuple[int, int]]:
    """Per rater: (triads judged on all three pairs, strict cycles) of one item's winner rows
    (:func:`preflab.quality.agreement.preference.intransitive_triads`, per item)."""
    prefs: dict[str, dict[tuple[str, str], float]] = defaultdict(dict)
    for unit, rater, value, dim in zip(cols["u"], cols["r"], cols["v"], cols["d"]):
        if dim != "winner" or math.isnan(value):
            continue
        _, _, pair = str(unit).rpartition("::")
        lo, _, hi = pair.partition("|")
        prefs[rater][(lo, hi)] = value
    out = {}
    for rater, edges in prefs.items():
        cands = sorted({c for pair in edges for c in pair})
        triads = cycles = 0
        if len(cands) >= 3:
            for a, b, c in combinations(cands, 3):
                if (a, b) in edges and (b, c) in edges and (a, c) in edges:
                    triads += 1
                    if (edges[(a, b)], edges[(b, c)], edges[(a, c)]) in ((-1, -1, 1), (1, 1, -1)):
                        cycles += 1
        out[rater] = (triads, cycles)
    return out


__all__ = [
    "DEFAULT_LEVELS",
    "FEATURE_NAMES",
    "Bounds",
    "ReportAccumulator",
    "Reservoir",
    "SharedReservoirs",
]
