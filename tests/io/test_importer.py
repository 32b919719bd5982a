"""The importer on SQLite and PostgreSQL: real data sets, all-or-nothing, idempotent, clear problems."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from sqlalchemy import func, select

from preflab.io.importer import ImportFailed, ImportOptions, Problem, import_files, validate_files
from preflab.schema import Item, Trajectory
from preflab.store import db, repo, transaction
from preflab.store.models import Base, CandidateRow, ImportBatch, ItemRow, JudgmentRow, Rater

FIXTURES = Path(__file__).resolve().parent.parent / "data"
ALL_KINDS = ("pairwise", "ranking", "rubric", "unary", "steps", "demonstration")


@pytest.fixture
def engine(db_url):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "p", kinds=ALL_KINDS)
        repo.create_project(s, "pairs", kinds=["pairwise"])
    yield engine
    engine.dispose()


def counts(engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {
            t.name: conn.execute(select(func.count()).select_from(t)).scalar_one()
            for t in Base.metadata.sorted_tables
        }


def jsonl(tmp_path: Path, name: str, *records, raw: bytes = b"") -> Path:
    path = tmp_path / name
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records) + raw)
    return path


def fails(engine, project, paths, **options) -> ImportFailed:
    before = counts(engine)
    with pytest.raises(ImportFailed) as info:
        import_files(engine, project, paths, ImportOptions(**options))
    assert counts(engine) == before, "a failed import must leave the database unchanged"
    return info.value


def one_problem(engine, project, paths, **options) -> Problem:
    err = fails(engine, project, paths, **options)
    assert err.total == 1, str(err)
    return err.problems[0]


# -- the real data sets (excerpts in tests/data, see LICENSE-DATA) ------------------------------


def test_pandalm_file_fails_naming_the_six_boolean_responses(engine):
    # the first 170 records of the PandaLM test set hold all six of its boolean responses
    path = FIXTURES / "pandalm-170.json"
    err = fails(engine, "p", [path])
    assert err.total == 6
    fields = sorted(p.field for p in err.problems)
    assert fields == ["response1"] * 4 + ["response2"] * 2
    assert all("expected a string, got a boolean" in p.reason for p in err.problems)
    text = path.read_text().splitlines()
    for p in err.problems:  # each line number points at the record that holds the boolean
        idx_line = text[p.line]  # the line after "{"
        assert text[p.line - 1].strip() == "{" and '"idx"' in idx_line
    assert f"{path}:{err.problems[0].line}: response1: expected a string" in str(err)


def test_pandalm_with_skip_invalid(engine):
    report = import_files(
        engine, "p", [FIXTURES / "pandalm-170.json"], ImportOptions(skip_invalid=True)
    )
    # 164 valid records, 155 pairs: 9 pairs of texts came from two model pairs each (an item is its
    # content, issue 17); the three annotators' repeated verdicts on them are not counted twice
    assert (report.items_added, report.items_existing) == (155, 9)
    assert (report.judgments_added, report.judgments_added + report.judgments_existing) == (
        465,
        164 * 3,
    )
    assert len(report.skipped) == 6 and report.formats == {"pandalm": 164}
    c = counts(engine)
    assert (c["items"], c["candidates"], c["judgments"], c["raters"]) == (155, 310, 465, 3)
    with transaction(engine) as s:
        batch = s.get(ImportBatch, report.batch_pk)
        assert batch.counts["skipped"] == 6 and len(batch.counts["skipped_problems"]) == 6
        assert batch.format == "pandalm"
        project = repo.get_project(s, "p")
        first = next(repo.iter_items_with_judgments(s, project))
        assert first.item.id == "pandalm-0" and len(first.judgments) == 3


def test_tulu1_skips_the_blank_rows(engine):
    # 20 rows: 18 labelled ones (8 instances, 3 evaluators) and 2 blank rows of the real file
    report = import_files(
        engine, "p", [FIXTURES / "tulu1-sample.jsonl"], ImportOptions(skip_invalid=True)
    )
    assert len(report.skipped) == 2
    assert all("blank row" in p.reason for p in report.skipped)
    assert report.items_added == 8
    assert report.items_added + report.items_existing == 20 - 2
    assert counts(engine)["raters"] == 3


def test_tulu1_needs_a_project_collecting_unary_judgments(engine):
    err = fails(engine, "pairs", [FIXTURES / "tulu1-sample.jsonl"], skip_invalid=False)
    assert any(p.field == "kind" and "not 'unary'" in p.reason for p in err.problems)


def test_hh_rlhf_gz(engine):
    report = import_files(
        engine, "pairs", [FIXTURES / "hh-rlhf-sample.jsonl.gz"], ImportOptions(skip_invalid=True)
    )
    # line 21 (line 1255 of the real file) has a rejected conversation with other turns than the chosen one
    assert [p.line for p in report.skipped] == [21]
    assert report.judgments_added + report.judgments_existing == 21 - 1
    with transaction(engine) as s:
        raters = s.scalars(select(Rater.rater_key)).all()
    # no rater ids in hh-rlhf: each row a rater of its own, never one shared "crowd" (issue 28)
    assert len(raters) == 20 and all(r.startswith("anonymous:") for r in raters)


def test_squality_registers_its_rubric(engine):
    # one passage: 5 questions (items), each answered by 3 systems, each answer reviewed by 3 workers
    report = import_files(engine, "p", [FIXTURES / "squality-sample.jsonl"])
    assert report.items_added == 5 and report.judgments_added == 5 * 3 * 3
    with transaction(engine) as s:
        project = repo.get_project(s, "p")
        assert (project.rubric_key, project.rubric_version) == ("squality", 1)
        assert repo.get_rubric(s, project).dimensions[0].name == "correctness"


def test_fixtures_import(engine):
    paths = [
        FIXTURES / "pandalm-60.json",
        FIXTURES / "tulu1-sample.jsonl",
        FIXTURES / "hh-rlhf-sample.jsonl.gz",
        FIXTURES / "squality-sample.jsonl",
    ]
    report = import_files(engine, "p", paths, ImportOptions(skip_invalid=True))
    assert report.formats == {"pandalm": 60, "tulu1": 18, "hh-rlhf": 20, "squality": 1}
    assert len(report.skipped) == 3  # 2 blank Tulu rows, 1 malformed hh-rlhf line
    assert report.files == [str(p) for p in paths]


def test_bundled_demo_sample_is_valid():
    sample = Path(db.__file__).resolve().parent.parent / "data" / "pandalm-sample.jsonl"
    report = validate_files([sample])
    assert report.ok and report.records == 200 and report.formats == {"pandalm": 200}


# -- idempotency ------------------------------------------------------------------------------


def test_same_files_again_are_already_imported(engine):
    path = FIXTURES / "pandalm-60.json"
    first = import_files(engine, "p", [path])
    before = counts(engine)
    again = import_files(engine, "p", [path])
    assert again.already_imported and again.batch_pk == first.batch_pk
    assert (again.items_added, again.judgments_added) == (0, 0)
    assert counts(engine) == before


def test_other_file_with_the_same_records_adds_nothing(engine, tmp_path):
    src = FIXTURES / "pandalm-60.json"
    import_files(engine, "p", [src])
    before = counts(engine)
    records = orjson.loads(src.read_bytes())
    copy = jsonl(tmp_path, "copy.jsonl", *records[:30])
    report = import_files(engine, "p", [copy])
    assert not report.already_imported
    assert (report.items_added, report.items_existing) == (0, 30)
    assert (report.judgments_added, report.judgments_existing) == (0, 90)
    after = counts(engine)
    assert after["import_batches"] == before["import_batches"] + 1
    assert {k: v for k, v in after.items() if k != "import_batches"} == {
        k: v for k, v in before.items() if k != "import_batches"
    }


def test_same_id_with_different_content_against_the_database(engine, tmp_path):
    import_files(
        engine,
        "p",
        [jsonl(tmp_path, "a.jsonl", {"id": "x", "prompt": "p", "candidates": ["a", "b"]})],
    )
    path = jsonl(
        tmp_path,
        "b.jsonl",
        {"id": "y", "prompt": "p", "candidates": ["a"]},
        {"id": "x", "prompt": "p", "candidates": ["a", "c"]},
    )
    p = one_problem(engine, "p", [path])
    assert str(p).startswith(f"{path}:2: id: item 'x' already exists with different content")


def test_same_id_with_different_content_within_one_file(engine, tmp_path):
    path = jsonl(
        tmp_path,
        "a.jsonl",
        {"id": "x", "prompt": "p", "candidates": ["a", "b"]},
        {"id": "x", "prompt": "p", "candidates": ["a", "b"]},
        {"id": "x", "prompt": "q", "candidates": ["a", "b"]},
    )
    p = one_problem(engine, "p", [path])
    assert (p.line, p.field) == (3, "id") and "already exists with different content" in p.reason


def test_duplicates_across_chunks(engine, tmp_path, monkeypatch):
    monkeypatch.setattr("preflab.io.importer.worker.CHUNK", 3)
    recs = [{"id": f"i{n}", "prompt": "p", "candidates": ["a", f"b{n}"]} for n in range(7)]
    recs.append({"id": "i1", "prompt": "changed", "candidates": ["a", "b1"]})
    p = one_problem(engine, "p", [jsonl(tmp_path, "a.jsonl", *recs)])
    assert p.line == 8 and p.field == "id"
    report = import_files(
        engine, "p", [jsonl(tmp_path, "b.jsonl", *recs)], ImportOptions(skip_invalid=True)
    )
    assert report.items_added == 7 and len(report.skipped) == 1


def test_one_content_under_many_ids_across_chunks_is_one_item(engine, tmp_path, monkeypatch):
    # the ids after the first are aliases, found in later chunks from the database
    monkeypatch.setattr("preflab.io.importer.worker.CHUNK", 3)
    recs = [{"id": f"i{n}", "prompt": "p", "candidates": ["a", "b"]} for n in range(7)]
    recs.append({"id": "i5", "prompt": "changed", "candidates": ["a", "b"]})
    p = one_problem(engine, "p", [jsonl(tmp_path, "a.jsonl", *recs)])
    assert (p.line, p.field) == (8, "id") and "'i5' (another id of item 'i0')" in p.reason
    report = import_files(
        engine, "p", [jsonl(tmp_path, "b.jsonl", *recs)], ImportOptions(skip_invalid=True)
    )
    assert (report.items_added, report.items_existing, len(report.skipped)) == (1, 6, 1)


# -- problems are reported, not imported --------------------------------------------------------


def test_invalid_json_line(engine, tmp_path):
    path = jsonl(
        tmp_path, "a.jsonl", {"prompt": "p", "candidates": ["a"]}, raw=b'{"prompt": "p", \n'
    )
    p = one_problem(engine, "p", [path])
    assert (p.line, p.field) == (2, "(line)") and "invalid JSON" in p.reason


def test_wrong_type_and_missing_field(engine, tmp_path):
    path = jsonl(
        tmp_path,
        "a.jsonl",
        {"prompt": "p", "chosen": "a", "rejected": 3},
        {"prompt": "p", "candidates": [{"model": "m"}]},
    )
    err = fails(engine, "p", [path])
    assert err.total == 2
    assert (err.problems[0].line, err.problems[0].field) == (1, "rejected")
    assert "string or a list" in err.problems[0].reason
    assert err.problems[1].line == 2 and err.problems[1].field.startswith("candidates[0]")


def test_unknown_fields_rejected_unless_keep_extra(engine, tmp_path):
    path = jsonl(
        tmp_path,
        "a.jsonl",
        {"prompt": "p", "chosen": "a", "rejected": "b", "labeler": "r1", "vendor": "acme"},
    )
    p = one_problem(engine, "p", [path])
    assert p.field == "vendor" and "keep-extra" in p.reason
    import_files(engine, "p", [path], ImportOptions(keep_extra=True))
    with transaction(engine) as s:
        assert s.scalar(select(ItemRow.meta)) == {"vendor": "acme"}


def test_empty_file(engine, tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    p = one_problem(engine, "p", [path])
    assert (
        p.line is None
        and "empty file" in p.reason
        and str(p).startswith(f"{path}: (file): empty file")
    )


def test_non_utf8(engine, tmp_path):
    path = jsonl(
        tmp_path,
        "a.jsonl",
        {"prompt": "p", "candidates": ["a"]},
        raw=b'{"prompt": "\xff", "candidates": ["a"]}\n',
    )
    p = one_problem(engine, "p", [path])
    assert p.line == 2 and "not valid UTF-8" in p.reason and "byte offset" in p.reason


def test_a_20_mb_line_imports(engine, tmp_path):
    big = "w" * (20 * 2**20)
    path = jsonl(tmp_path, "big.jsonl", {"prompt": "summarise", "candidates": [big, "short"]})
    report = import_files(engine, "p", [path])
    assert report.items_added == 1
    with transaction(engine) as s:
        assert len(s.scalar(select(CandidateRow.text).where(CandidateRow.position == 0))) == len(
            big
        )
    p = one_problem(
        engine,
        "p",
        [jsonl(tmp_path, "big2.jsonl", {"prompt": "x", "candidates": [big]})],
        max_line_bytes=2**20,
    )
    assert "over the limit" in p.reason


def test_judgment_about_an_unknown_item_or_candidate(engine, tmp_path):
    import_files(
        engine,
        "p",
        [
            jsonl(
                tmp_path,
                "items.jsonl",
                {
                    "id": "q",
                    "prompt": "p",
                    "candidates": [{"id": "a", "text": "A"}, {"id": "b", "text": "B"}],
                },
            )
        ],
    )
    prov = {"rater_id": "r1"}
    ok = {"kind": "unary", "item_id": "q", "candidate_id": "a", "label": True, "provenance": prov}
    bad_cand = {
        "kind": "pairwise",
        "item_id": "q",
        "shown_order": ["a", "z"],
        "winner": "a",
        "strength": 1,
        "provenance": prov,
    }
    bad_item = {
        "kind": "unary",
        "item_id": "nope",
        "candidate_id": "a",
        "label": True,
        "provenance": prov,
    }
    err = fails(engine, "p", [jsonl(tmp_path, "j.jsonl", ok, bad_cand, bad_item)])
    assert [(p.line, p.field) for p in err.problems] == [(2, "shown_order"), (3, "item_id")]
    assert "'z' is not a candidate of item 'q' (it has a, b)" in err.problems[0].reason
    assert "no item 'nope'" in err.problems[1].reason
    report = import_files(engine, "p", [jsonl(tmp_path, "k.jsonl", ok)])
    assert report.judgments_added == 1


def test_judgment_kind_the_project_does_not_collect(engine, tmp_path):
    path = jsonl(tmp_path, "a.jsonl", {"prompt": "p", "completion": "c", "label": True})
    p = one_problem(engine, "pairs", [path])
    assert p.field == "kind" and "collects ['pairwise'], not 'unary'" in p.reason


def test_rubric_scores_are_checked(engine, tmp_path):
    import_files(engine, "p", [FIXTURES / "squality-sample.jsonl"])
    j = {
        "kind": "rubric",
        "item_id": "squality-50827-q0",
        "candidate_id": "bart",
        "scores": {"correctness": 150, "selection": 1, "overall": 1},
        "provenance": {"rater_id": "r", "rubric_id": "squality", "rubric_version": 1},
    }
    p = one_problem(engine, "p", [jsonl(tmp_path, "r.jsonl", j)])
    assert p.field == "scores.correctness" and "outside" in p.reason
    j["provenance"]["rubric_id"] = "nope"
    p = one_problem(engine, "p", [jsonl(tmp_path, "s.jsonl", j)])
    assert p.field == "provenance.rubric_id"


def test_max_errors_and_the_rest_counted(engine, tmp_path):
    path = jsonl(tmp_path, "a.jsonl", *[{"prompt": n} for n in range(80)])
    err = fails(engine, "p", [path], max_errors=5)
    assert err.total == 80 and len(err.problems) == 5
    assert str(err).rstrip().endswith("... and 75 more")


def test_skip_invalid_keeps_good_records(engine, tmp_path):
    path = jsonl(
        tmp_path,
        "a.jsonl",
        {"prompt": "p", "candidates": ["a"]},
        {"prompt": 1},
        {"prompt": "q", "candidates": ["b"]},
    )
    report = import_files(engine, "p", [path], ImportOptions(skip_invalid=True))
    assert report.items_added == 2 and [p.line for p in report.skipped] == [2]


def test_unknown_project(engine, tmp_path):
    with pytest.raises(repo.NotFound, match="no project 'zzz'"):
        import_files(engine, "zzz", [FIXTURES / "pandalm-60.json"])


def test_progress_reports_every_byte(engine):
    seen = []
    paths = [FIXTURES / "pandalm-60.json", FIXTURES / "hh-rlhf-sample.jsonl.gz"]
    import_files(engine, "p", paths, ImportOptions(skip_invalid=True), progress=seen.append)
    assert sum(seen) == sum(p.stat().st_size for p in paths)


# -- generic formats end to end -------------------------------------------------------------------


# The reference record of the foundation issue (as in tests/schema/test_trajectory.py).
TRAJECTORY_RECORD = (
    '{"trajectory_id":"traj_swe_prm_9041","schema_version":"RLHF-2026.11","env":{"oci_image":'
    '"ghcr.io/bestrlhfdata/swe-rust-tokio@sha256:3d91b8a4","net_ns":"CLONE_NEWNET","base_commit":'
    '"a18f402d"},"turns":[{"turn":0,"role":"user","loss_mask":0,"content":"Fix lost wake-up in '
    'BoundedMpsc::send_async when receiver drops concurrently with permit release."},{"turn":1,'
    '"role":"assistant","loss_mask":1,"prm_steps":[{"step":1,"text":"Inspecting '
    'src/channel/mpsc.rs atomic state flags around CLOSED_BIT and waker registration.","verdict":1},'
    '{"step":2,"text":"Found race: rx_drop sets CLOSED_BIT with Ordering::Relaxed before reading '
    'tx_waker; upgrading to AcqRel and re-checking state after waker.register().","verdict":1}],'
    '"tool_call":{"name":"apply_patch_and_test","args":{"diff_lines":19}}},{"turn":2,"role":"tool",'
    '"loss_mask":0,"content":"cargo test --test loom_mpsc_drop ... ok (482loom permutations passed, '
    '0 failed)"}],"verifier":{"f2p_exit":0,"p2p_exit":0,"harness_sha256_verified":true,'
    '"terminal_reward":0.98},"rubric":{"reasoning_validity":1.0,"constraint_obedience":1.0,'
    '"verbosity_penalty":-0.02},"telemetry":{"annotator_hash":"hmac_sha256:77a1e09c","iki_cv":0.74,'
    '"revision_ratio":0.165,"untrusted_paste_chars":0}}'
)


def _trajectory_record() -> dict:
    return orjson.loads(TRAJECTORY_RECORD)


def test_every_generic_shape_imports(engine, tmp_path):
    msgs = [{"role": "user", "content": "hi"}]
    records = [
        {"prompt": "to label", "answer_a": "A", "answer_b": "B", "model_a": "m1"},
        {
            "prompt": "to label",
            "candidates": ["x", {"id": "y", "text": "Y", "model": "m"}],
            "domains": ["Code"],
            "gold": {"judgment": {"kind": "unary", "candidate_id": "y", "label": True}},
        },
        {
            "prompt": "2+2",
            "chosen": "4",
            "rejected": "5",
            "labeler": "ann",
            "source": "ai",
            "strength": 3,
        },
        {
            "prompt": msgs,
            "chosen": [{"role": "assistant", "content": "hello"}],
            "rejected": [{"role": "assistant", "content": "go away"}],
            "margin": 0.4,
        },
        {
            "chosen": msgs + [{"role": "assistant", "content": "hey"}],
            "rejected": msgs + [{"role": "assistant", "content": "no"}],
        },
        {"prompt": "rate me", "completion": "ok", "label": False},
        _trajectory_record(),
        Item(
            id="native",
            prompt="n",
            candidates=[{"id": "c1", "text": "t"}, {"id": "c2", "text": "u"}],
        ).model_dump(mode="json"),
        {
            "kind": "ranking",
            "item_id": "native",
            "order": [["c2"], ["c1"]],
            "provenance": {"rater_id": "r9"},
        },
    ]
    report = import_files(engine, "p", [jsonl(tmp_path, "mixed.jsonl", *records)])
    assert report.formats == {
        "pair": 1,
        "item": 2,
        "comparison": 3,
        "unpaired": 1,
        "trajectory": 1,
        "judgment": 1,
    }
    assert report.items_added == 8 and report.judgments_added == 7  # the trajectory: steps + rubric
    with transaction(engine) as s:
        project = repo.get_project(s, "p")
        entries = {e.item.id: e for e in repo.iter_items_with_judgments(s, project)}
        traj = entries["traj_swe_prm_9041"]
        assert (
            Trajectory.model_validate(traj.item.metadata["trajectory"]).dump()
            == _trajectory_record()
        )
        steps, rubric = sorted(traj.judgments, key=lambda j: j.kind, reverse=True)
        assert steps.kind == "steps" and steps.verdicts == [1, 1]
        assert rubric.kind == "rubric" and rubric.provenance.rater_id == "hmac_sha256:77a1e09c"
        assert steps.provenance.rater_id == "hmac_sha256:77a1e09c"
        sources = {j.provenance.source for e in entries.values() for j in e.judgments}
        assert sources == {"human", "ai"}
        kinds = sorted(j.kind for e in entries.values() for j in e.judgments)
        assert kinds == ["pairwise", "pairwise", "pairwise", "ranking", "rubric", "steps", "unary"]
        implicit = [
            e
            for e in entries.values()
            if e.item.prompt
            and not isinstance(e.item.prompt, str)
            and e.item.candidates[0].messages
            and e.item.candidates[0].messages[0].content == "hey"
        ]
        assert len(implicit) == 1
        assert (
            s.scalar(
                select(func.count()).select_from(JudgmentRow).where(JudgmentRow.source == "ai")
            )
            == 1
        )


def test_validate_files_without_a_database(tmp_path):
    good = FIXTURES / "pandalm-60.json"
    report = validate_files([good])
    assert report.ok and (report.records, report.items, report.judgments) == (60, 60, 180)
    bad = validate_files([FIXTURES / "pandalm-bad.json"])
    assert not bad.ok and bad.total_problems == 1 and bad.problems[0].field == "response1"
    assert bad.records == 3


# -- the lean path for plain comparisons ---------------------------------------------------------


def test_no_earlier_format_takes_the_lean_comparison_shape():
    from itertools import combinations

    from preflab.io.formats import detect_format
    from preflab.io.formats.generic import COMPARISON, FAST_COMPARISON_KEYS

    values = {
        "prompt": "p",
        "chosen": "c",
        "rejected": "r",
        "labeler": "l",
        "source": "human",
        "strength": 1,
        "margin": 1.0,
    }
    optional = sorted(FAST_COMPARISON_KEYS - {"prompt", "chosen", "rejected"})
    for n in range(len(optional) + 1):
        for extra in combinations(optional, n):
            record = {k: values[k] for k in ("prompt", "chosen", "rejected", *extra)}
            assert detect_format(record) is COMPARISON, record


def _rows(engine, project: str) -> dict[str, list[tuple]]:
    """Every row an import wrote for ``project``, without keys that differ between projects."""
    from sqlalchemy import text

    with engine.connect() as conn:
        ppk = conn.execute(
            text("SELECT pk FROM projects WHERE name = :n"), {"n": project}
        ).scalar_one()
        items = conn.execute(
            text(
                "SELECT item_key, content_hash, prompt, domains, reference, gold, metadata FROM items "
                "WHERE project_pk = :p ORDER BY item_key"
            ),
            {"p": ppk},
        ).all()
        cands = conn.execute(
            text(
                "SELECT i.item_key, c.candidate_key, c.position, c.text, c.messages, c.model, c.source, c.metadata "
                "FROM candidates c JOIN items i ON i.pk = c.item_pk WHERE i.project_pk = :p "
                "ORDER BY i.item_key, c.position"
            ),
            {"p": ppk},
        ).all()
        judgments = conn.execute(
            text(
                "SELECT i.item_key, r.rater_key, j.kind, j.body, j.rationale, j.pair_lo, j.pair_hi, j.score, "
                "j.shown_order, j.rubric_key, j.rubric_version, j.review_pass, j.source, j.started_at, j.submitted_at, "
                "j.telemetry, j.idempotency_key, j.content_hash, j.excluded FROM judgments j "
                "JOIN items i ON i.pk = j.item_pk JOIN raters r ON r.pk = j.rater_pk WHERE j.project_pk = :p "
                "ORDER BY j.content_hash"
            ),
            {"p": ppk},
        ).all()
    return {"items": items, "candidates": cands, "judgments": judgments}


def test_lean_path_writes_what_the_generic_path_writes(engine, tmp_path, monkeypatch):
    records = [
        {"prompt": "2+2", "chosen": "4", "rejected": "5", "labeler": "ann"},
        {
            "prompt": 'caf\u00e9 "quoted"\n\\',
            "chosen": "\u2603 snow",
            "rejected": "\x1f control",
            "source": "ai",
        },
        {"prompt": "", "chosen": "a", "rejected": "b", "labeler": 7, "strength": 3},
        {"prompt": "m", "chosen": "x", "rejected": "y", "margin": -0.4, "labeler": " padded "},
        {
            "prompt": "2+2",
            "chosen": "4",
            "rejected": "5",
            "labeler": "ann",
        },  # the same again: nothing new
        {
            "prompt": "2+2",
            "chosen": "4",
            "rejected": "5",
            "labeler": "bob",
        },  # known item, new judgment
    ]
    path = jsonl(tmp_path, "cmp.jsonl", *records)
    with transaction(engine) as s:
        repo.create_project(s, "generic", kinds=["pairwise"])
    lean = import_files(engine, "pairs", [path])
    monkeypatch.setattr("preflab.io.importer.convert.comparison_pair", lambda record, options: None)
    monkeypatch.setattr("preflab.io.formats.generic.comparison_pair", lambda record, options: None)
    generic = import_files(engine, "generic", [path])
    assert (
        lean.items_added,
        lean.items_existing,
        lean.judgments_added,
        lean.judgments_existing,
    ) == (4, 2, 5, 1)
    assert (
        generic.items_added,
        generic.items_existing,
        generic.judgments_added,
        generic.judgments_existing,
    ) == (4, 2, 5, 1)
    assert lean.formats == generic.formats == {"comparison": 6}
    assert _rows(engine, "pairs") == _rows(engine, "generic")


def test_lean_path_problems_match_the_generic_path(engine, tmp_path, monkeypatch):
    good = {"prompt": "q", "chosen": "a", "rejected": "b"}
    records = [
        good,
        {"prompt": "q", "chosen": "a", "rejected": "b", "source": "robot"},
        {"prompt": "q", "chosen": "a", "rejected": "c", "strength": 9},
        {"prompt": "q", "chosen": "a", "rejected": "d", "strength": True, "source": "robot"},
        {"prompt": "q", "chosen": "a", "rejected": "e", "labeler": ""},
        {"prompt": "q", "chosen": "a", "rejected": "a"},
    ]
    path = jsonl(tmp_path, "bad.jsonl", *records)
    lean = fails(engine, "pairs", [path])
    monkeypatch.setattr("preflab.io.importer.convert.comparison_pair", lambda record, options: None)
    monkeypatch.setattr("preflab.io.formats.generic.comparison_pair", lambda record, options: None)
    generic = fails(engine, "pairs", [path])
    assert [str(p) for p in lean.problems] == [str(p) for p in generic.problems]
    assert [p.field for p in lean.problems] == [
        "source",
        "strength",
        "source",
        "labeler",
        "rejected",
    ]


def test_lean_path_against_existing_items(engine, tmp_path):
    first = jsonl(
        tmp_path, "a.jsonl", {"prompt": "q", "chosen": "a", "rejected": "b", "labeler": "ann"}
    )
    import_files(engine, "pairs", [first])
    # the same item again with another rater: the item exists, the judgment is new
    second = jsonl(
        tmp_path,
        "b.jsonl",
        {"prompt": "q", "chosen": "a", "rejected": "b", "labeler": "bob"},
        {"prompt": "q", "chosen": "a", "rejected": "b", "labeler": "ann"},
    )
    report = import_files(engine, "pairs", [second])
    assert (
        report.items_added,
        report.items_existing,
        report.judgments_added,
        report.judgments_existing,
    ) == (0, 2, 1, 1)
    with transaction(engine) as s:
        repo.create_project(s, "units", kinds=["unary"])
    problem = one_problem(engine, "units", [first])
    assert problem.field == "kind" and problem.line == 1


def test_idempotency_keys_are_per_rater_in_an_import(tmp_path):
    """Issue 31 (0015): two raters may carry the same idempotency key; the same rater's key
    names one judgment (a second record with it adds nothing), in one file or across imports."""
    from preflab.io.importer import import_files
    from preflab.store import repo, transaction
    from preflab.store.db import open_db

    def record(rater: str, key: str, winner: str) -> str:
        return orjson.dumps(
            {
                "item": {
                    "id": "i1",
                    "prompt": "p",
                    "candidates": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}],
                },
                "kind": "pairwise",
                "item_id": "i1",
                "shown_order": ["a", "b"],
                "winner": winner,
                "strength": 1,
                "provenance": {"rater_id": rater, "idempotency_key": key},
            }
        ).decode()

    engine = open_db(f"sqlite:///{tmp_path / 'k.db'}")
    with transaction(engine) as s:
        repo.create_project(s, "p", kinds=["pairwise"])
    first = tmp_path / "one.jsonl"
    first.write_text(record("ann", "k-1", "a") + "\n" + record("bob", "k-1", "b") + "\n")
    report = import_files(engine, "p", [first])
    assert report.judgments_added == 2, report
    again = tmp_path / "two.jsonl"
    again.write_text(record("ann", "k-1", "b") + "\n" + record("cid", "k-1", "a") + "\n")
    report = import_files(engine, "p", [again])
    assert (report.judgments_added, report.judgments_existing) == (1, 1), report


def test_an_item_no_kind_fits_is_refused_where_items_go_to_raters_only(tmp_path):
    """Issue 31: the items API refused a one-answer item in a pairwise-only project while the
    file upload took it (raters were then handed an item whose every label was refused). The
    server's routes check with ``validate_files(labelled_by=kinds)``, in the API's words; the
    CLI's import still takes such items (a verl task with one reference answer, a three-answer
    item that `to-label` splits into pairs are not for raters)."""
    from preflab.store.db import open_db

    path = tmp_path / "items.jsonl"
    rows = [
        {
            "id": "two",
            "prompt": "p",
            "candidates": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}],
        },
        {"id": "one", "prompt": "q", "candidates": [{"id": "a", "text": "x"}]},
    ]
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in rows))
    report = validate_files([path], labelled_by=["pairwise"])
    (problem,) = report.problems
    assert (problem.line, problem.field) == (2, "candidates")
    assert "item 'one' has 1 answer(s)" in problem.reason and "exactly 2 answers" in problem.reason
    assert not validate_files([path], labelled_by=["pairwise", "unary"]).problems
    assert not validate_files([path]).problems
    engine = open_db(f"sqlite:///{tmp_path / 'k.db'}")
    with transaction(engine) as s:
        repo.create_project(s, "pairs", kinds=["pairwise"])
    assert import_files(engine, "pairs", [path]).items_added == 2
