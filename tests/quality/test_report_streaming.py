"""The item-by-item report (issue 27 §1) equals ``build_report`` on the same judgments, key by key
(floats to 1e-12), on PandaLM, Tulu-1 and a generated project with every kind of label; above
its bounds it samples and says so."""

from __future__ import annotations

import gzip
import json
import math
import random
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from preflab.io.quality_source import (
    NotGrouped,
    iter_jsonl_items,
    load_project,
    report_from_jsonl,
    report_from_store,
)
from preflab.quality import build_report, load_judgments_jsonl
from preflab.quality.accumulate import Bounds
from preflab.quality.report import render_html, report_from_items
from preflab.quality.table import time_window_batches
from preflab.schema import (
    Item,
    JudgmentBase,
    PairwiseJudgment,
    RankingJudgment,
    RubricJudgment,
    StepsJudgment,
    UnaryJudgment,
    dump_judgment,
)
from preflab.store import db, repo, transaction

DATA = Path(__file__).resolve().parents[1] / "data"
T0 = datetime(2026, 3, 1, tzinfo=UTC)


def assert_same(old: Any, new: Any, path: str = "report") -> None:
    """Equal key by key and in list order; floats to 1e-12."""
    if isinstance(old, dict):
        assert isinstance(new, dict), path
        assert sorted(old) == sorted(new), f"{path}: keys {sorted(old)} != {sorted(new)}"
        for k in old:
            assert_same(old[k], new[k], f"{path}.{k}")
    elif isinstance(old, list):
        assert isinstance(new, list) and len(old) == len(new), f"{path}: {old!r} != {new!r}"
        for k, (a, b) in enumerate(zip(old, new)):
            assert_same(a, b, f"{path}[{k}]")
    elif isinstance(old, float) and isinstance(new, float):
        assert math.isclose(old, new, rel_tol=1e-12, abs_tol=1e-12), f"{path}: {old} != {new}"
    else:
        assert old == new and type(old) is type(new), f"{path}: {old!r} != {new!r}"


def by_item(
    judgments: Sequence[JudgmentBase], items: dict[str, Item]
) -> Iterator[tuple[list[JudgmentBase], Item | None]]:
    """Judgments grouped per item in first-appearance order (the store's item order)."""
    groups: dict[str, list[JudgmentBase]] = {}
    for j in judgments:
        groups.setdefault(j.item_id, []).append(j)
    for item_id, js in groups.items():
        yield js, items.get(item_id)
    for item_id, it in items.items():  # items nobody labelled
        if item_id not in groups:
            yield [], it


def both(judgments, items, **kw):
    # the reference sees the judgments in item order, as load_project gives them
    ordered = [j for js, _ in by_item(judgments, items) for j in js]
    old = build_report(ordered, items=items, **kw)
    new = report_from_items(by_item(judgments, items), **kw)
    return old, new


