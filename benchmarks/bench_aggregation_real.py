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
import json
import sys
from functools import partial
from pathlib import Path

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


def datasets(data: Path) -> dict[str, tuple[list, list, list]]:
    return {
        "pandalm": pandalm_table(data / "pandalm-testset-v1.json"),
        "pandalm-crowd20": pandalm_table(data / "pandalm-testset-v1.json", block=20),
        "tulu1": tulu1_table(data / "tulu1-human-eval.jsonl"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
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
