"""Export speed: preflab's Parquet path against pyarrow writing the same columns directly.

    python benchmarks/bench_export.py                  # 1,000,000 pairs, 3 repeats, e2e 10,000 pairs
    python benchmarks/bench_export.py --pairs 100000 --repeats 5 --json out.json

What is timed:

1. **writer path** (``--pairs``, default 1,000,000): resolved pairs already in memory
   (``ResolvedPair`` objects over items with 4 candidates, so 6 pairs per item). preflab:
   ``writers.write_data`` with the ``trl-reward`` exporter to Parquet, i.e. building the
   ``prompt, chosen, rejected, margin`` columns from the pairs and their items, Arrow arrays
   with the explicit schema, zstd row groups of 65,536 rows. Baseline: the same four columns as
   ready-made Python lists, ``pa.table`` with the same schema and ``pq.write_table`` with the
   same compression and row-group size. Both runs alternate; medians are reported. Target: the
   ratio preflab / pyarrow <= 2.
2. **end to end** (``--e2e-pairs``, default 10,000): a SQLite database with one item per pair and
   3 raters' pairwise labels per item; ``export_project`` (read, resolve, aggregate, write
   Parquet, card, manifest with SHA-256, export log), timed once.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from preflab.io.export import EXPORT_FORMATS, ExportData, ExportOptions, export_project
from preflab.io.export.base import BATCH_ROWS
from preflab.io.export.resolve import ResolvedPair
from preflab.io.export.writers import PARQUET_COMPRESSION, write_data
from preflab.schema import Item, PairwiseJudgment


def _vocabulary(n: int = 20_000, seed: int = 42) -> list[str]:
    """Pseudo-words with Zipf-like reuse below: text that compresses like prose, not like a loop."""
    rng = random.Random(seed)
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    weights = [12, 9, 8, 8, 7, 7, 6, 6, 6, 4, 4, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    return ["".join(rng.choices(letters, weights, k=rng.randint(2, 9))) for _ in range(n)]


WORDS = _vocabulary()
#: Zipf's law over the vocabulary (word of rank r has probability proportional to 1/r)
CUM_WEIGHTS = list(__import__("itertools").accumulate(1 / r for r in range(1, len(WORDS) + 1)))


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(WORDS, cum_weights=CUM_WEIGHTS, k=n))


def make_data(n_pairs: int, seed: int = 0) -> ExportData:
    """``n_pairs`` resolved pairs over items of 4 candidates (6 pairs each)."""
    rng = random.Random(seed)
    items: dict[str, Item] = {}
    pairs: list[ResolvedPair] = []
    combos = [(a, b) for a in range(4) for b in range(a + 1, 4)]
    k = 0
    while len(pairs) < n_pairs:
        item_id = f"itm-{k}"
        items[item_id] = Item.model_construct(
            id=item_id,
            prompt=sentence(rng, 20),
            domains=[],
            reference=None,
            gold=None,
            metadata={},
            candidates=[_cand(f"c{c}", sentence(rng, 40)) for c in range(4)],
        )
        for a, b in combos[: n_pairs - len(pairs)]:
            pairs.append(
                ResolvedPair(
                    item_id,
                    f"c{a}",
                    f"c{b}",
                    float(rng.randint(1, 3)),
                    3,
                    2 / 3,
                    ("h1", "h2", "h3"),
                )
            )
        k += 1
    return ExportData(project="bench", items=items, pairs=pairs)


def _cand(cid: str, text: str):
    from preflab.schema import Candidate

    return Candidate.model_construct(
        id=cid, text=text, messages=None, model=None, source="model", metadata={}
    )


def direct_columns(data: ExportData) -> dict[str, list]:
    cols: dict[str, list] = {"prompt": [], "chosen": [], "rejected": [], "margin": []}
    for p in data.pairs:
        item = data.items[p.item_id]
        cols["prompt"].append(item.prompt)
        cols["chosen"].append(item.candidate(p.chosen_id).text)
        cols["rejected"].append(item.candidate(p.rejected_id).text)
        cols["margin"].append(p.strength)
    return cols


def bench_writer(n_pairs: int, repeats: int, workdir: Path) -> dict:
    t0 = time.perf_counter()
    data = make_data(n_pairs)
    cols = direct_columns(data)
    setup_s = time.perf_counter() - t0
    exporter = EXPORT_FORMATS["trl-reward"]
    options = ExportOptions(format="trl-reward", out=workdir, file_format="parquet")
    schema = exporter.schema(data, options)
    preflab_s, direct_s = [], []
    for r in range(repeats):
        out = workdir / f"preflab-{r}"
        out.mkdir()
        t = time.perf_counter()
        rows = write_data(exporter, data, options, out)
        preflab_s.append(time.perf_counter() - t)
        assert rows == {"train.parquet": n_pairs}

        t = time.perf_counter()
        table = pa.table(cols, schema=schema)
        pq.write_table(
            table,
            workdir / f"direct-{r}.parquet",
            compression=PARQUET_COMPRESSION,
            row_group_size=BATCH_ROWS,
        )
        direct_s.append(time.perf_counter() - t)
        del table
    ours = pq.read_table(workdir / "preflab-0" / "train.parquet")
    theirs = pq.read_table(workdir / "direct-0.parquet")
    assert ours.schema == theirs.schema and ours.num_rows == theirs.num_rows == n_pairs
    if n_pairs <= 200_000:
        assert ours.equals(theirs)
    size = (workdir / "preflab-0" / "train.parquet").stat().st_size
    med_p, med_d = statistics.median(preflab_s), statistics.median(direct_s)
    return {
        "pairs": n_pairs,
        "items": len(data.items),
        "repeats": repeats,
        "setup_s": round(setup_s, 2),
        "preflab_s": [round(x, 3) for x in preflab_s],
        "pyarrow_s": [round(x, 3) for x in direct_s],
        "preflab_median_s": round(med_p, 3),
        "pyarrow_median_s": round(med_d, 3),
        "ratio": round(med_p / med_d, 3),
        "preflab_pairs_per_s": round(n_pairs / med_p),
        "parquet_bytes": size,
    }


def bench_end_to_end(n_pairs: int, workdir: Path) -> dict:
    from preflab.schema import JUDGMENT_KINDS
    from preflab.store import Base, make_engine, transaction
    from preflab.store.repo import (
        create_project,
        get_or_create_rater,
        item_row_from_item,
        judgment_row_from_judgment,
    )

    rng = random.Random(1)
    engine = make_engine(f"sqlite:///{workdir / 'bench.db'}")
    Base.metadata.create_all(engine)
    t0 = time.perf_counter()
    with transaction(engine) as s:
        project = create_project(s, "bench", kinds=list(JUDGMENT_KINDS))
        raters = [get_or_create_rater(s, project, f"r{k}") for k in range(3)]
        for start in range(0, n_pairs, 2000):
            rows = []
            for k in range(start, min(n_pairs, start + 2000)):
                item = Item(
                    id=f"itm-{k}",
                    prompt=sentence(rng, 20),
                    candidates=[
                        {"id": "a", "text": sentence(rng, 40)},
                        {"id": "b", "text": sentence(rng, 40)},
                    ],
                )
                rows.append((item, item_row_from_item(project, item)))
            s.add_all([r for _, r in rows])
            s.flush()
            judgments = []
            for item, row in rows:
                for rater in raters:
                    j = PairwiseJudgment(
                        item_id=item.id,
                        shown_order=("a", "b"),
                        winner=rng.choice("aab"),
                        strength=rng.randint(1, 3),
                        provenance={"rater_id": rater.rater_key},
                    )
                    judgments.append(judgment_row_from_judgment(project, row, rater, j))
            s.add_all(judgments)
    fill_s = time.perf_counter() - t0
    t = time.perf_counter()
    # random votes have no agreement: force past the floor (the gate's figures are still computed and timed)
    options = ExportOptions(
        format="trl-reward", out=workdir / "e2e", file_format="parquet", force=True
    )
    manifest = export_project(engine, "bench", options)
    export_s = time.perf_counter() - t
    engine.dispose()
    return {
        "pairs_in": n_pairs,
        "judgments": 3 * n_pairs,
        "rows_out": manifest["counts"]["rows_out"],
        "db_fill_s": round(fill_s, 2),
        "export_s": round(export_s, 3),
        "judgments_per_s": round(3 * n_pairs / export_s),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--e2e-pairs", type=int, default=10_000)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--workdir", type=Path, help="scratch directory (default: a temporary one)")
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="preflab-bench-", dir=args.workdir))
    try:
        results = {
            "writer": bench_writer(args.pairs, args.repeats, workdir / "writer")
            if (workdir / "writer").mkdir() is None
            else None
        }
        if args.e2e_pairs:
            (workdir / "e2e").mkdir()
            results["end_to_end"] = bench_end_to_end(args.e2e_pairs, workdir / "e2e")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    w = results["writer"]
    print(
        f"writer path, {w['pairs']:,} pairs (trl-reward -> Parquet, zstd), median of {w['repeats']}:"
    )
    print(f"  preflab  {w['preflab_median_s']:8.3f} s   runs {w['preflab_s']}")
    print(f"  pyarrow  {w['pyarrow_median_s']:8.3f} s   runs {w['pyarrow_s']}")
    print(f"  ratio    {w['ratio']:8.3f}   (target <= 2)   file {w['parquet_bytes'] / 1e6:.1f} MB")
    if "end_to_end" in results:
        e = results["end_to_end"]
        print(
            f"end to end (SQLite -> export_project -> Parquet), {e['pairs_in']:,} items x 3 raters: "
            f"{e['export_s']:.3f} s, {e['rows_out']:,} rows, {e['judgments_per_s']:,} judgments/s"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
