"""Parquet shards: writers (project, raw export, synthetic), the reader's checks, the sync path
and its CLI, and the unary export against ``preflab export --format trl-kto``."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from preflab.cli import app
from preflab.io.export import ExportOptions, export_project
from preflab.io.importer import import_files
from preflab.io.quality_source import load_project
from preflab.quality import mergeable as m
from preflab.quality.agreement import krippendorff_alpha, percent_agreement
from preflab.quality.labels import resolve_labels
from preflab.quality.table import LabelTable
from preflab.scale.engine import Runner, SchedulerError
from preflab.scale.export import export_unary
from preflab.scale.shards import (
    LAYOUT,
    ShardError,
    generate_unary,
    open_shards,
    read_shard,
    shard_of,
    shards_of,
    write_from_project,
    write_from_raw,
    write_items,
)
from preflab.scale.stats import run_stats
from preflab.schema import UnaryJudgment
from preflab.store import db, repo, transaction

runner = CliRunner()


def records(seed: int = 0, n_items: int = 40) -> list[dict]:
    """Thumbs from several labelers (some revised), plus a few preference pairs."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_items):
        prompt = f"Question {i}?"
        for cand in range(2):
            completion = f"Answer {cand} to question {i}."
            for r in rng.choice(6, int(rng.integers(1, 5)), replace=False).tolist():
                up = bool(rng.random() < 0.3 + 0.4 * cand)
                out.append(
                    {"prompt": prompt, "completion": completion, "label": up, "labeler": f"u{r}"}
                )
        if i % 5 == 0:
            for r in range(3):
                better, worse = (1, 0) if r < 2 else (0, 1)  # one rater disagrees
                out.append(
                    {
                        "prompt": prompt,
                        "chosen": f"Answer {better} to question {i}.",
                        "rejected": f"Answer {worse} to question {i}.",
                        "labeler": f"u{r}",
                    }
                )
    return out


def jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    return path


@pytest.fixture
def engine(db_url, tmp_path):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "p", kinds=("pairwise", "unary"))
    import_files(engine, "p", [jsonl(tmp_path / "in.jsonl", records())])
    yield engine
    engine.dispose()


def shard_rows(directory: Path) -> list[tuple]:
    rows = []
    for path in sorted(directory.glob("labels-*.parquet")):
        t = pq.read_table(path)
        cols = [
            t.column(n).to_pylist()
            for n in ("item_id", "unit", "kind", "rater", "dimension", "value")
        ]
        rows.extend(zip(*cols))
    return sorted(rows)


def expected_rows(db_url: str) -> tuple[list[tuple], dict]:
    judgments, _, batches = load_project("p", db_url)
    resolved = resolve_labels(judgments).judgments
    rows = []
    for j in resolved:
        rater = j.provenance.rater_hash or j.provenance.rater_id
        for r in j.label_rows():
            rows.append((r.item_id, r.unit, r.kind, rater, r.dimension, r.value))
    return sorted(rows), batches


def test_project_shards_hold_the_resolved_label_set_one_shard_per_item(engine, db_url, tmp_path):
    layout = write_from_project(engine, "p", tmp_path / "s", n_shards=5)
    expected, batches = expected_rows(db_url)
    assert shard_rows(tmp_path / "s") == expected
    assert layout["rows"] == len(expected) and layout["n_shards"] == 5
    assert layout["judgments_used"] < layout["judgments_in"] or layout["judgments_in"] > 0
    shards = open_shards(tmp_path / "s")
    for index, path in enumerate(shards.shards):
        t = pq.read_table(path)
        assert {shard_of(i, 5) for i in t.column("item_id").to_pylist()} <= {index}
        assert set(t.column("batch").to_pylist()) <= set(batches.values())


def test_a_raw_export_gives_the_same_labels(engine, db_url, tmp_path):
    export_project(engine, "p", ExportOptions(format="raw", out=tmp_path / "raw", force=True))
    write_from_project(engine, "p", tmp_path / "from-db", n_shards=3)
    write_from_raw(tmp_path / "raw" / "train.jsonl", tmp_path / "from-raw", n_shards=3)
    assert shard_rows(tmp_path / "from-raw") == shard_rows(tmp_path / "from-db")


