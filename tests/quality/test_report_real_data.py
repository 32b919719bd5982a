"""The report and the agreement measures on real human preference data (tests/data: excerpts of
the public sets, cut by scripts/cut-test-data.py; licences in tests/data/LICENSE-DATA)."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from preflab.quality import (
    LabelTable,
    build_report,
    load_judgments_jsonl,
    pairwise_cohens_kappa,
    render_html,
)
from preflab.quality.agreement import category_counts, unanimous_share
from preflab.schema import Item, PairwiseJudgment, dump_judgment

DATA = Path(__file__).resolve().parents[1] / "data"


def gz_jsonl(name: str) -> list[dict]:
    with gzip.open(DATA / name, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def pandalm_judgments(rows) -> list[PairwiseJudgment]:
    """Each record's three annotator labels as canonical pairwise judgments."""
    js = []
    for row in rows:
        item_id = f"pandalm-{row['idx']}"
        for k in (1, 2, 3):
            score = {0: 0, 1: -1, 2: 1}[int(row[f"annotator{k}"])]  # 1 = response1 better
            js.append(
                PairwiseJudgment.from_canonical(
                    item_id, ("r1", "r2"), score, {"rater_id": f"annotator{k}"}
                )
            )
    return js


def pandalm():
    """The first 170 PandaLM records: r1/r2 candidates and three annotators' judgments."""
    rows = json.loads((DATA / "pandalm-170.json").read_text())
    items = {
        f"pandalm-{row['idx']}": Item(
            id=f"pandalm-{row['idx']}",
            prompt=str(row["instruction"]),
            candidates=[
                {"id": "r1", "text": str(row["response1"])},
                {"id": "r2", "text": str(row["response2"])},
            ],
        )
        for row in rows
    }
    return items, pandalm_judgments(rows)


def test_pandalm_published_agreement():
    # all 999 records, label columns only: the published figures are over the whole test set
    js = pandalm_judgments(gz_jsonl("pandalm-labels.jsonl.gz"))
    t = LabelTable.from_judgments(js).select(dimension="winner")
    pairs = pairwise_cohens_kappa(t.units, t.raters, t.values)
    # data README: raw agreement 0.913 / 0.929 / 0.918, Cohen's kappa 0.852 / 0.879 / 0.862 (sklearn)
    got = [(round(p["agreement"], 3), round(p["kappa"], 3)) for _, p in sorted(pairs.items())]
    assert sorted(a for a, _ in got) == sorted([0.913, 0.929, 0.918])
    assert sorted(k for _, k in got) == sorted([0.852, 0.879, 0.862])
    assert unanimous_share(t.units, t.values) == (879, 999)  # data README: 879 of 999 unanimous


def test_tulu1_winner_or_tie_agreement():
    rows = gz_jsonl("tulu1-labels.jsonl.gz")  # all 1,302 rows, the columns used here
    units, values, raters = [], [], []
    models: dict[str, int] = {}
    for r in rows:
        if not r["evaluator"] or not r["preference"]:
            continue
        s = {
            "a-is-better": -1,
            "a-is-slightly-better": -1,
            "tie": 0,
            "b-is-slightly-better": 1,
            "b-is-better": 1,
        }[r["preference"]]
        winner = "tie" if s == 0 else (r["model_a"] if s < 0 else r["model_b"])
        units.append(r["instance_index"])
        raters.append(r["evaluator"])
        values.append(models.setdefault(winner, len(models)))
    # rater pairs = pairs of labels of one instance by *different* evaluators (13 pairs of
    # one evaluator's repeated labels are not rater pairs)
    from itertools import combinations

    by_unit = defaultdict(list)
    for u, r, v in zip(units, raters, values):
        by_unit[u].append((r, v))
    pairs = [
        (a[1], b[1])
        for labels in by_unit.values()
        for a, b in combinations(labels, 2)
        if a[0] != b[0]
    ]
    # data README: winner-or-tie agreement 0.574 over 169 rater pairs (winner = model name or tie)
    assert len(pairs) == 169
    assert np.mean([a == b for a, b in pairs]) == pytest.approx(0.574, abs=5e-4)
    # the library's per-unit measure on the same table is in the same range
    table, _, _ = category_counts(units, values)
    assert table.sum() == len(values)


def test_report_on_pandalm_is_json_and_html_is_safe(tmp_path):
    items, js = pandalm()
    # an untrusted rater id and model output must come out escaped
    evil = "<script>alert(1)</script>"
    items["pandalm-0"] = Item(
        id="pandalm-0",
        prompt="p",
        candidates=[{"id": "r1", "text": evil}, {"id": "r2", "text": "x"}],
    )
    js.append(PairwiseJudgment.from_canonical("pandalm-0", ("r1", "r2"), 2, {"rater_id": evil}))
    path = tmp_path / "j.jsonl"
    with path.open("w") as fh:
        for j in js:
            row = dump_judgment(j)
            if j.provenance.rater_id == "annotator1":
                row["item"] = items[j.item_id].model_dump(mode="json")
            fh.write(json.dumps(row) + "\n")
    loaded, loaded_items = load_judgments_jsonl(path)
    assert len(loaded) == len(js) and len(loaded_items) == len(items)
    batches = {i: ("even" if int(i.split("-")[1]) % 2 == 0 else "odd") for i in items}
    report = build_report(
        loaded,
        items=loaded_items,
        batches=batches,
        gold={"annotator1": [True] * 9 + [False]},
        n_boot=50,
    )
    json.dumps(report, allow_nan=False)
    dims = {(a["batch"], a["dimension"]) for a in report["agreement"]}
    assert ("even", "winner") in dims and ("odd", "strength") in dims
    assert report["raters"]["annotator1"]["gold"]["accuracy"] == 0.9
    assert report["length_bias"]["n_pairs"] > 0 and report["position_bias"]["overall"]["n"] > 0
    html = render_html(report)
    assert evil not in html and "&lt;script&gt;" in html
    assert "<script" not in html.lower() and "http://" not in html.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    )


def test_load_judgments_reports_bad_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"kind": "pairwise", "item_id": "i", "shown_order": ["a", "a"], "winner": "a", "strength": 1, "provenance": {"rater_id": "r"}}\n'
    )
    with pytest.raises(ValueError, match="bad.jsonl:1:"):
        load_judgments_jsonl(path)


def test_report_on_hh_rlhf_length_bias():
    rows = gz_jsonl("hh-rlhf-300.jsonl.gz")
    items, js = {}, []
    for k, r in enumerate(rows):
        c, rej = (t.rsplit("\n\nAssistant:", 1)[1].strip() for t in (r["chosen"], r["rejected"]))
        items[f"hh{k}"] = Item(
            id=f"hh{k}",
            prompt="p",
            candidates=[{"id": "chosen", "text": c}, {"id": "rejected", "text": rej}],
        )
        js.append(
            PairwiseJudgment(
                item_id=f"hh{k}",
                shown_order=("chosen", "rejected"),
                winner="a",
                strength=2,
                provenance={"rater_id": "hh"},
            )
        )
    report = build_report(js, items=items, n_boot=20)
    assert 0.3 < report["length_bias"]["share_chosen_longer"] < 0.6
    assert report["position_bias"]["overall"]["share"] == 1.0
    assert "Length bias" in render_html(report)


@pytest.mark.slow
def test_benchmark_quick_runs():
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_quality.py"
    res = subprocess.run(
        [sys.executable, str(script), "--quick"], capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["alpha"]["same_value"] and out["ds"]["same_labels_share"] >= 0.999
    assert out["bt"]["spearman_vs_choix"] >= 0.999
