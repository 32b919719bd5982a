"""One pair, one item (issue 17 section 1): an item is its prompt and the *set* of its answers,
compared after the normalisation documented in :mod:`preflab.schema.identity`, whatever shape
the record that brought it had."""

from __future__ import annotations

import tempfile
import unicodedata
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from preflab.io.importer import ImportFailed, ImportOptions, import_files, validate_files
from preflab.io.importer import worker as importer_worker
from preflab.schema import Item
from preflab.schema.identity import normal_text
from preflab.store import db, repo, transaction
from preflab.store.models import CandidateRow, ItemAlias, ItemRow, JudgmentRow, Rater

ALL_KINDS = ("pairwise", "ranking", "rubric", "unary", "steps", "demonstration")


@pytest.fixture
def engine(db_url):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "p", kinds=ALL_KINDS)
    yield engine
    engine.dispose()


def jsonl(path: Path, *records) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def labels(engine) -> list[tuple[str, str, str, str]]:
    """``(item key, rater, winner's text normalised, loser's text normalised)`` per pairwise judgment."""
    with engine.connect() as conn:
        texts = {
            (r.item_pk, r.candidate_key): r.text if r.text is not None else r.messages
            for r in conn.execute(
                select(
                    CandidateRow.item_pk,
                    CandidateRow.candidate_key,
                    CandidateRow.text,
                    CandidateRow.messages,
                )
            )
        }
        rows = conn.execute(
            select(ItemRow.item_key, ItemRow.pk, Rater.rater_key, JudgmentRow.body)
            .join(JudgmentRow, JudgmentRow.item_pk == ItemRow.pk)
            .join(Rater, Rater.pk == JudgmentRow.rater_pk)
        ).all()
    out = []
    for (
        key,
        pk,
        rater,
        body,
    ) in rows:  # the body, not `score`: a comparison without a strength has no score
        a, b = body["shown_order"]
        win, lose = (a, b) if body["winner"] == "a" else (b, a)
        out.append((key, rater, _normal(texts[pk, win]), _normal(texts[pk, lose])))
    return sorted(out)


def _normal(body) -> str:
    if isinstance(body, list):
        body = "\n\n".join(m["content"] for m in body if m["role"] == "assistant")
    return normal_text(body)


def item_count(engine) -> int:
    with engine.connect() as conn:
        return len(conn.execute(select(ItemRow.pk)).all())


# -- the findings of the issue ---------------------------------------------------------------


def test_the_same_pair_judged_in_opposite_directions_is_one_item_with_two_opposite_labels(
    engine, tmp_path
):
    alice = {
        "prompt": "Which is better?",
        "chosen": "Answer one.",
        "rejected": "Answer two.",
        "labeler": "alice",
    }
    bob = {
        "prompt": "Which is better?",
        "chosen": "Answer two.",
        "rejected": "Answer one.",
        "labeler": "bob",
    }
    report = import_files(engine, "p", [jsonl(tmp_path / "c.jsonl", alice, bob)])
    assert (report.items_added, report.items_existing, report.judgments_added) == (1, 1, 2)
    assert item_count(engine) == 1
    (k1, *a), (k2, *b) = labels(engine)
    assert k1 == k2
    assert a == ["alice", "Answer one.", "Answer two."]
    assert b == ["bob", "Answer two.", "Answer one."]
    with engine.connect() as conn:
        scores = list(conn.execute(select(JudgmentRow.score)).scalars())
    # the records give no strength: it stays unknown (issue 15), so no signed strength either
    assert scores == [None, None]


def test_the_same_pair_from_the_general_route_is_the_same_item_too(engine, tmp_path):
    # a rationale takes the record off the lean path: both routes must agree on the identity
    lean = {"prompt": "Q", "chosen": "A", "rejected": "B", "labeler": "alice"}
    general = {
        "prompt": "Q",
        "chosen": "B",
        "rejected": "A",
        "labeler": "bob",
        "rationale": "shorter",
    }
    import_files(engine, "p", [jsonl(tmp_path / "c.jsonl", lean, general)])
    assert item_count(engine) == 1 and len(labels(engine)) == 2


