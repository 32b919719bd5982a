"""Issue 16 §6: the raw export loads where its card says it loads (`datasets.load_dataset`),
for each judgment kind and for a project with every kind."""

from __future__ import annotations

import datasets
import pytest

from preflab.io.export import ExportOptions, export_project
from preflab.io.export.raw import raw_jsonl_features
from preflab.schema import (
    JUDGMENT_KINDS,
    CriteriaJudgment,
    DemonstrationJudgment,
    Item,
    PairwiseJudgment,
    RankingJudgment,
    Rubric,
    RubricJudgment,
    StepsJudgment,
    UnaryJudgment,
)
from preflab.schema.rubric import Dimension, Veto
from preflab.store import make_engine, transaction
from preflab.store.db import upgrade
from preflab.store.repo import add_item, add_judgment, add_rubric, create_project

RUBRIC = Rubric(
    id="quality",
    version=1,
    dimensions=[Dimension(name="accuracy", scale="ordinal", points=5)],
    vetoes=[Veto(name="fabrication")],
)


def prov(rater, **kw):
    return {"rater_id": rater, **kw}


def labels() -> dict[str, list]:
    """Two labels of each kind, with the optional fields set on one and not the other."""
    return {
        "pairwise": [
            PairwiseJudgment(
                item_id="two", shown_order=("a", "b"), winner="a", strength=2, provenance=prov("r1")
            ),
            PairwiseJudgment(
                item_id="two",
                shown_order=("b", "a"),
                winner="tie",
                strength=0,
                rationale="same",
                provenance=prov("r2", guideline_version=2),
            ),
        ],
        "ranking": [
            RankingJudgment(item_id="three", order=[["c2"], ["c1", "c3"]], provenance=prov("r1")),
            RankingJudgment(item_id="three", order=[["c1"], ["c2"], ["c3"]], provenance=prov("r2")),
        ],
        "rubric": [
            RubricJudgment(
                item_id="two",
                candidate_id="a",
                scores={"accuracy": 4},
                provenance=prov("r1", rubric_id="quality", rubric_version=1),
            ),
            RubricJudgment(
                item_id="two",
                candidate_id="b",
                scores={"accuracy": 2},
                vetoes_failed=["fabrication"],
                provenance=prov("r2", rubric_id="quality", rubric_version=1),
            ),
        ],
        "unary": [
            UnaryJudgment(item_id="one", candidate_id="m", label=True, provenance=prov("r1")),
            UnaryJudgment(item_id="one", candidate_id="m", label=False, provenance=prov("r2")),
        ],
        "steps": [
            StepsJudgment(
                item_id="one",
                candidate_id="m",
                steps=["3*4=12.", "12+1=13."],
                verdicts=[1, 1],
                provenance=prov("r1"),
            ),
            StepsJudgment(
                item_id="one",
                candidate_id="m",
                steps=["3*4=12.", "12+1=13."],
                verdicts=[1, -1],
                provenance=prov("r2"),
            ),
        ],
        "demonstration": [
            DemonstrationJudgment(
                item_id="one", text="3*4+1 = 13", status="accepted", provenance=prov("r1")
            ),
            DemonstrationJudgment(item_id="one", text="draft", provenance=prov("r2")),
        ],
        "criteria": [
            CriteriaJudgment(
                item_id="four",
                candidate_id="m",
                criteria_version=1,
                met={"dose": True, "doctor": False},
                provenance=prov("r1"),
            ),
            CriteriaJudgment(
                item_id="four",
                candidate_id="m",
                criteria_version=1,
                met={"dose": False, "doctor": False},
                rationale="no dose",
                provenance=prov("r2"),
            ),
        ],
    }


ITEMS = [
    Item(id="one", prompt="3*4+1?", candidates=[{"id": "m", "text": "13"}]),
    Item(
        id="two",
        prompt="Capital of France?",
        candidates=[{"id": "a", "text": "Paris"}, {"id": "b", "text": "Lyon"}],
        domains=["geography"],
        metadata={"source": "quiz", "difficulty": 1},
    ),
    Item(
        id="three",
        prompt=[{"role": "user", "content": "Rank these."}],
        candidates=[{"id": f"c{k}", "text": f"answer {k}"} for k in (1, 2, 3)],
    ),
    Item(
        id="four",
        prompt="Dose of X?",
        candidates=[{"id": "m", "text": "500 mg"}],
        metadata={
            "criteria": {
                "version": 1,
                "author": "e1",
                "approved_by": "e2",
                "approved_at": "2026-12-01T00:00:00Z",
                "criteria": [
                    {"id": "dose", "text": "States the dose", "weight": 2, "must_have": True},
                    {"id": "doctor", "text": "Says when to see a doctor"},
                ],
            }
        },
    ),
]


