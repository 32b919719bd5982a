"""The rule functions of ``preflab.server.flow``: each decision on plain values, as both paths
(the fast lane and the ORM path) call it."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from preflab.server.flow import next as rules
from preflab.server.flow.submit import judgment_columns, kind_refusal, lease_refusal
from preflab.server.policy import Policy

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _refusal(**changes):
    facts = {
        "found": True,
        "lease_status": "active",
        "rater_status": "qualified",
        "rater_reason": "",
        "expires_at": NOW + timedelta(minutes=5),
        "now": NOW,
    }
    return lease_refusal("asg_x", **{**facts, **changes})


def test_a_live_lease_of_a_qualified_rater_may_be_submitted() -> None:
    assert _refusal() is None


@pytest.mark.parametrize(
    ("changes", "status"),
    [
        ({"found": False}, 404),
        ({"lease_status": "submitted"}, 409),
        ({"lease_status": "released"}, 409),
        ({"rater_status": "suspended", "rater_reason": "drift"}, 403),
        ({"expires_at": NOW}, 410),
        # the checks apply in this order: a released lease of a suspended rater is a 409
        ({"lease_status": "released", "rater_status": "suspended"}, 409),
        ({"rater_status": "suspended", "expires_at": NOW - timedelta(1)}, 403),
    ],
)
def test_lease_refusals_and_their_order(changes: dict, status: int) -> None:
    assert _refusal(**changes).status == status


def test_suspension_names_the_reason() -> None:
    assert "drift" in _refusal(rater_status="suspended", rater_reason="drift").message


def test_declared_kinds_and_item_fit() -> None:
    assert kind_refusal("pairwise", ["pairwise"], 2) is None
    assert "collects ['ranking']" in kind_refusal("pairwise", ["ranking"], 2).message
    assert "needs exactly 2" in kind_refusal("pairwise", ["pairwise"], 3).message


def test_an_item_that_declares_its_kinds_takes_only_those() -> None:
    """``metadata.kinds`` narrows the project's kinds for one item (the label page offers only
    those); submit refuses the others with the kinds it would take."""
    both = ["pairwise", "demonstration"]
    assert kind_refusal("pairwise", both, 2, declared=["pairwise"]) is None
    refused = kind_refusal("demonstration", both, 2, declared=["pairwise"])
    assert refused.status == 422 and "takes ['pairwise']" in refused.message
    assert refused.errors[0]["msg"].endswith("['pairwise']")
    assert kind_refusal("demonstration", both, 2, declared=None) is None


def test_rater_state_gate() -> None:
    assert rules.status_refusal("qualified", "") is None
    assert rules.status_refusal("qualifying", "") is None
    assert rules.status_refusal("suspended", "drift")["reason"] == "suspended"
    assert rules.status_refusal("failed", "")["reason"] == "not_qualified"


def test_domains_and_cap() -> None:
    policy = Policy(required_domains=["law", "med"], max_items_per_rater=3)
    assert rules.domain_refusal(policy, ["law"])["detail"].endswith("['med']")
    assert rules.domain_refusal(policy, ["law", "med", "x"]) is None
    assert rules.cap_refusal(policy, 2) is None
    assert rules.cap_refusal(policy, 3)["reason"] == "limit_reached"
    assert rules.cap_refusal(Policy(), 10**6) is None


def test_exact_k_room() -> None:
    assert rules.has_room(filled=1, live=0, target=2)
    assert not rules.has_room(filled=1, live=1, target=2)


def test_gold_rate_decides_the_roles_tried() -> None:
    rng = random.Random(7)
    tries = [rules.roles_to_try(Policy(gold_rate=0.25), rng) for _ in range(4000)]
    share = sum(t == ("gold", "production") for t in tries) / len(tries)
    assert 0.22 < share < 0.28
    assert rules.roles_to_try(Policy(gold_rate=0.0), rng) == ("production",)


def test_judgment_columns_are_assembled_in_one_place() -> None:
    cols = judgment_columns(1, 2, 3, {"kind": "pairwise", "score": -2})
    assert cols == {
        "project_pk": 1,
        "item_pk": 2,
        "rater_pk": 3,
        "batch_pk": None,
        "kind": "pairwise",
        "score": -2,
    }