def test_a_prompt_as_a_string_or_as_one_user_message_is_the_same_prompt(engine, tmp_path):
    # before: same id, "different content": the whole import failed
    text = {"id": "x", "prompt": "Q", "chosen": "A", "rejected": "B", "labeler": "alice"}
    chat = {
        "id": "x",
        "prompt": [{"role": "user", "content": "Q"}],
        "chosen": "A",
        "rejected": "B",
        "labeler": "bob",
    }
    report = import_files(engine, "p", [jsonl(tmp_path / "c.jsonl", text, chat)])
    assert (report.items_added, report.judgments_added) == (1, 2)
    no_id = {k: v for k, v in chat.items() if k != "id"}
    no_id_text = {k: v for k, v in text.items() if k != "id"}
    import_files(engine, "p", [jsonl(tmp_path / "d.jsonl", no_id, no_id_text)])
    assert item_count(engine) == 1  # "x": the records without an id bring the same content
    assert len(labels(engine)) == 2  # the same raters' same verdicts: nothing new


def test_an_answer_as_text_or_as_one_assistant_message_is_the_same_answer(engine, tmp_path):
    text = {"prompt": "Q", "chosen": "A", "rejected": "B", "labeler": "alice"}
    chat = {
        "prompt": "Q",
        "chosen": [{"role": "assistant", "content": "A"}],
        "rejected": [{"role": "assistant", "content": "B"}],
        "labeler": "bob",
    }
    import_files(engine, "p", [jsonl(tmp_path / "c.jsonl", text, chat)])
    assert item_count(engine) == 1 and len(labels(engine)) == 2


def test_unicode_forms_and_surrounding_whitespace_do_not_split_an_item(engine, tmp_path):
    # before: five items for one pair, each with one rater (so --min-raters 2 dropped them all)
    prompt, good, bad = "Qu'est-ce qu'un café ?", "Un café.", "Une boisson."
    nfd = unicodedata.normalize("NFD", prompt)
    assert nfd != prompt
    rows = [
        (prompt, good, bad),
        (nfd, good, bad),
        (prompt + "\n", good, bad),
        (prompt, good + "\n", bad),
        (prompt, " " + good, bad),
    ]
    records = [
        {"prompt": p, "chosen": c, "rejected": r, "labeler": f"r{n}"}
        for n, (p, c, r) in enumerate(rows)
    ]
    report = import_files(engine, "p", [jsonl(tmp_path / "c.jsonl", *records)])
    assert (report.items_added, report.judgments_added) == (1, 5)
    assert {(w, lo) for _, _, w, lo in labels(engine)} == {(good, bad)}


def test_answers_equal_after_normalisation_are_not_a_pair(engine, tmp_path):
    from preflab.io.importer import ImportFailed

    path = jsonl(
        tmp_path / "c.jsonl", {"prompt": "Q", "chosen": "A", "rejected": " A\n", "labeler": "alice"}
    )
    with pytest.raises(
        ImportFailed, match=r"c.jsonl:1: rejected: identical to 'chosen' \(compared after normal"
    ):
        import_files(engine, "p", [path])


def test_reimport_of_the_same_records_written_otherwise_adds_nothing(engine, tmp_path):
    a = [{"prompt": "Q", "chosen": "A", "rejected": "B", "labeler": "alice"}]
    b = [
        {
            "prompt": [{"role": "user", "content": "Q "}],
            "candidates": [{"messages": [{"role": "assistant", "content": "B"}]}, "A"],
        },
        {"prompt": "Q", "answer_a": "B\n", "answer_b": "A"},
    ]
    import_files(engine, "p", [jsonl(tmp_path / "a.jsonl", *a)])
    report = import_files(engine, "p", [jsonl(tmp_path / "b.jsonl", *b)])
    assert (report.items_added, report.items_existing) == (0, 2)
    reordered = [dict(reversed(list(r.items()))) for r in a]  # other bytes, same records
    again = import_files(engine, "p", [jsonl(tmp_path / "a2.jsonl", *reordered)])
    assert not again.already_imported
    assert (again.items_added, again.judgments_added, again.judgments_existing) == (0, 0, 1)


