"""Rows without a ``labeler`` are each a rater of their own (issue 28).

TRL rows, comparisons, unpaired rows and hh-rlhf rows name nobody. They all went to one rater
``anonymous`` (hh-rlhf: ``hh-rlhf:crowd``), so a later row of a pair was a *revision* of the
earlier ones: ``A > B`` and ``B > A`` exported ``B > A`` with ``n_raters 1``, and two ``A > B``
rows were one vote. Now each row is ``anonymous:`` + a hash of the row (deterministic: importing
again adds nothing), on the lean, the general and the staged (second process) import paths.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from sqlalchemy import select

from preflab.io.export import ExportOptions, export_project
from preflab.io.importer import import_files
from preflab.io.importer import worker as importer_worker
from preflab.store import db, repo, transaction
from preflab.store.models import Rater

Q, ONE, TWO = "Which answer is better?", "Answer one here.", "Answer two here."


@pytest.fixture
def engine(db_url):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "p", kinds=("pairwise", "unary"))
    yield engine
    engine.dispose()


def jsonl(path: Path, *records) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def rows(engine, tmp_path: Path, fmt: str) -> tuple[list[dict], list[dict]]:
    out = tmp_path / f"out-{fmt}-{len(list(tmp_path.iterdir()))}"
    export_project(engine, "p", ExportOptions(format=fmt, out=out, length_gate=None, force=True))
    data = [orjson.loads(line) for line in (out / "train.jsonl").read_bytes().splitlines()]
    meta = out / "pair_metadata.jsonl"
    side = [orjson.loads(x) for x in meta.read_bytes().splitlines()] if meta.exists() else []
    return data, side


def raters(engine) -> list[str]:
    with transaction(engine) as s:
        return sorted(s.scalars(select(Rater.rater_key)))


# the general route: a key the lean route does not take ("rationale")
SHAPES = {
    "lean": {},
    "general": {"rationale": "because"},
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("worker", ["0", "1"])
def test_two_unlabeled_rows_of_a_pair_are_two_votes(engine, tmp_path, monkeypatch, shape, worker):
    monkeypatch.setenv("PREFLAB_IMPORT_WORKER", worker)
    monkeypatch.setattr(importer_worker, "HEAD", 1)  # the second row converted by the other process
    extra = SHAPES[shape]
    a = {"prompt": Q, "chosen": ONE, "rejected": TWO, "strength": 2, **extra}
    b = {"prompt": Q, "chosen": ONE, "rejected": TWO, "strength": 3, **extra}
    report = import_files(engine, "p", [jsonl(tmp_path / "ab.jsonl", a, b)])
    assert report.judgments_added == 2
    keys = raters(engine)
    assert len(keys) == 2 and all(k.startswith("anonymous:") for k in keys)
    data, side = rows(engine, tmp_path, "trl-reward")
    # before: one row, margin 3 (the second row "revised" the first), n_raters 1
    assert [(r["chosen"], r["rejected"], r["margin"]) for r in data] == [(ONE, TWO, 2.5)]
    assert [(m["n_raters"], m["agreement"]) for m in side] == [(2, 1.0)]


@pytest.mark.parametrize("worker", ["0", "1"])
def test_opposite_unlabeled_rows_are_a_split_not_a_revision(engine, tmp_path, monkeypatch, worker):
    monkeypatch.setenv("PREFLAB_IMPORT_WORKER", worker)
    monkeypatch.setattr(importer_worker, "HEAD", 1)
    path = jsonl(
        tmp_path / "split.jsonl",
        {"prompt": Q, "chosen": ONE, "rejected": TWO},
        {"prompt": Q, "chosen": TWO, "rejected": ONE},
    )
    import_files(engine, "p", [path])
    data, _ = rows(engine, tmp_path, "trl-preference")
    assert data == []  # before: [TWO > ONE], the later row winning as a "revision"


def test_the_same_rows_again_add_nothing(engine, tmp_path):
    a = {"prompt": Q, "chosen": ONE, "rejected": TWO}
    b = {"prompt": Q, "chosen": ONE, "rejected": TWO, "strength": 1}
    first = import_files(engine, "p", [jsonl(tmp_path / "1.jsonl", a, b)])
    assert first.judgments_added == 2
    # other bytes (a third row), the same two rows: the same raters, the same judgments
    c = {"prompt": Q, "chosen": TWO, "rejected": ONE, "strength": 3}
    again = import_files(engine, "p", [jsonl(tmp_path / "2.jsonl", c, b, a)])
    assert (again.judgments_added, again.judgments_existing) == (1, 2)
    assert len(raters(engine)) == 3
    # the same row twice in one file is one row's vote
    dup = import_files(engine, "p", [jsonl(tmp_path / "3.jsonl", a, a)])
    assert dup.judgments_added == 0


def test_unlabeled_thumbs_are_votes_of_their_own(engine, tmp_path):
    up = {"prompt": Q, "completion": ONE, "label": True}
    down = {"prompt": Q, "completion": ONE, "label": False}
    import_files(engine, "p", [jsonl(tmp_path / "u.jsonl", up, down)])
    data, _ = rows(engine, tmp_path, "trl-kto")
    assert data == []  # 1 up, 1 down: no majority (before: the later thumb, down)
    import_files(engine, "p", [jsonl(tmp_path / "u2.jsonl", {**up, "rationale": "fine"})])
    data, _ = rows(engine, tmp_path, "trl-kto")
    assert [(r["completion"], r["label"]) for r in data] == [(ONE, True)]


def test_a_named_labeler_or_default_rater_still_revises(engine, tmp_path):
    # a labeler who writes a pair twice revises it (the latest row counts): unchanged
    path = jsonl(
        tmp_path / "named.jsonl",
        {"prompt": Q, "chosen": ONE, "rejected": TWO, "labeler": "ann"},
        {"prompt": Q, "chosen": TWO, "rejected": ONE, "labeler": "ann"},
    )
    import_files(engine, "p", [path])
    data, side = rows(engine, tmp_path, "trl-preference")
    assert [(r["chosen"], r["rejected"]) for r in data] == [(TWO, ONE)]
    assert [m["n_raters"] for m in side] == [1]
