"""A pairwise judgment's canonical form and content hash have one definition
(:mod:`preflab.schema.pairwise`), and what the hash covers is frozen.

Why frozen: content hashes are stored in every database (``judgments.content_hash``, unique per
item) and make imports idempotent. A change to the hashed fields, or to how they are written,
gives every judgment a new hash: re-importing a file would add each judgment a second time, and
stored rows would no longer match the hash the code computes. Such a change needs a migration
that rehashes the stored judgments (as 0005 and 0007 did); then update these values.
"""

from __future__ import annotations

import orjson
import pytest

from preflab.schema.judgments import PairwiseJudgment
from preflab.schema.pairwise import (
    PAIRWISE_HASHED_FIELDS,
    UNHASHED_PROVENANCE,
    canonical_pair,
    judgment_content_hash,
    pairwise_body,
    pairwise_body_json,
    pairwise_hashed,
    plain_pair_content_hash,
)
from preflab.store.rows import judgment_rows, pair_rows, pairwise_rows

#: Computed before the helper existed, by each of the three row builders of store/rows.py.
FROZEN_PLAIN = "f53271ee0ad2db2d5f984e5267bdf8fc30bd4254baa112755d41a17e2ae11887"
FROZEN_FULL = "18f5dea98c248689fe9fe392efc803ed7b537f314f4988d9e52c79ab61e79a69"
WHY = (
    "a pairwise judgment's content hash changed: hashes stored in databases would no longer "
    "match, and re-imports would duplicate judgments; rehash them in a migration first"
)


def test_the_hashed_field_set_is_frozen():
    assert PAIRWISE_HASHED_FIELDS == {
        "item_id",
        "kind",
        "shown_order",
        "winner",
        "strength",
        "rationale",
        "provenance",
        "spans",  # critique spans: only when present, so no stored hash changed (test_spans.py)
    }, WHY
    assert UNHASHED_PROVENANCE == {"idempotency_key", "rater_hash"}, WHY


def test_the_wire_form_has_no_field_the_hash_leaves_out():
    """Every field a pairwise judgment can carry is hashed: a new field on the model must be
    added here on purpose (and to the hash, with a migration), not slip out of it."""
    fields = {f.alias or name for name, f in PairwiseJudgment.model_fields.items()}
    assert fields == PAIRWISE_HASHED_FIELDS, WHY


def test_a_plain_comparison_hashes_to_its_frozen_value_on_every_path():
    lean = pair_rows("What is 2+2?", "4", "five", "alice", 2, "human")
    assert lean.item_key == "itm_800c402446aa1b01"
    assert lean.content_hash == FROZEN_PLAIN, WHY
    fast = pairwise_rows(lean.item_key, lean.candidate_keys, "a", 2, "alice")
    assert fast.content_hash == FROZEN_PLAIN, WHY
    model = PairwiseJudgment(
        item_id=lean.item_key,
        shown_order=list(lean.candidate_keys),
        winner="a",
        strength=2,
        provenance={"rater_id": "alice"},
    )
    assert judgment_rows(model).content_hash == FROZEN_PLAIN, WHY


def test_a_full_judgment_hashes_to_its_frozen_value():
    judgment = PairwiseJudgment(
        item_id="item-1",
        shown_order=["x", "y"],
        winner="b",
        strength=None,
        rationale="y is right",
        provenance={"rater_id": "bob", "source": "ai", "review_pass": 1, "idempotency_key": "k1"},
    )
    rows = judgment_rows(judgment)
    assert rows.content_hash == FROZEN_FULL, WHY
    # the idempotency key is not part of it: the same judgment delivered twice is one
    again = judgment.model_copy(
        update={"provenance": judgment.provenance.model_copy(update={"idempotency_key": "k2"})}
    )
    assert judgment_rows(again).content_hash == FROZEN_FULL
    hashed = pairwise_hashed(
        "item-1",
        ("x", "y"),
        "b",
        None,
        {"rater_id": "bob", "review_pass": 1, "source": "ai"},
        "y is right",
    )
    assert judgment_content_hash(hashed) == FROZEN_FULL


@pytest.mark.parametrize(
    ("a", "b", "winner", "strength", "expected"),
    [
        ("x", "y", "a", 2, ("x", "y", -2)),  # the first of the sorted pair better: negative
        ("y", "x", "a", 2, ("x", "y", 2)),  # shown the other way round: the same stored pair
        ("y", "x", "b", 3, ("x", "y", -3)),
        ("x", "y", "tie", 0, ("x", "y", 0)),
        ("x", "y", "b", None, ("x", "y", None)),  # better by an unknown amount
    ],
)
def test_canonical_pair(a, b, winner, strength, expected):
    pair = canonical_pair(a, b, winner, strength)
    assert (pair.lo, pair.hi, pair.score) == expected


def test_the_byte_assembled_forms_equal_the_canonical_json():
    body = pairwise_body("cand_1", "cand_2", "a", 1)
    assert pairwise_body_json("cand_1", "cand_2", "a", 1) == orjson.dumps(body).decode()
    assert (
        pairwise_body_json("cand_1", "cand_2", "tie", None)
        == orjson.dumps(pairwise_body("cand_1", "cand_2", "tie", None)).decode()
    )
    for strength in (None, 0, 3):
        hashed = pairwise_hashed(
            "itm_1",
            ("cand_1", "cand_2"),
            "b",
            strength,
            {"rater_id": 'r "1"', "review_pass": 0, "source": "ai_assisted"},
        )
        assembled = plain_pair_content_hash(
            b"itm_1", orjson.dumps('r "1"'), b"ai_assisted", b"cand_1", b"cand_2", b"b", strength
        )
        assert assembled == judgment_content_hash(hashed)
