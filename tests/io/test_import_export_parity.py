"""Data that imports must export (issue 28 section 6).

A gold item whose gold judgment had no ``shown_order`` imported fine and then broke every export
and the quality report (``pairwise.shown_order Field required``): the import did not check gold
answers the way their readers parse them. Now :class:`preflab.schema.Item` parses its gold answer
with the one parse every reader uses (``GoldAnswer.expected``), so a bad gold answer is a
``file:line: gold.judgment...: reason`` at import. The property test: whatever a generated file
imports (with ``--skip-invalid``), every export format and the quality report read.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from preflab.io.export import EXPORT_FORMATS, ExportError, ExportOptions, export_project
from preflab.io.importer import ImportFailed, ImportOptions, import_files, validate_files
from preflab.io.quality_source import load_project
from preflab.quality.report import build_report
from preflab.store import db, repo, transaction

ALL_KINDS = ("pairwise", "ranking", "rubric", "unary", "steps", "demonstration")


def jsonl(path: Path, *records) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


GOLD_ITEM = {
    "id": "g1",
    "prompt": "Which is right?",
    "candidates": [{"id": "a", "text": "Right."}, {"id": "b", "text": "Wrong."}],
    "gold": {"judgment": {"kind": "pairwise", "winner": "a", "strength": 2}},
}
LABEL = {
    "item_id": "g1",
    "kind": "pairwise",
    "shown_order": ["a", "b"],
    "winner": "a",
    "strength": 1,
    "provenance": {"rater_id": "alice"},
}


@pytest.fixture
def engine(db_url):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "p", kinds=ALL_KINDS)
    yield engine
    engine.dispose()


def test_a_gold_answer_without_shown_order_is_refused_at_import(engine, tmp_path):
    path = jsonl(tmp_path / "gold.jsonl", GOLD_ITEM, LABEL)
    with pytest.raises(ImportFailed) as err:
        import_files(engine, "p", [path])
    assert f"{path}:1: gold.judgment.shown_order: Field required" in str(err.value)
    # validate says it in the same words
    report = validate_files([path], ImportOptions())
    assert any(p.line == 1 and p.field == "gold.judgment.shown_order" for p in report.problems), (
        report.problems
    )


def test_a_gold_answer_naming_another_candidate_is_refused(engine, tmp_path):
    bad = {
        **GOLD_ITEM,
        "gold": {
            "judgment": {"kind": "pairwise", "shown_order": ["a", "z"], "winner": "a"},
        },
    }
    path = jsonl(tmp_path / "gold.jsonl", bad)
    with pytest.raises(ImportFailed) as err:
        import_files(engine, "p", [path])
    assert f"{path}:1: gold.judgment: 'z' is not a candidate of the item" in str(err.value)


def test_a_complete_gold_answer_imports_and_exports(engine, tmp_path):
    good = {
        **GOLD_ITEM,
        "gold": {"judgment": {**GOLD_ITEM["gold"]["judgment"], "shown_order": ["a", "b"]}},
    }
    import_files(engine, "p", [jsonl(tmp_path / "gold.jsonl", good, LABEL)])
    manifest = export_project(
        engine, "p", ExportOptions(format="raw", out=tmp_path / "raw", length_gate=None)
    )
    assert manifest["counts"]["judgments_in"] == 1


# -- whatever imports, exports ---------------------------------------------------------------

CANDS = ["a", "b", "c"]


@st.composite
def judgment_dict(draw, k: int) -> dict:
    """A judgment body for an item of ``k`` candidates: a complete one of a kind that fits,
    then (often) a field dropped or a value spoiled."""
    cands = CANDS[:k]
    kinds = (
        ["demonstration"] + (["unary", "steps"] if k == 1 else []) + (["ranking"] if k > 1 else [])
    )
    kinds += ["pairwise"] if k == 2 else []
    kind = draw(st.sampled_from(kinds))
    if kind == "pairwise":
        winner = draw(st.sampled_from(["a", "b", "tie"]))
        body = {
            "shown_order": draw(st.permutations(cands)),
            "winner": winner,
            "strength": 0 if winner == "tie" else draw(st.integers(1, 3)),
        }
    elif kind == "ranking":
        body = {"order": [[c] for c in draw(st.permutations(cands))]}
    elif kind == "unary":
        body = {"candidate_id": "a", "label": draw(st.booleans())}
    elif kind == "steps":
        body = {
            "candidate_id": "a",
            "steps": ["s1", "s2"],
            "verdicts": [1, draw(st.sampled_from([-1, 0, 1]))],
        }
    else:
        body = {
            "text": "A demonstration.",
            "status": draw(st.sampled_from(["accepted", "pending"])),
        }
    body = {"kind": kind, **body}
    spoil = draw(st.sampled_from(["none", "none", "drop", "value"]))
    if spoil == "drop":
        del body[draw(st.sampled_from(sorted(body)))]
    elif spoil == "value":
        body[draw(st.sampled_from(sorted(body)))] = draw(
            st.sampled_from(["z", ["a", "z"], 7, None, [], "tie"])
        )
    return body


@st.composite
def files(draw):
    """One file: items (some gold; gold answers of every kind that fits, complete or not),
    labels of every kind on them (complete or not, human, AI, AI-assisted, review passes), and
    TRL rows of the same pairs."""
    records = []
    for n in range(draw(st.integers(1, 3))):
        k = draw(st.integers(1, 3))
        item = {
            "id": f"i{n}",
            "prompt": f"Question {n}?",
            "candidates": [{"id": CANDS[c], "text": f"Answer {n}.{c}"} for c in range(k)],
        }
        if draw(st.booleans()):
            item["gold"] = {
                "judgment": draw(judgment_dict(k)),
                **({"tolerance": 1.0} if draw(st.booleans()) else {}),
            }
        records.append(item)
        for r in range(draw(st.integers(0, 3))):
            records.append(
                {
                    **draw(judgment_dict(k)),
                    "item_id": f"i{n}",
                    "provenance": {
                        "rater_id": f"r{r}",
                        "source": draw(st.sampled_from(["human", "ai", "ai_assisted"])),
                        "review_pass": draw(st.sampled_from([0, 0, 1, 2])),
                    },
                }
            )
    return records


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(records=files())
def test_whatever_imports_exports(records):
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        engine = db.open_db(f"sqlite:///{tmp_path / 'p.db'}")
        try:
            with transaction(engine) as s:
                repo.create_project(s, "p", kinds=ALL_KINDS)
            path = jsonl(tmp_path / "in.jsonl", *records)
            try:
                import_files(engine, "p", [path], ImportOptions(skip_invalid=True))
            except ImportFailed:
                return  # nothing imported
            for name in EXPORT_FORMATS:
                try:
                    export_project(
                        engine,
                        "p",
                        ExportOptions(
                            format=name,
                            out=tmp_path / name,
                            length_gate=None,
                            force=True,
                            include_gold=True,
                        ),
                    )
                except ExportError as e:  # a documented refusal (nothing of this kind), no crash
                    assert str(e).strip(), name
                    continue
                manifest = json.loads((tmp_path / name / "manifest.json").read_text())
                rows = manifest["counts"]["rows_out_by_file"]
                assert sum(rows.values()) == manifest["counts"]["rows_out"], name
                for file_name in rows:
                    assert (tmp_path / name / file_name).exists(), (name, file_name)
            judgments, items, batches = load_project("p", str(engine.url))
            report = build_report(judgments, items=items, batches=batches)
            # the report reads every label its tables take (demonstrations are not votes)
            assert 0 <= report["n_judgments"] <= len(list(judgments))
        finally:
            engine.dispose()
