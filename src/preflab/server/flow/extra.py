"""More raters where they disagree (``Policy.adaptive_overlap``; issue 30 item 6), as a step of
the submit flow.

The flow's step is :func:`.lane.after_label`; the statements and decisions are here. When the
policy is on, a production submit stores its judgment inside a transaction
(:func:`.lane.run_submit` begins one), so this step runs under the locks the store took: on
PostgreSQL the pool row's (``guarded_store``'s ``FOR UPDATE``, held to the commit), on SQLite
the database's write lock (``BEGIN IMMEDIATE``). The item's labels are read then, and when the
k-th (or a later) person's label filled it and they disagree (:func:`preflab.quality.extra_raters
.disagreement`), one conditional ``UPDATE`` raises the target by one (``filled >= target AND
extra < max_extra`` in its ``WHERE``), so whatever the interleaving no item gets more than
``max_extra`` extra places; the assignment code (:func:`preflab.server.sql.pick`) then hands the
item to one more rater who never had it. Model judges' labels never count (as ``filled``, 0017).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ...quality.extra_raters import Label
from ...schema.policy import AdaptiveOverlap

#: The pool row as the rule reads it (under the lock the store took).
POOL_ROW = "SELECT target, filled, extra, extra_state FROM task_pool WHERE pk = {m}"

#: The labels that fill the item's places: ``filled``'s rule (``store.triggers``).
LABELS = (
    "SELECT kind, body, pair_lo, pair_hi, score FROM judgments WHERE item_pk = {m} "
    "AND review_pass = 0 AND supersedes_pk IS NULL AND excluded = false AND source <> 'ai' "
    "ORDER BY pk"
)

#: One more place, only while the item is full and the budget is not spent.
GRANT = (
    "UPDATE task_pool SET target = target + 1, extra = extra + 1, extra_state = 'waiting' "
    "WHERE pk = {m} AND filled >= target AND extra < {m}"
)

STATE = "UPDATE task_pool SET extra_state = {m} WHERE pk = {m}"


class Verdict(NamedTuple):
    """What the rule decides on a full overlap item: its new state and whether to grant."""

    state: str
    grant: bool


def needs_labels(target: int, filled: int, extra: int) -> bool:
    """The rule looks at an item only when it is an overlap item (k >= 2) that is full."""
    return target - extra >= 2 and filled >= target


def decide(extra: int, reasons: list[str], rule: AdaptiveOverlap) -> Verdict:
    """``agreed``; ``waiting`` with one more place while the budget lasts; else ``split``.

    >>> rule = AdaptiveOverlap(max_extra=1)
    >>> decide(0, ["split"], rule), decide(1, ["split"], rule), decide(1, [], rule)
    (Verdict(state='waiting', grant=True), Verdict(state='split', grant=False), \
Verdict(state='agreed', grant=False))
    """
    if not reasons:
        return Verdict("agreed", False)
    if extra < rule.max_extra:
        return Verdict("waiting", True)
    return Verdict("split", False)


def labels_of(rows: list[Any], load_json: Callable[[Any], Any]) -> list[Label]:
    """The :data:`LABELS` rows as the rule reads them (``load_json``: the executor's)."""
    return [Label(kind, load_json(body) or {}, lo, hi, score) for kind, body, lo, hi, score in rows]