def test_the_model_and_the_rows_agree_on_the_identity():
    one = Item(prompt="Q", candidates=[{"text": "A"}, {"text": "B"}])
    other = Item(
        prompt=[{"role": "user", "content": "Q\n"}],
        candidates=[{"messages": [{"role": "assistant", "content": "B"}]}, {"text": " A"}],
    )
    assert one.id == other.id
    assert one.content_hash() == other.content_hash()
    assert {c.id for c in one.candidates} == {c.id for c in other.candidates}


# -- every comparison-shaped input, generated ------------------------------------------------


def _user(text):
    return [{"role": "user", "content": text}]


def _assistant(text):
    return [{"role": "assistant", "content": text}]


#: Records that carry a label: ``(prompt, chosen, rejected, rater) -> record``.
LABELLED = {
    "trl-standard": lambda p, c, r, who: {"prompt": p, "chosen": c, "rejected": r, "labeler": who},
    "trl-standard-general-route": lambda p, c, r, who: {
        "prompt": p,
        "chosen": c,
        "rejected": r,
        "labeler": who,
        "rationale": "why",
    },
    "trl-conversational": lambda p, c, r, who: {
        "prompt": _user(p),
        "chosen": _assistant(c),
        "rejected": _assistant(r),
        "labeler": who,
    },
    "trl-conversational-implicit-prompt": lambda p, c, r, who: {
        "chosen": _user(p) + _assistant(c),
        "rejected": _user(p) + _assistant(r),
        "labeler": who,
    },
    "openrlhf": lambda p, c, r, who: {
        "prompt": p,
        "chosen": c,
        "rejected": r,
        "margin": 1.0,
        "labeler": who,
    },
    "hh-rlhf": lambda p, c, r, who: {
        "chosen": f"\n\nHuman: {p}\n\nAssistant: {c}",
        "rejected": f"\n\nHuman: {p}\n\nAssistant: {r}",
        "labeler": who,
    },
}
#: Records of the pair without a label: ``(prompt, a, b) -> record``.
UNLABELLED = {
    "answer_a/answer_b": lambda p, a, b: {"prompt": p, "answer_a": a, "answer_b": b},
    "candidates": lambda p, a, b: {"prompt": p, "candidates": [b, a]},
    "preflab-item": lambda p, a, b: {
        "prompt": _user(p),
        "candidates": [{"messages": _assistant(a)}, {"text": b}],
    },
}
#: The same records naming their item (the classic pipeline: to_label.jsonl, comparisons.jsonl).
NAMED_LABELLED = {
    "comparisons.jsonl": lambda i, p, c, r, who: {
        "id": i,
        "prompt": p,
        "chosen": c,
        "rejected": r,
        "labeler": who,
    }
}
NAMED_UNLABELLED = {
    "to_label.jsonl": lambda i, p, a, b: {"id": i, "prompt": p, "answer_a": a, "answer_b": b},
    "preflab-item": lambda i, p, a, b: {"id": i, "prompt": p, "candidates": [a, b]},
}

WRITTEN = [
    lambda t: t,
    lambda t: unicodedata.normalize("NFD", t),
    lambda t: t + "\n",
    lambda t: " " + t,
]
words = (
    st.text(alphabet="abcé ñÅ", min_size=1, max_size=12)
    .map(lambda t: unicodedata.normalize("NFC", t).strip())
    .filter(bool)
)


@st.composite
def pairs(draw):
    """Pairs with distinct prompts, each written several times in several shapes and directions,
    with no id, or one of two ids (content decides: ids never split a pair)."""
    prompts = draw(st.lists(words, min_size=1, max_size=3, unique=True))
    out = []
    for n, prompt in enumerate(prompts):
        a, b = draw(st.lists(words, min_size=2, max_size=2, unique=True))
        writes = []
        for _ in range(draw(st.integers(1, 5))):
            pair_id = draw(st.sampled_from([None, f"pair{n}", f"pair{n}-also"]))
            labelled = draw(st.booleans())
            named = pair_id is not None
            shapes = (
                (NAMED_LABELLED if labelled else NAMED_UNLABELLED)
                if named
                else (LABELLED if labelled else UNLABELLED)
            )
            shape = draw(st.sampled_from(sorted(shapes)))
            a_first = draw(st.booleans())
            style = [draw(st.sampled_from(WRITTEN)) for _ in range(3)]
            writes.append((pair_id, labelled, shape, a_first, style))
        out.append((prompt, a, b, writes))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=pairs())