def gz_jsonl(name: str) -> list[dict]:
    with gzip.open(DATA / name, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def test_pandalm_three_annotators():
    rows = json.loads((DATA / "pandalm-170.json").read_text())
    items = {
        f"pandalm-{r['idx']}": Item(
            id=f"pandalm-{r['idx']}",
            prompt=str(r["instruction"]),
            candidates=[
                {"id": "r1", "text": str(r["response1"])},
                {"id": "r2", "text": str(r["response2"])},
            ],
        )
        for r in rows
    }
    js = [
        PairwiseJudgment.from_canonical(
            f"pandalm-{r['idx']}",
            ("r1", "r2"),
            {0: 0, 1: -1, 2: 1}[int(r[f"annotator{k}"])],
            {"rater_id": f"annotator{k}"},
        )
        for r in rows
        for k in (1, 2, 3)
    ]
    batches = {i: ("even" if int(i.split("-")[1]) % 2 == 0 else "odd") for i in items}
    old, new = both(js, items, batches=batches, n_boot=100)
    assert old["agreement"] and old["length_bias"]["n_pairs"] > 300
    assert_same(old, new)


def test_tulu1_seventeen_evaluators():
    strength = {
        "a-is-better": -2,
        "a-is-slightly-better": -1,
        "tie": 0,
        "b-is-slightly-better": 1,
        "b-is-better": 2,
    }
    items: dict[str, Item] = {}
    js = []
    for r in gz_jsonl("tulu1-labels.jsonl.gz"):
        if not r["evaluator"] or not r["preference"]:
            continue
        item_id = f"tulu-{r['instance_index']}"
        a, b = str(r["model_a"]), str(r["model_b"])
        items.setdefault(
            item_id,
            Item(
                id=item_id,
                prompt="p",
                candidates=[{"id": a, "text": f"{a} answer"}, {"id": b, "text": f"{b} answer"}],
            ),
        )
        js.append(
            PairwiseJudgment.from_canonical(
                item_id, (a, b), strength[r["preference"]], {"rater_id": r["evaluator"]}, (a, b)
            )
        )
    old, new = both(js, items, n_boot=100)
    assert old["n_raters"] >= 16
    assert_same(old, new)


def generated_project(seed: int = 3) -> tuple[list[JudgmentBase], dict[str, Item]]:
    """Pairwise (3 candidates: triads), ranking, rubric, unary and steps items; revisions,
    adjudications, AI labels, gold items, telemetry, rationales (some near duplicates),
    guideline versions."""
    rng = random.Random(seed)
    raters = [f"r{k}" for k in range(7)]
    items: dict[str, Item] = {}
    js: list[JudgmentBase] = []
    texts = [
        "## Plan\n- **one** step\n- two",
        "Great question! Here it is.",
        "plain short answer",
        "a much longer plain answer with many many words in it for the length",
        "You're absolutely right, I apologize.",
    ]

    def prov(rater: str, minute: int, **extra: Any) -> dict[str, Any]:
        p: dict[str, Any] = {
            "rater_id": rater,
            "submitted_at": T0 + timedelta(minutes=minute),
            "guideline_version": rng.choice([None, 1, 2]),
        }
        if rng.random() < 0.5:
            p["telemetry"] = {
                "active_ms": rng.choice([200, 5_000, 40_000]),
                "typed_chars": rng.choice([5, 50]),
                "pasted_chars": rng.choice([0, 400]),
                "iki_cv": rng.choice([0.05, 0.5]),
                "revision_ratio": rng.choice([0.0, 0.1]),
            }
        else:
            p["started_at"] = T0 + timedelta(minutes=minute, seconds=-rng.randint(1, 90))
        p.update(extra)
        return p

    minute = 0
    for n in range(60):
        kind = ["pairwise", "ranking", "rubric", "unary", "steps"][n % 5]
        cands = ["a", "b", "c"] if kind in ("pairwise", "ranking") else ["a", "b"]
        gold = None
        if kind == "pairwise" and n % 3 == 0:
            gold = {
                "judgment": {
                    "kind": "pairwise",
                    "shown_order": ["a", "b"],
                    "winner": "a",
                    "strength": 2,
                }
            }
        item_id = f"it{n}"
        items[item_id] = Item(
            id=item_id,
            prompt=f"prompt {n}",
            candidates=[{"id": c, "text": rng.choice(texts)} for c in cands],
            gold=gold,
        )
        for rater in rng.sample(raters, rng.randint(1, 5)):
            for _revision in range(rng.choice([1, 1, 2])):
                minute += 1
                extra: dict[str, Any] = {}
                if rater == "r6":
                    extra["source"] = "ai"
                rationale = None
                if rng.random() < 0.3:
                    rationale = rng.choice(
                        [
                            "The first answer is clearly more complete and accurate overall.",
                            "The first answer is clearly more complete and accurate overall!",
                            f"Unique reasoning number {minute} about which answer wins here.",
                        ]
                    )
                p = prov(rater, minute, **extra)
                if kind == "pairwise":
                    x, y = rng.sample(cands, 2)
                    js.append(
                        PairwiseJudgment.from_canonical(
                            item_id, (x, y), rng.choice([-2, -1, 0, 1, 2]), p, (x, y), rationale
                        )
                    )
                elif kind == "ranking":
                    order = rng.sample(cands, 3)
                    js.append(
                        RankingJudgment(
                            item_id=item_id,
                            order=[[order[0]], order[1:]]
                            if rng.random() < 0.3
                            else [[c] for c in order],
                            provenance=p,
                            rationale=rationale,
                        )
                    )
                elif kind == "rubric":
                    js.append(
                        RubricJudgment(
                            item_id=item_id,
                            candidate_id=rng.choice(cands),
                            scores={
                                "helpful": rng.randint(1, 5),
                                "safe": rng.choice([0.5, 1.0, 1.5]),
                            },
                            provenance=p,
                            rationale=rationale,
                        )
                    )
                elif kind == "unary":
                    js.append(
                        UnaryJudgment(
                            item_id=item_id,
                            candidate_id=rng.choice(cands),
                            label=rng.random() < 0.6,
                            provenance=p,
                            rationale=rationale,
                        )
                    )
                else:
                    js.append(
                        StepsJudgment(
                            item_id=item_id,
                            candidate_id="a",
                            steps=["s1", "s2", "s3"],  # verdicts stop at the first error
                            verdicts=rng.choice([[1, 1, 1], [1, 0, 1], [1, -1], [-1], [1, 1, -1]]),
                            provenance=p,
                            rationale=rationale,
                        )
                    )
        if n % 7 == 0 and kind in ("pairwise", "unary"):
            minute += 1
            p = prov("lead", minute, review_pass=2)
            if kind == "pairwise":
                js.append(PairwiseJudgment.from_canonical(item_id, ("a", "b"), 1, p))
            else:
                js.append(
                    UnaryJudgment(item_id=item_id, candidate_id="a", label=True, provenance=p)
                )
    items["unlabelled"] = Item(
        id="unlabelled", prompt="p", candidates=[{"id": "a", "text": "x"}, {"id": "b", "text": "y"}]
    )
    return js, items


@pytest.mark.parametrize("include_ai", [False, True])
def test_generated_project_every_kind(include_ai):
    js, items = generated_project()
    batches = {i: f"batch {int(i[2:]) % 3}" if i.startswith("it") else "none" for i in items}
    old, new = both(js, items, batches=batches, n_boot=60, include_ai=include_ai)
    # the project exercises what it is meant to
    assert old["label_set"]["set_aside"].get("revised") and old["label_set"]["set_aside"].get(
        "adjudicated"
    )
    assert {a["kind"] for a in old["agreement"]} == {
        "pairwise",
        "ranking",
        "rubric",
        "unary",
        "steps",
    }
    assert old["agreement_by_guideline_version"] and old["gold_accuracy"]
    assert old["telemetry_flags"] and old["adjudication_queue"] and old["confusion"]
    assert any("near_duplicate_rationale" in (r.get("flags") or {}) for r in old["raters"].values())
    assert any("intransitive_rate" in r for r in old["raters"].values())
    assert_same(old, new)


def test_a_small_queue_keeps_the_reference_order():
    js, items = generated_project(seed=5)
    old, new = both(js, items, n_boot=10, max_queue=3)
    assert old["adjudication_total"] > 3
    assert_same(old, new)


def test_without_items_or_pairwise_judgments():
    js, items = generated_project(seed=7)
    unary = [j for j in js if j.kind == "unary"]
    old, new = both(unary, {}, n_boot=10)
    assert old["length_bias"] is None and old["position_bias"] is None
    assert_same(old, new)
    old, new = both(unary, items, n_boot=10)
    assert_same(old, new)


def test_above_the_bounds_it_samples_and_says_so():
    js, items = generated_project(seed=11)
    old = build_report([j for g, _ in by_item(js, items) for j in g], items=items, n_boot=40)
    bounds = Bounds(units=4, pairs=5, times_per_rater=3, rationales=2)
    new = report_from_items(by_item(js, items), n_boot=40, bounds=bounds)
    for a, b in zip(old["agreement"], new["agreement"], strict=True):
        # sums over units stay exact; only the interval is computed on a sample of units
        for key in ("alpha", "percent_agreement", "gwet_ac", "n_units", "n_labels", "n_raters"):
            assert_same(a[key], b[key], key)
        if a["n_pairable_units"] > 4:
            assert b["ci_sample"] == {"units": 4, "of": a["n_pairable_units"]}
        else:
            assert "ci_sample" not in b
    lb = new["length_bias"]
    assert lb["sample"] == {"pairs": 5, "of": old["length_bias"]["n_pairs"]}
    for key in ("n_pairs", "n_differ", "share_chosen_longer", "ratio_histogram"):
        assert_same(old["length_bias"][key], lb[key], key)
    assert new["telemetry_flags_sample"]["rationales"] == 2
    sampled = [r for r in new["raters"].values() if "median_seconds_sample" in r]
    assert sampled and all(r["median_seconds_sample"]["labels"] == 3 for r in sampled)
    assert_same(old["confusion"], new["confusion"])
    assert_same(old["position_bias"], new["position_bias"])
    assert_same(old["formatting_bias"], new["formatting_bias"])
    assert "sample of" in render_html(new)


# ---------------------------------------------------------------- from the store and from JSONL


def store_project(url: str, name: str = "gen") -> tuple[list[JudgmentBase], dict[str, Item]]:
    """The generated project in a database, with another project's items interleaved."""
    js, items = generated_project(seed=13)
    kinds = ("pairwise", "ranking", "rubric", "unary", "steps")
    engine = db.open_db(url)
    with transaction(engine) as s:
        project = repo.create_project(s, name, kinds=kinds)
        other = repo.create_project(s, f"{name}-other", kinds=kinds)
        for it in items.values():
            repo.add_item(s, project, it)
            repo.add_item(s, other, it)
        for j in js:
            repo.add_judgment(s, project, j)
        repo.add_judgment(s, other, js[0])
    engine.dispose()
    return js, items


@pytest.mark.parametrize("window", [None, timedelta(minutes=90)])
def test_report_from_the_store_equals_the_reference(db_url, window):
    store_project(db_url)
    judgments, items, batches = load_project("gen", db_url)
    reference = build_report(
        judgments,
        items=items,
        batches=time_window_batches(window) if window else batches,
        n_boot=30,
    )
    assert reference["n_judgments"] > 100 and len(reference["agreement"]) > 5
    assert_same(reference, report_from_store(db_url, "gen", window=window, n_boot=30))
    engine = db.open_db(db_url)
    with transaction(engine) as s:  # in the caller's session too
        assert_same(reference, report_from_store(s, "gen", window=window, n_boot=30))
        with pytest.raises(LookupError, match="nope"):
            report_from_store(s, "nope")
    engine.dispose()
    with pytest.raises(LookupError, match="nope"):
        report_from_store(db_url, "nope")


def write_jsonl(path: Path, records: Sequence[tuple[list[JudgmentBase], Item | None]]) -> None:
    with path.open("wb") as fh:
        for js, it in records:
            for k, j in enumerate(js):
                row = dump_judgment(j)
                if k == len(js) - 1 and it is not None:  # the item after its judgments
                    row["item"] = it.model_dump(mode="json")
                fh.write(orjson.dumps(row) + b"\n")


def test_report_from_jsonl_in_one_pass_or_whole(tmp_path):
    js, items = generated_project(seed=17)
    grouped = [(g, it) for g, it in by_item(js, items) if g]
    path = tmp_path / "grouped.jsonl"
    write_jsonl(path, grouped)
    judgments, loaded = load_judgments_jsonl(path)
    reference = build_report(judgments, items=loaded, n_boot=20)
    assert_same(reference, report_from_jsonl(path, n_boot=20))
    assert len(list(iter_jsonl_items(path))) == len(grouped)
    # lines of one item apart: read whole, as before
    mixed = tmp_path / "mixed.jsonl"
    shuffled = list(js)
    random.Random(1).shuffle(shuffled)
    write_jsonl(mixed, [([j], None) for j in shuffled])
    with pytest.raises(NotGrouped, match="mixed.jsonl:"):
        list(iter_jsonl_items(mixed))
    judgments, loaded = load_judgments_jsonl(mixed)
    assert_same(
        build_report(judgments, items=loaded, n_boot=20), report_from_jsonl(mixed, n_boot=20)
    )
    bad = tmp_path / "bad.jsonl"
    bad.write_text(path.read_text().splitlines()[0] + "\n{}\n")
    with pytest.raises(ValueError, match="bad.jsonl:2:"):
        report_from_jsonl(bad)
