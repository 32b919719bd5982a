#!/usr/bin/env python3
"""Cut the test fixtures in ``tests/data/`` from the full public data sets, and print the
reference figures the tests assert on them (so every expected value can be recomputed).

    python scripts/cut-test-data.py --data /path/to/data [--write]

``--data`` is a directory holding the four public files named in ``tests/data/LICENSE-DATA``
(PandaLM, Tulu-1 human eval, hh-rlhf harmless-base test, SQuALITY human eval). Without
``--write`` the script only prints the figures. The fixtures are selections of records (and, for
the ``*-labels`` files, of columns); nothing in a record is changed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import defaultdict
from itertools import combinations
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "data"
SOURCES = {
    "pandalm": "pandalm-testset-v1.json",
    "tulu1": "tulu1-human-eval.jsonl",
    "hh": "hh-rlhf-harmless-base-test.jsonl.gz",
}
PANDALM_RECORDS = 170  # covers the six boolean responses (records 157-164) and 24 short pairs
HH_LINES = 300
TULU_LABEL_COLUMNS = ("id", "instance_index", "model_a", "model_b", "preference", "evaluator")
PANDALM_LABEL_COLUMNS = ("idx", "annotator1", "annotator2", "annotator3")


def write_gz_lines(path: Path, lines: list[str]) -> None:
    # mtime=0: the same input gives the same bytes, so a re-cut shows no spurious diff
    with path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as fh:
        fh.write("".join(lines).encode("utf-8"))


def cut(data: Path) -> None:
    pandalm = json.loads((data / SOURCES["pandalm"]).read_text(encoding="utf-8"))
    # the source file is json.dumps(records, indent=4): the same layout keeps line numbers meaningful
    (FIXTURES / f"pandalm-{PANDALM_RECORDS}.json").write_text(
        json.dumps(pandalm[:PANDALM_RECORDS], indent=4)
    )
    write_gz_lines(
        FIXTURES / "pandalm-labels.jsonl.gz",
        [json.dumps({k: r[k] for k in PANDALM_LABEL_COLUMNS}) + "\n" for r in pandalm],
    )
    tulu = [json.loads(line) for line in (data / SOURCES["tulu1"]).open(encoding="utf-8")]
    write_gz_lines(
        FIXTURES / "tulu1-labels.jsonl.gz",
        [json.dumps({k: r[k] for k in TULU_LABEL_COLUMNS}) + "\n" for r in tulu],
    )
    with gzip.open(data / SOURCES["hh"], "rt", encoding="utf-8") as fh:
        hh = [line for _, line in zip(range(HH_LINES), fh)]
    write_gz_lines(FIXTURES / f"hh-rlhf-{HH_LINES}.jsonl.gz", hh)


def figures() -> dict:
    """The reference figures on the fixtures, computed without preflab (scikit-learn, counting)."""
    from sklearn.metrics import cohen_kappa_score

    labels = [json.loads(x) for x in gzip.open(FIXTURES / "pandalm-labels.jsonl.gz", "rt")]
    pandalm = {}
    for a, b in combinations((1, 2, 3), 2):
        x, y = ([r[f"annotator{k}"] for r in labels] for k in (a, b))
        agree = sum(p == q for p, q in zip(x, y)) / len(x)
        pandalm[f"annotator{a}-annotator{b}"] = (round(agree, 3), round(cohen_kappa_score(x, y), 3))
    unanimous = sum(r["annotator1"] == r["annotator2"] == r["annotator3"] for r in labels)

    by_unit = defaultdict(list)
    for r in (json.loads(x) for x in gzip.open(FIXTURES / "tulu1-labels.jsonl.gz", "rt")):
        if r["evaluator"] and r["preference"]:
            sign = {"a": -1, "t": 0, "b": 1}[r["preference"][0]]
            by_unit[r["instance_index"]].append(
                (r["evaluator"], "tie" if sign == 0 else r["model_a" if sign < 0 else "model_b"])
            )
    pairs = [(a[1], b[1]) for v in by_unit.values() for a, b in combinations(v, 2) if a[0] != b[0]]

    def final(text: str) -> str:
        return text.rsplit("\n\nAssistant:", 1)[1].strip()

    hh = [json.loads(x) for x in gzip.open(FIXTURES / f"hh-rlhf-{HH_LINES}.jsonl.gz", "rt")]
    differ = [(len(final(r["chosen"])), len(final(r["rejected"]))) for r in hh]
    differ = [(c, j) for c, j in differ if c != j]
    return {
        "pandalm_agreement_kappa": pandalm,
        "pandalm_unanimous": [unanimous, len(labels)],
        "tulu1_rater_pairs": len(pairs),
        "tulu1_winner_or_tie": round(sum(a == b for a, b in pairs) / len(pairs), 4),
        f"hh_first_{HH_LINES}_n_differ": len(differ),
        f"hh_first_{HH_LINES}_chosen_longer": [
            sum(c > j for c, j in differ),
            round(sum(c > j for c, j in differ) / len(differ), 4),
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path, required=True, help="directory with the full public data sets"
    )
    parser.add_argument(
        "--write", action="store_true", help="rewrite the fixtures (else: print the figures only)"
    )
    args = parser.parse_args()
    missing = [name for name in SOURCES.values() if not (args.data / name).is_file()]
    if missing:
        sys.exit(
            f"cut-test-data: {args.data}: missing {', '.join(missing)}; pass --data a directory "
            "holding the public data sets named in tests/data/LICENSE-DATA"
        )
    if args.write:
        cut(args.data)
    print(json.dumps(figures(), indent=2))


if __name__ == "__main__":
    main()