def test_every_shape_and_writing_of_a_pair_is_one_item_and_every_label_is_kept(data):
    records, expected = [], []
    for prompt, a, b, writes in data:
        for n, (pair_id, labelled, shape, a_first, (wp, w1, w2)) in enumerate(writes):
            first, second = (a, b) if a_first else (b, a)
            p, x, y = wp(prompt), w1(first), w2(second)
            if labelled:
                rater = f"{prompt}-r{n}".replace(" ", "_")
                args = (p, x, y, rater)
                shapes = LABELLED if pair_id is None else NAMED_LABELLED
                records.append(
                    shapes[shape](*args) if pair_id is None else shapes[shape](pair_id, *args)
                )
                expected.append((rater, first, second))
            else:
                shapes = UNLABELLED if pair_id is None else NAMED_UNLABELLED
                records.append(
                    shapes[shape](p, x, y) if pair_id is None else shapes[shape](pair_id, p, x, y)
                )
    with tempfile.TemporaryDirectory() as tmp:
        engine = db.open_db(f"sqlite:///{tmp}/t.db")
        try:
            with transaction(engine) as s:
                repo.create_project(s, "p", kinds=ALL_KINDS)
            import_files(engine, "p", [jsonl(Path(tmp) / "in.jsonl", *records)], ImportOptions())
            assert item_count(engine) == len(data), "one item per pair"
            got = labels(engine)
            assert sorted((rater, win, lose) for _, rater, win, lose in got) == sorted(expected), (
                "every label kept"
            )
            by_prompt = {}
            for key, rater, _, _ in got:
                by_prompt.setdefault(rater.rsplit("-r", 1)[0], set()).add(key)
            assert all(len(keys) == 1 for keys in by_prompt.values())
        finally:
            engine.dispose()


def test_five_raters_of_one_pair_written_five_ways_pass_min_raters_2(engine, tmp_path):
    # before: five items of one rater each, and --min-raters 2 dropped all five
    from preflab.io.export import ExportOptions, export_project

    prompt, good, bad = "Qu'est-ce qu'un café ?", "Un café.", "Une boisson."
    rows = [
        (prompt, good, bad),
        (unicodedata.normalize("NFD", prompt), good, bad),
        (prompt + "\n", good, bad),
        (prompt, good + "\n", bad),
        (prompt, " " + good, bad),
    ]
    records = [
        {"prompt": p, "chosen": c, "rejected": r, "labeler": f"r{n}"}
        for n, (p, c, r) in enumerate(rows)
    ]
    import_files(engine, "p", [jsonl(tmp_path / "c.jsonl", *records)])
    out = tmp_path / "out"
    # identity, not length: the length gate (on by default) is off
    export_project(
        engine,
        "p",
        ExportOptions(format="trl-preference", out=out, min_raters=2, length_gate=None),
    )
    exported = [orjson.loads(line) for line in (out / "train.jsonl").read_bytes().splitlines()]
    assert [(r["prompt"], r["chosen"], r["rejected"]) for r in exported] == [(prompt, good, bad)]


# -- explicit ids: content decides (issue 17 section 1, records that name their item) -------------

ALICE_C1 = {
    "id": "c1",
    "prompt": "Which is better?",
    "chosen": "Answer one.",
    "rejected": "Answer two.",
    "labeler": "alice",
}
BOB_C2 = {
    "id": "c2",
    "prompt": "Which is better?",
    "chosen": "Answer two.",
    "rejected": "Answer one.",
    "labeler": "bob",
}
CAROL = {
    "prompt": "Which is better?",
    "chosen": "Answer one.",
    "rejected": "Answer two.",
    "labeler": "carol",
}