def test_a_raw_export_with_an_item_scattered_is_refused(tmp_path):
    line = {"kind": "unary", "candidate_id": "a", "label": True, "provenance": {"rater_id": "r"}}
    path = jsonl(
        tmp_path / "raw.jsonl",
        [{**line, "item_id": "x"}, {**line, "item_id": "y"}, {**line, "item_id": "x"}],
    )
    with pytest.raises(ShardError, match=r"raw.jsonl:3: item_id: 'x' appears again"):
        write_from_raw(path, tmp_path / "s")


def test_stats_from_shards_equal_the_single_process_functions(engine, db_url, tmp_path):
    write_from_project(engine, "p", tmp_path / "s", n_shards=4)
    with Runner("sync") as r:
        figures = run_stats(open_shards(tmp_path / "s"), r)
    judgments, _, batches = load_project("p", db_url)
    table = LabelTable.from_judgments(resolve_labels(judgments).judgments, batches)
    groups = {(row["batch"], row["kind"], row["dimension"]): row for row in figures["agreement"]}
    assert set(groups) == set(table.groups())
    for (batch, kind, dim), row in groups.items():
        sub = table.select(kind=kind, dimension=dim, batch=batch)
        assert row["n_labels"] == len(sub)
        ref = krippendorff_alpha(sub.units, sub.values, row["level"])
        assert row["alpha"] == pytest.approx(ref, abs=1e-12, nan_ok=True)
        assert row["percent_agreement"] == pytest.approx(
            percent_agreement(sub.units, sub.values), abs=1e-12, nan_ok=True
        )
    unary = table.select(kind="unary")
    rows, drops = m.resolve_thumbs(m.thumbs_from_chunk(m.Chunk.from_table(unary)))
    assert figures["thumbs"]["no_majority"] == drops["no-majority"] > 0
    assert figures["thumbs"]["resolved_up"] == sum(r.label for r in rows)
    assert figures["bradley_terry"]["n_comparisons"] == len(table.select(dimension="winner"))
    ds = figures["dawid_skene"]
    assert ds["n_iter"] >= 1 and len(ds["raters"]) == len(set(unary.raters.tolist()))


def test_unary_export_has_the_rows_of_trl_kto(db_url, tmp_path):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "k", kinds=("unary",))
    thumbs_only = [r for r in records(1) if "label" in r]
    import_files(engine, "k", [jsonl(tmp_path / "k.jsonl", thumbs_only)])
    write_from_project(engine, "k", tmp_path / "s", n_shards=3)
    with Runner("sync") as r:
        manifest = export_unary(open_shards(tmp_path / "s"), tmp_path / "out", r)
    export_project(
        engine,
        "k",
        ExportOptions(format="trl-kto", out=tmp_path / "kto", length_gate=None, force=True),
    )
    engine.dispose()
    kto = [orjson.loads(x) for x in (tmp_path / "kto" / "train.jsonl").read_bytes().splitlines()]
    ours = pa.concat_tables(
        pq.read_table(p) for p in sorted((tmp_path / "out").glob("kto-*.parquet"))
    )
    # trl-kto writes texts; the shards hold ids: the completion text names its item and candidate
    ref = Counter((r["prompt"], r["completion"], r["label"]) for r in kto)
    texts = {}
    with transaction(db.open_db(db_url)) as s:
        for rec in repo.iter_items_with_judgments(s, repo.get_project(s, "k")):
            for c in rec.item.candidates:
                texts[(rec.item.id, c.id)] = (rec.item.prompt, c.text)
    got = Counter(
        (*texts[(i, c)], lab)
        for i, c, lab in zip(
            ours.column("item_id").to_pylist(),
            ours.column("candidate_id").to_pylist(),
            ours.column("label").to_pylist(),
        )
    )
    assert got == ref and sum(ref.values()) == manifest["counts"]["rows_out"] > 0
    kto_manifest = orjson.loads((tmp_path / "kto" / "manifest.json").read_bytes())
    assert (
        manifest["gates"]["aggregation"]["reasons"]["no-majority"]
        == kto_manifest["gates"]["aggregation"]["reasons"]["no-majority"]
    )
    for name, entry in manifest["files"].items():
        assert (tmp_path / "out" / name).stat().st_size == entry["bytes"]


