"""Aggregation methods on real human preference data, scored by leave-one-rater-out accuracy.

    python benchmarks/bench_aggregation_real.py [--data ../shared/data] [--json]

Reads the full PandaLM test set (``pandalm-testset-v1.json``, 3 annotators x 999 pairs) and the
Tulu-1 human evaluation (``tulu1-human-eval.jsonl``, 17 evaluators) by path; the label columns of
both also ship as ``tests/data/{pandalm,tulu1}-labels.jsonl.gz`` (the regression tests use them).
A label is the side preferred in canonical order (-1 first better, 0 tie, 1 second better).

``pandalm-crowd20`` is the same PandaLM labels with each annotator cut into blocks of 20
consecutive items, each block its own rater id: the shape of a real crowd (many raters, ~20 labels
each) under which maximum-likelihood Dawid-Skene over-fits degenerate confusion matrices.
Figures are in docs/aggregation.md.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from preflab.quality.aggregation import dawid_skene, majority_vote  # noqa: E402
from preflab.quality.aggregation.holdout import leave_one_rater_out  # noqa: E402

PANDALM_SIDE = {0: 0, 1: -1, 2: 1}  # PandaLM: 0 tie, 1 response1 better, 2 response2 better
TULU_SIDE = {
    "a-is-better": -1,
    "a-is-slightly-better": -1,
    "tie": 0,
    "b-is-slightly-better": 1,
    "b-is-better": 1,
}


def read_records(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        text = f.read()
    return (
        json.loads(text)
        if text.lstrip().startswith("[")
        else [json.loads(x) for x in text.splitlines() if x]
    )


def pandalm_table(path: Path, block: int | None = None) -> tuple[list, list, list]:
    """``(units, raters, labels)``; ``block``: cut each annotator into raters of that many items."""
    units, raters, labels = [], [], []
    for n, row in enumerate(read_records(path)):
        for k in (1, 2, 3):
            units.append(row["idx"])
            raters.append(f"annotator{k}" + (f"/{n // block}" if block else ""))
            labels.append(PANDALM_SIDE[int(row[f"annotator{k}"])])
    return units, raters, labels


def tulu1_table(path: Path) -> tuple[list, list, list]:
    """One unit per (instance, model pair), the pair in sorted order (evaluators saw both orders)."""
    units, raters, labels = [], [], []
    for row in read_records(path):
        if not row["evaluator"] or not row["preference"]:
            continue
        side = TULU_SIDE[row["preference"]]
        pair = (row["model_a"], row["model_b"])
        if pair[0] > pair[1]:
            pair, side = pair[::-1], -side
        units.append(f"{int(row['instance_index'])}:{pair[0]}:{pair[1]}")
        raters.append(row["evaluator"])
        labels.append(side)
    return units, raters, labels


def oriented(table: tuple[list, list, list]) -> tuple[list, list, list]:
    """The table in an export's orientation: each unit's sides swapped or not by a hash of the
    unit (an export's canonical order is sorted candidate ids, hashes of the answers, so "first"
    says nothing about the answer). Majority vote does not change; a model with a class prior
    over sides may."""
    units, raters, labels = table
    flip = [hashlib.sha256(str(u).encode()).digest()[0] & 1 for u in units]
    return units, raters, [-lab if f else lab for lab, f in zip(labels, flip, strict=True)]


#: sides in canonical order mirrored: the export's symmetry (``preflab.io.export.aggregators``)
MIRROR = {-1: 1, 0: 0, 1: -1}


def held_out_log_likelihood(
    table: tuple[list, list, list], method: Any, folds: int = 5, seed: int = 0
) -> float:
    """Mean log-probability per label of held-out units' labels under a model fitted on the rest.

    Units are split into ``folds`` at random; for each fold the model (a Dawid-Skene variant,
    which returns confusion matrices and a class prior) is fitted on the other units and scores
    each held-out unit's labels by their marginal probability ``sum_k p_k prod_j pi_j[k, l_j]``.
    Labels of raters the fit never saw are left out (marginalised). Higher is better.
    """
    units, raters, labels = (np.asarray(x, dtype=object) for x in table)
    ids = np.unique(units.astype(str))
    fold_of = dict(zip(ids.tolist(), np.random.default_rng(seed).integers(0, folds, len(ids))))
    fold = np.array([fold_of[str(u)] for u in units])
    total, n = 0.0, 0
    for f in range(folds):
        train, test = fold != f, fold == f
        fit = method(units[train], raters[train], labels[train])
        rater_ix = {r: i for i, r in enumerate(fit.raters.tolist())}
        class_ix = {c: i for i, c in enumerate(fit.classes.tolist())}
        log_pi = np.log(np.maximum(fit.confusion, 1e-10))
        by_unit: dict[Any, np.ndarray] = {}
        for u, r, lab in zip(units[test], raters[test], labels[test], strict=True):
            if r not in rater_ix or lab not in class_ix:
                continue
            acc = by_unit.setdefault(u, np.log(np.maximum(fit.priors, 1e-10)).copy())
            acc += log_pi[rater_ix[r], :, class_ix[lab]]
            n += 1
        for acc in by_unit.values():
            top = acc.max()
            total += float(top + np.log(np.exp(acc - top).sum()))
    return total / n


def decided_agreement(table: tuple[list, list, list], method: Any, rule: str) -> dict[str, Any]:
    """Leave-one-rater-out with the export's decision: only units the export would write count
    (and, from the same fits, ``accuracy``: :func:`leave_one_rater_out`'s figure).

    ``rule``: ``"plurality"`` (a strict top count, not a tie: :func:`aggregate_pairwise`) or
    ``"posterior"`` (the top posterior 0.1 above every other side and not a tie: the
    Dawid-Skene aggregator). ``agree`` is the share of held-out labels on written units equal to
    the written side, ``rows`` how many held-out labels fell on written units.
    """
    from preflab.io.export.aggregators import separates

    units, raters, labels = (np.asarray(x, dtype=object) for x in table)
    hit = rows = 0
    expected: list[float] = []
    for rater in np.unique(raters.astype(str)):
        held = raters.astype(str) == rater
        rest = set(units[~held].tolist())
        fit = method(units[~held], raters[~held], labels[~held])
        row = {u: i for i, u in enumerate(fit.units.tolist())}
        col = {c: i for i, c in enumerate(fit.classes.tolist())}
        for u, lab in zip(units[held], labels[held], strict=True):
            if u not in rest:
                continue
            post = fit.posteriors[row[u]]
            tied = np.isclose(post, post.max(), rtol=0, atol=1e-12)
            expected.append(tied[col[lab]] / tied.sum() if lab in col else 0.0)
            top = np.sort(post)[::-1]
            decided = (
                (top[0] > top[1] + 1e-12 if rule == "plurality" else separates(post))
                if len(post) > 1
                else True
            )
            side = fit.classes[int(np.argmax(post))]
            if not decided or side == 0:
                continue
            rows += 1
            hit += int(side == lab)
    return {
        "accuracy": float(np.mean(expected)),
        "agree": hit / rows if rows else float("nan"),
        "rows": rows,
    }


METHODS = {
    "majority_vote": majority_vote,
    "dawid_skene_ml_1": partial(
        dawid_skene, n_iter=1, tol=-float("inf"), confusion_prior=0, class_prior=0
    ),
    "dawid_skene_ml_5": partial(
        dawid_skene, n_iter=5, tol=-float("inf"), confusion_prior=0, class_prior=0
    ),
    "dawid_skene_ml_100": partial(
        dawid_skene, n_iter=100, tol=-float("inf"), confusion_prior=0, class_prior=0
    ),
    "dawid_skene_map": partial(
        dawid_skene, n_iter=1000, tol=1e-10
    ),  # the defaults' priors, to convergence
}


def datasets(data: Path, crowd3: bool = False) -> dict[str, tuple[list, list, list]]:
    out = {
        "pandalm": pandalm_table(data / "pandalm-testset-v1.json"),
        "pandalm-crowd20": pandalm_table(data / "pandalm-testset-v1.json", block=20),
    }
    if crowd3:  # the shape of issue 28 section 3: every rater seen on three items
        out["pandalm-crowd3"] = pandalm_table(data / "pandalm-testset-v1.json", block=3)
    out["tulu1"] = tulu1_table(data / "tulu1-human-eval.jsonl")
    return out


def _export_ds(prior: float, accuracy: float, min_labels: int) -> Any:
    return partial(
        dawid_skene,
        n_iter=1000,
        tol=1e-10,
        confusion_prior=prior,
        prior_accuracy=accuracy,
        class_prior=1.0 if prior else 0.0,
        min_labels=min_labels,
        mirror=MIRROR,
    )


#: The export study (``--export-study``): the export's Dawid-Skene (mirror symmetry, evidence
#: rule) under several priors and evidence thresholds, against majority vote and the 1979 model.
EXPORT_METHODS: dict[str, tuple[Any, str]] = {
    "majority": (majority_vote, "plurality"),
    "ML 1979 (no prior, own matrices)": (
        partial(
            dawid_skene, n_iter=1000, tol=1e-10, confusion_prior=0, class_prior=0, min_labels=0
        ),
        "posterior",
    ),
    "priors 10/0.9, own matrices, no mirror (before)": (
        partial(dawid_skene, n_iter=1000, tol=1e-10, min_labels=0),
        "posterior",
    ),
    "no prior, min 20": (_export_ds(0, 0.9, 20), "posterior"),
    "1 / 0.7, min 20": (_export_ds(1, 0.7, 20), "posterior"),
    "2 / 0.8, min 20": (_export_ds(2, 0.8, 20), "posterior"),
    "5 / 0.8, min 20": (_export_ds(5, 0.8, 20), "posterior"),
    "5 / 0.9, min 20": (_export_ds(5, 0.9, 20), "posterior"),
    "10 / 0.9, min 20": (_export_ds(10, 0.9, 20), "posterior"),
    "20 / 0.9, min 20": (_export_ds(20, 0.9, 20), "posterior"),
    "10 / 0.9, min 10": (_export_ds(10, 0.9, 10), "posterior"),
    "10 / 0.9, min 50": (_export_ds(10, 0.9, 50), "posterior"),
}


def export_study(data: Path) -> dict[str, dict[str, dict[str, float]]]:
    """Per data set (in export orientation) and method: leave-one-rater-out accuracy, held-out
    log-likelihood per label (Dawid-Skene variants only), written rows' agreement and count."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, table in datasets(data, crowd3=True).items():
        table = oriented(table)
        out[name] = {}
        for m, (fn, rule) in EXPORT_METHODS.items():
            row = decided_agreement(table, fn, rule)
            if m != "majority":
                row["heldout_ll"] = held_out_log_likelihood(table, fn)
            out[name][m] = row
            print(name, m, row, file=sys.stderr, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--export-study",
        action="store_true",
        help="priors and evidence thresholds of the export's Dawid-Skene (docs/aggregation.md)",
    )
    args = ap.parse_args()
    if args.export_study:
        study = export_study(args.data)
        if args.json:
            print(json.dumps(study, indent=2))
            return
        for name, rows in study.items():
            print(f"\n{name}: method | LORO accuracy | held-out LL/label | rows agree | rows")
            for m, r in rows.items():
                ll = f"{r['heldout_ll']:.4f}" if "heldout_ll" in r else "-"
                print(f"  {m:<48} {r['accuracy']:.4f}  {ll:>8}  {r['agree']:.4f}  {r['rows']}")
        return
    results = {
        name: {m: leave_one_rater_out(*table, fn) for m, fn in METHODS.items()}
        for name, table in datasets(args.data).items()
    }
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print("data set          " + " ".join(f"{m:>19}" for m in METHODS) + "      n")
    for name, row in results.items():
        n = next(iter(row.values()))["n"]
        print(
            f"{name:<17} " + " ".join(f"{r['accuracy']:>19.4f}" for r in row.values()) + f" {n:>6}"
        )


if __name__ == "__main__":
    main()