def aliases(engine) -> dict[str, str]:
    with engine.connect() as conn:
        return dict(conn.execute(select(ItemAlias.alias_key, ItemRow.item_key).join(ItemRow)).all())


def test_the_same_pair_under_two_ids_is_one_item_with_two_opposite_labels(engine, tmp_path):
    # before: two items "c1" and "c2", each unanimous
    report = import_files(engine, "p", [jsonl(tmp_path / "c.jsonl", ALICE_C1, BOB_C2)])
    assert (report.items_added, report.items_existing, report.judgments_added) == (1, 1, 2)
    assert labels(engine) == [
        ("c1", "alice", "Answer one.", "Answer two."),
        ("c1", "bob", "Answer two.", "Answer one."),
    ]
    assert aliases(engine) == {"c2": "c1"}


@pytest.mark.parametrize("worker", ["0", "1"])
def test_a_record_without_an_id_joins_the_named_item_too(engine, tmp_path, monkeypatch, worker):
    # the lean path (a plain comparison without id) and the worker process, too
    monkeypatch.setenv("PREFLAB_IMPORT_WORKER", worker)
    monkeypatch.setattr(importer_worker, "HEAD", 1)  # the first record converted by the writer
    import_files(engine, "p", [jsonl(tmp_path / "c.jsonl", ALICE_C1, BOB_C2, CAROL)])
    assert item_count(engine) == 1
    assert [(k, r) for k, r, _, _ in labels(engine)] == [
        ("c1", "alice"),
        ("c1", "bob"),
        ("c1", "carol"),
    ]


def test_a_later_import_under_another_id_joins_the_item_in_the_database(engine, tmp_path):
    import_files(engine, "p", [jsonl(tmp_path / "a.jsonl", CAROL)])
    import_files(engine, "p", [jsonl(tmp_path / "b.jsonl", ALICE_C1)])
    import_files(engine, "p", [jsonl(tmp_path / "c.jsonl", BOB_C2)])
    assert item_count(engine) == 1
    assert {r for _, r, _, _ in labels(engine)} == {"alice", "bob", "carol"}
    (key,) = {k for k, _, _, _ in labels(engine)}
    assert key.startswith("itm_") and aliases(engine) == {"c1": key, "c2": key}


def test_reimport_of_records_under_other_ids_adds_nothing(engine, tmp_path):
    import_files(engine, "p", [jsonl(tmp_path / "c.jsonl", ALICE_C1, BOB_C2, CAROL)])
    again = import_files(engine, "p", [jsonl(tmp_path / "again.jsonl", CAROL, BOB_C2, ALICE_C1)])
    assert (again.items_added, again.judgments_added, again.judgments_existing) == (0, 0, 3)
    assert item_count(engine) == 1 and len(labels(engine)) == 3


def test_the_classic_pipeline_to_label_then_comparisons_with_the_same_id_is_one_item(
    engine, tmp_path
):
    to_label = {"id": "x", "prompt": "Q", "answer_a": "A", "answer_b": "B"}
    comparisons = [
        {"id": "x", "prompt": "Q", "chosen": "B", "rejected": "A", "labeler": "alice"},
        {"id": "y", "prompt": "Q", "chosen": "A", "rejected": "B", "labeler": "bob"},
    ]
    import_files(engine, "p", [jsonl(tmp_path / "to_label.jsonl", to_label)])
    import_files(engine, "p", [jsonl(tmp_path / "comparisons.jsonl", *comparisons)])
    assert labels(engine) == [("x", "alice", "B", "A"), ("x", "bob", "A", "B")]