def raw_export(db_url, tmp_path, kinds, file_format="jsonl"):
    engine = make_engine(db_url)
    upgrade(engine)
    with transaction(engine) as s:
        project = create_project(s, "p", kinds=list(JUDGMENT_KINDS))
        add_rubric(s, project, RUBRIC)
        for item in ITEMS:
            add_item(s, project, item)
        for kind in kinds:
            for j in labels()[kind]:
                add_judgment(s, project, j)
    out = tmp_path / "raw"
    export_project(engine, "p", ExportOptions(format="raw", out=out, file_format=file_format))
    engine.dispose()
    return out


def load_as_the_card_says(out, file_format="jsonl", **kw):
    card = (out / "README.md").read_text()
    builder = "json" if file_format == "jsonl" else "parquet"
    assert f'load_dataset("{builder}", data_files="path/to/export/train.{file_format}"' in card
    return datasets.load_dataset(
        builder,
        data_files=str(out / f"train.{file_format}"),
        split="train",
        cache_dir=str(out.parent / "cache"),
        **kw,
    )


@pytest.mark.parametrize("kind", JUDGMENT_KINDS)
def test_the_raw_jsonl_of_each_kind_loads_with_datasets(sqlite_url, tmp_path, kind):
    out = raw_export(sqlite_url, tmp_path, [kind])
    ds = load_as_the_card_says(out)
    assert ds.num_rows == 2 and set(ds["kind"]) == {kind}


def test_the_raw_jsonl_of_a_project_with_every_kind_loads_with_datasets(sqlite_url, tmp_path):
    out = raw_export(sqlite_url, tmp_path, JUDGMENT_KINDS)
    ds = load_as_the_card_says(out)
    assert ds.num_rows == 2 * len(JUDGMENT_KINDS) and sorted(set(ds["kind"])) == sorted(
        JUDGMENT_KINDS
    )
    assert [p.get("guideline_version") for p in ds["provenance"]].count(2) == 1


def test_the_raw_parquet_of_every_kind_loads_in_any_number_of_blocks(sqlite_url, tmp_path):
    out = raw_export(sqlite_url, tmp_path, JUDGMENT_KINDS, file_format="parquet")
    ds = load_as_the_card_says(out, "parquet")
    assert ds.num_rows == 2 * len(JUDGMENT_KINDS) and sorted(set(ds["kind"])) == sorted(
        JUDGMENT_KINDS
    )


def test_without_declared_features_a_mix_over_several_blocks_fails_to_load(sqlite_url, tmp_path):
    """The failure the card's features cure: datasets' JSON builder takes the columns of its first
    block (10 MB by default; a small block here stands for a large file)."""
    out = raw_export(sqlite_url, tmp_path, JUDGMENT_KINDS)
    with pytest.raises(datasets.exceptions.DatasetGenerationError):
        load_as_the_card_says(out, chunksize=2_000)


def test_with_the_cards_features_every_kind_loads_over_several_blocks(sqlite_url, tmp_path):
    out = raw_export(sqlite_url, tmp_path, JUDGMENT_KINDS)
    ds = load_as_the_card_says(out, chunksize=2_000, features=raw_jsonl_features())
    assert ds.num_rows == 2 * len(JUDGMENT_KINDS) and sorted(set(ds["kind"])) == sorted(
        JUDGMENT_KINDS
    )
    # values load as written: nested objects as dicts, optional fields None where absent
    pairwise = [r for r in ds if r["kind"] == "pairwise"]
    assert {r["winner"] for r in pairwise} == {"a", "tie"} and pairwise[0]["order"] is None
    assert isinstance(pairwise[0]["item"]["candidates"], list)


def test_the_cards_loading_code_runs_as_written(sqlite_url, tmp_path):
    out = raw_export(sqlite_url, tmp_path, JUDGMENT_KINDS)
    card = (out / "README.md").read_text()
    section = card.split("## Loading a large or mixed raw JSONL", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    scope: dict = {}
    code = code.replace("path/to/export", str(out))
    code = code.replace('split="train",', f'split="train", cache_dir="{tmp_path / "hf"}",')
    exec(code, scope)
    assert scope["ds"].num_rows == 2 * len(JUDGMENT_KINDS)