def test_synthetic_thumbs_land_in_the_shard_of_their_item(tmp_path):
    layout = generate_unary(tmp_path / "g", 20_000, n_shards=4, seed=3, block=7_000)
    assert layout["rows"] == 20_000 == sum(layout["rows_by_shard"])
    shards = open_shards(tmp_path / "g")
    for index, path in enumerate(shards.shards):
        items = pq.read_table(path, columns=["item_id"]).column("item_id")
        assert set(shards_of(items, 4).tolist()) == {index}
        assert [shard_of(i, 4) for i in items.to_pylist()[:50]] == [index] * min(50, len(items))
    chunk = read_shard(shards.shards[0])
    assert set(chunk.kind.labels.tolist()) == {"unary"}
    assert set(np.unique(chunk.value).tolist()) == {0.0, 1.0}


# -- bad input ------------------------------------------------------------------------------


@pytest.fixture
def small(tmp_path) -> Path:
    generate_unary(tmp_path / "g", 2_000, n_shards=3)
    return tmp_path / "g"


def test_a_bad_shard_directory_says_which_file_and_what_to_do(small, tmp_path):
    with pytest.raises(ShardError, match="no such directory"):
        open_shards(tmp_path / "nowhere")
    (small / "labels-00001.parquet").unlink()
    with pytest.raises(ShardError, match=r"1 of 3 shards missing \(labels-00001.parquet\)"):
        open_shards(small)
    (small / "labels-00001.parquet").write_bytes(b"not parquet")
    with pytest.raises(ShardError, match=r"labels-00001.parquet: not a readable Parquet file"):
        open_shards(small)
    (small / "labels-00001.parquet").unlink()
    (small / LAYOUT).unlink()
    with pytest.raises(ShardError, match=r"layout.json: missing: not a shard directory"):
        open_shards(small)


def test_a_shard_without_the_columns_is_refused(small):
    pq.write_table(pa.table({"item_id": ["x"]}), small / "labels-00002.parquet")
    with pytest.raises(ShardError, match=r"labels-00002.parquet: columns unit, kind"):
        open_shards(small)


def test_writers_refuse_a_non_empty_directory(small):
    with pytest.raises(ShardError, match="not empty"):
        generate_unary(small, 10)


def test_a_bad_scheduler_says_what_to_give():
    with pytest.raises(SchedulerError, match="use sync .* local:N .* tcp://host:port"):
        Runner("local:0")
    with pytest.raises(SchedulerError, match="use sync"):
        Runner("threads")


def test_cli_stats_and_export(small, tmp_path):
    res = runner.invoke(app, ["scale", "stats", str(small), "--json", str(tmp_path / "s.json")])
    assert res.exit_code == 0, res.output
    figures = orjson.loads((tmp_path / "s.json").read_bytes())
    assert figures["thumbs"]["labels"] == 2_000
    assert figures["agreement"][0]["dimension"] == "thumb"
    res = runner.invoke(app, ["scale", "export", str(small), "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    manifest = orjson.loads((tmp_path / "out" / "manifest.json").read_bytes())
    assert (
        manifest["counts"]["rows_out"]
        == figures["thumbs"]["resolved_up"] + figures["thumbs"]["resolved_down"]
    )
    assert sorted(manifest["files"]) == [f"kto-0000{i}.parquet" for i in range(3)]


def test_cli_errors_are_one_line(small, tmp_path):
    res = runner.invoke(app, ["scale", "stats", str(tmp_path / "nope")])
    assert res.exit_code == 1 and "no such directory" in res.output
    res = runner.invoke(
        app, ["scale", "export", str(small), "--out", str(tmp_path / "o"), "--scheduler", "x"]
    )
    assert res.exit_code == 1 and "--scheduler 'x'" in res.output
    assert not (tmp_path / "o").exists()
    res = runner.invoke(
        app,
        [
            "scale",
            "shards",
            "nosuchproject",
            "--out",
            str(tmp_path / "s"),
            "--db",
            str(tmp_path / "none.db"),
        ],
    )
    assert res.exit_code == 2 and "no such database file" in res.output
    assert not (tmp_path / "none.db").exists() and not (tmp_path / "s").exists()


def test_a_failed_write_leaves_nothing(engine, tmp_path):
    with pytest.raises(repo.NotFound):
        write_from_project(engine, "nosuch", tmp_path / "s")
    assert not (tmp_path / "s").exists()

    def broken():
        yield from write_items_groups()
        raise RuntimeError("the database went away")

    with pytest.raises(RuntimeError, match="went away"):
        write_items(broken(), tmp_path / "s2", n_shards=2)
    assert not (tmp_path / "s2").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".s2")] == []


def write_items_groups():
    j = UnaryJudgment(item_id="x", candidate_id="a", label=True, provenance={"rater_id": "r"})
    yield [j], "all"
