"""Benchmarks of preflab.quality against the reference packages, timed in the same run.

    python benchmarks/bench_quality.py [--quick] [--repeat N] [--groups bt,ds] [--skip-ref] [--boot N]

Each case runs in its own subprocess so its peak RSS (``ru_maxrss`` of the child) is honest.
Cases: Krippendorff alpha (ours vs ``krippendorff.alpha``), Dawid-Skene (ours vs crowd-kit, same
iterations), Bradley-Terry (fit, Spearman vs choix ML, bootstrap rounds). Times are medians over
``--repeat`` runs, wall-clock and CPU (the CPU time is what a shared machine's load cannot
inflate). ``--skip-ref`` times only our side (choix's ML fit takes minutes at 10^6 comparisons).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = str(Path(__file__).resolve().parent.parent / "src")


def data_alpha(n_units, n_raters, per):
    import numpy as np

    rng = np.random.default_rng(0)
    units = np.repeat(np.arange(n_units), per)
    raters = np.concatenate([rng.choice(n_raters, per, replace=False) for _ in range(n_units)])
    truth = rng.integers(1, 6, n_units)
    vals = np.where(
        rng.random(len(units)) < 0.7, truth[units], rng.integers(1, 6, len(units))
    ).astype(float)
    return units, raters, vals


def case(name, size, quick):
    import numpy as np

    out = {}
    if name.startswith("alpha"):
        units, raters, vals = data_alpha(*size)
        if name == "alpha_ours":
            from preflab.quality import krippendorff_alpha

            t = time.perf_counter()
            out["value"] = krippendorff_alpha(units, vals, "ordinal")
            out["seconds"] = time.perf_counter() - t
        else:
            import krippendorff

            mat = np.full((size[1], size[0]), np.nan)
            mat[raters, units] = vals
            t = time.perf_counter()
            out["value"] = float(
                krippendorff.alpha(reliability_data=mat, level_of_measurement="ordinal")
            )
            out["seconds"] = time.perf_counter() - t
    elif name.startswith("ds"):
        n_units, n_raters, per, n_iter = size
        rng = np.random.default_rng(0)
        truth = rng.integers(0, 3, n_units)
        units = np.repeat(np.arange(n_units), per)
        raters = rng.integers(0, n_raters, len(units))
        acc = rng.uniform(0.4, 0.95, n_raters)
        labels = np.where(
            rng.random(len(units)) < acc[raters], truth[units], rng.integers(0, 3, len(units))
        )
        if name == "ds_ours":
            from preflab.quality import dawid_skene

            t = time.perf_counter()
            r = dawid_skene(
                units, raters, labels, n_iter=n_iter, tol=-np.inf, confusion_prior=0, class_prior=0
            )  # crowd-kit: no priors
            out["seconds"] = time.perf_counter() - t
            np.save(os.environ["BENCH_TMP"] + "/ds_ours.npy", r.labels)
        else:
            import pandas as pd
            from crowdkit.aggregation import DawidSkene

            df = pd.DataFrame({"task": units, "worker": raters, "label": labels})
            t = time.perf_counter()
            r = DawidSkene(n_iter=n_iter, tol=-1e300).fit(df)
            out["seconds"] = time.perf_counter() - t
            out["iterations"] = len(r.loss_history_)
            np.save(os.environ["BENCH_TMP"] + "/ds_ref.npy", r.labels_.sort_index().to_numpy())
    elif name.startswith("bt"):
        n_cmp, n_items, n_boot = size
        rng = np.random.default_rng(0)
        true = rng.normal(size=n_items)
        a = rng.integers(0, n_items, n_cmp)
        b = (a + rng.integers(1, n_items, n_cmp)) % n_items
        win = rng.random(n_cmp) < 1 / (1 + np.exp(-(true[a] - true[b])))
        w, lo = np.where(win, a, b), np.where(win, b, a)
        if name == "bt_ours":
            from preflab.quality import bradley_terry

            t, c = time.perf_counter(), time.process_time()
            r = bradley_terry(w, lo, items=np.arange(n_items))
            out["seconds"] = time.perf_counter() - t
            out["cpu_seconds"] = time.process_time() - c
            out["converged"] = r.converged
            np.save(os.environ["BENCH_TMP"] + "/bt_ours.npy", r.strengths)
            t, c = time.perf_counter(), time.process_time()
            bradley_terry(w, lo, items=np.arange(n_items), n_boot=n_boot)
            out["bootstrap_seconds"] = time.perf_counter() - t - out["seconds"]
            out["bootstrap_cpu_seconds"] = time.process_time() - c - out["cpu_seconds"]
            out["bootstrap_rounds"] = n_boot
        else:
            import choix

            t = time.perf_counter()
            s = choix.ilsr_pairwise(n_items, np.stack([w, lo], 1), tol=1e-10, max_iter=500)
            out["seconds"] = time.perf_counter() - t
            np.save(os.environ["BENCH_TMP"] + "/bt_ref.npy", s)
    import resource

    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def run(name, size, quick):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, __file__, "--case", name, "--size", json.dumps(size)] + (
        ["--quick"] if quick else []
    )
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return json.loads(res.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--groups", default="alpha,ds,bt", help="comma-separated subset of alpha,ds,bt")
    ap.add_argument("--skip-ref", action="store_true", help="time only our implementation")
    ap.add_argument("--boot", type=int, default=None, help="bootstrap rounds for bt (default 100)")
    ap.add_argument("--case")
    ap.add_argument("--size")
    args = ap.parse_args()
    if args.case:
        case(args.case, json.loads(args.size), args.quick)
        return
    import tempfile

    import numpy as np
    from scipy.stats import spearmanr

    repeat = args.repeat or (1 if args.quick else 3)
    sizes = {
        "alpha": [2000, 50, 5] if args.quick else [200_000, 500, 5],
        "ds": [2000, 50, 5, 20] if args.quick else [200_000, 500, 5, 100],
        "bt": [20_000, 500, 5] if args.quick else [1_000_000, 10_000, 100],
    }
    if args.boot is not None:
        sizes["bt"][2] = args.boot
    groups = args.groups.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["BENCH_TMP"] = tmp
        results = {}
        for group, ours, ref in [
            ("alpha", "alpha_ours", "alpha_ref"),
            ("ds", "ds_ours", "ds_ref"),
            ("bt", "bt_ours", "bt_ref"),
        ]:
            if group not in groups:
                continue
            names = (ours,) if args.skip_ref else (ours, ref)
            runs = {
                k: [run(k, sizes[group], args.quick) for _ in range(repeat if k == ours else 1)]
                for k in names
            }
            med = {k: statistics.median(r["seconds"] for r in v) for k, v in runs.items()}
            row = {"size": sizes[group], "ours_median_s": med[ours]}
            if "cpu_seconds" in runs[ours][0]:
                row["ours_median_cpu_s"] = statistics.median(r["cpu_seconds"] for r in runs[ours])
            row["ours_peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs[ours])
            if not args.skip_ref:
                row["ref_s"] = med[ref]
                row["speedup"] = med[ref] / med[ours]
                row["ref_peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs[ref])
            if group == "alpha" and not args.skip_ref:
                row["same_value"] = abs(runs[ours][0]["value"] - runs[ref][0]["value"]) < 1e-9
            if group == "ds" and not args.skip_ref:
                a, b = np.load(tmp + "/ds_ours.npy"), np.load(tmp + "/ds_ref.npy")
                row["same_labels_share"] = float(np.mean(a == b))
                row["ref_iterations"] = runs[ref][0]["iterations"]
            if group == "bt":
                if not args.skip_ref:
                    a, b = np.load(tmp + "/bt_ours.npy"), np.load(tmp + "/bt_ref.npy")
                    row["spearman_vs_choix"] = float(spearmanr(a, b)[0])
                row["converged"] = all(r["converged"] for r in runs[ours])
                row["bootstrap_s"] = statistics.median(r["bootstrap_seconds"] for r in runs[ours])
                row["bootstrap_cpu_s"] = statistics.median(
                    r["bootstrap_cpu_seconds"] for r in runs[ours]
                )
                row["bootstrap_rounds"] = sizes[group][2]
            results[group] = row
            print(
                f"{group:6s} "
                + " ".join(
                    f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()
                ),
                flush=True,
            )
        print(json.dumps(results))


if __name__ == "__main__":
    main()