def test_a_judgment_naming_the_item_by_an_alias_finds_it(engine, tmp_path):
    import_files(engine, "p", [jsonl(tmp_path / "c.jsonl", ALICE_C1, BOB_C2)])
    cands = {}
    with engine.connect() as conn:
        for key, text in conn.execute(select(CandidateRow.candidate_key, CandidateRow.text)):
            cands[text] = key
    judgment = {
        "kind": "pairwise",
        "item_id": "c2",
        "shown_order": [cands["Answer one."], cands["Answer two."]],
        "winner": "b",
        "strength": 2,
        "provenance": {"rater_id": "dave"},
    }
    report = import_files(engine, "p", [jsonl(tmp_path / "j.jsonl", judgment)])
    assert report.judgments_added == 1
    assert ("c1", "dave", "Answer two.", "Answer one.") in labels(engine)
    again = import_files(
        engine, "p", [jsonl(tmp_path / "j2.jsonl", judgment, {**judgment, "item_id": "c1"})]
    )
    assert (again.judgments_added, again.judgments_existing) == (0, 2), (
        "the content hash names the stored item"
    )


def test_the_same_id_with_different_content_is_still_an_error(engine, tmp_path):
    other = {**BOB_C2, "id": "c1", "chosen": "Answer three."}
    with pytest.raises(ImportFailed) as failed:
        import_files(engine, "p", [jsonl(tmp_path / "c.jsonl", ALICE_C1, other)])
    assert "c.jsonl:2: id: item 'c1' already exists with different content" in str(failed.value)
    # an alias is an id of its item: the same rule
    import_files(engine, "p", [jsonl(tmp_path / "ok.jsonl", ALICE_C1, BOB_C2)])
    with pytest.raises(ImportFailed) as failed:
        import_files(
            engine, "p", [jsonl(tmp_path / "d.jsonl", {**BOB_C2, "chosen": "Answer three."})]
        )
    assert (
        "d.jsonl:1: id: item 'c2' (another id of item 'c1') already exists with different content"
        in str(failed.value)
    )


def test_validate_reports_what_import_does_for_ids(tmp_path):
    ok = validate_files([jsonl(tmp_path / "c.jsonl", ALICE_C1, BOB_C2, CAROL)])
    assert ok.ok
    bad = validate_files(
        [jsonl(tmp_path / "d.jsonl", ALICE_C1, BOB_C2, {**BOB_C2, "chosen": "Answer three."})]
    )
    assert str(bad.problems[0]) == (
        f"{tmp_path}/d.jsonl:3: id: item 'c2' (another id of item 'c1') already exists with different content; give "
        "the new version another id (or leave 'id' out to derive one from the content)"
    )


def test_a_judgment_rekeyed_to_the_stored_id_hashes_as_one_written_with_that_id():
    from datetime import UTC, datetime

    from preflab.schema import PairwiseJudgment
    from preflab.store.rows import judgment_rows, pair_rows, pairwise_rows, rekeyed

    lean = pair_rows("Q", "A", "B", "alice", 2, "human")
    written = pairwise_rows("c1", lean.shown_order, lean.winner, lean.strength, "alice")
    assert rekeyed(lean.judgment_rows(), "c1").content_hash == written.content_hash
    assert rekeyed(written, lean.item_key).content_hash == lean.content_hash
    full = PairwiseJudgment(
        item_id="c2",
        shown_order=("x", "y"),
        winner="b",
        strength=1,
        rationale="why",
        provenance={"rater_id": "bob", "submitted_at": datetime(2026, 1, 2, tzinfo=UTC)},
    )
    moved = rekeyed(judgment_rows(full), "c1")
    assert moved == judgment_rows(full.model_copy(update={"item_id": "c1"}))
    assert (
        moved.content_hash == judgment_rows(full.model_copy(update={"item_id": "c1"})).content_hash
    )


@pytest.mark.parametrize(
    "order", [(ALICE_C1, CAROL, BOB_C2), (CAROL, ALICE_C1, BOB_C2), (CAROL, BOB_C2, ALICE_C1)]
)
def test_records_in_separate_chunks_of_a_fresh_project_join_by_content(
    engine, tmp_path, monkeypatch, order
):
    # each record is looked up in the database, not in the chunk: the lean path's shortcuts must not skip it
    monkeypatch.setattr("preflab.io.importer.worker.CHUNK", 1)
    import_files(engine, "p", [jsonl(tmp_path / "c.jsonl", *order)])
    assert item_count(engine) == 1 and {r for _, r, _, _ in labels(engine)} == {
        "alice",
        "bob",
        "carol",
    }
