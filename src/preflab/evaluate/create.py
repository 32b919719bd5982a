"""``preflab eval create``: a blind side-by-side comparison project from two or more models' outputs.

For every pair of models and every prompt both answered, one pairwise item holds the two answers.
The answers' order in the item is drawn per item from ``random.Random(seed)`` (so the same inputs
and seed give the same project) and stored as the candidates' order; the assignment engine may
shuffle again per task (``policy.randomise_order``) and stores what each rater saw as
``shown_order``. Which model wrote which answer is kept on the candidate (``Candidate.model``),
which the rater's views never include (:meth:`preflab.schema.Item.public_view`); item ids are
content hashes, so they name no model either. Overlap, gold and qualification are the project
policy's business, as for any other project.

Domain tags of the outputs are topics for the report's per-domain breakdown
(``metadata.evaluation.domains``); with ``route_by_domain`` they become the items' ``domains``
instead, which the assignment engine uses to send items only to raters with verified credentials
in those domains (``policy.domain_match``).

Skipped, and counted in the summary: prompts only some models answered, and pairs whose two answers
are the same text (people cannot prefer one of two identical answers).
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from ..io.formats.evaluation import comparison_id
from ..schema import Item
from ..store import repo, transaction
from .outputs import ModelOutputs, answer_key

GUIDELINES = """# Which answer is better?

You see one prompt and two answers written by different AI systems. You are **not** told which
system wrote which answer, and the order on screen is random: judge the answers only.

Prefer the answer that is more helpful, correct and honest for the person who asked. Choose a tie
when neither is better; use the strength scale for how much better one is.
"""


@dataclass
class EvalPlan:
    """The items of an evaluation and what was left out, before anything is written."""

    items: list[Item] = field(default_factory=list)
    pairs: dict[str, dict[str, int]] = field(default_factory=dict)
    unmatched: dict[str, int] = field(default_factory=dict)
    first_shown: Counter[str] = field(default_factory=Counter)

    def summary(self) -> dict[str, Any]:
        return {
            "items": len(self.items),
            "pairs": self.pairs,
            "prompts_not_answered_by_every_model": self.unmatched,
            "first_in_stored_order": dict(self.first_shown),
        }


def _candidate(model: str, body: Any) -> dict[str, Any]:
    return {**({"text": body} if isinstance(body, str) else {"messages": body}), "model": model}


def plan_evaluation(
    models: list[ModelOutputs], *, seed: int = 0, route_by_domain: bool = False
) -> EvalPlan:
    """One item per model pair and shared prompt, in the files' order; see the module doc."""
    rng = random.Random(seed)
    plan = EvalPlan()
    every = set.intersection(*(set(m.answers) for m in models))
    plan.unmatched = {m.name: len(set(m.answers) - every) for m in models}
    # a prompt's topics are the same whichever two models answer it: the union over every file
    topics: dict[str, set[str]] = {}
    for m in models:
        for key, answer in m.answers.items():
            topics.setdefault(key, set()).update(answer.domains)
    for left, right in combinations(models, 2):
        counts = {"items": 0, "identical_skipped": 0, "prompts_in_one_only": 0}
        for key, a in left.answers.items():
            b = right.answers.get(key)
            if b is None:
                counts["prompts_in_one_only"] += 1
                continue
            if answer_key(a.response) == answer_key(b.response):
                counts["identical_skipped"] += 1
                continue
            sides = [(left.name, a), (right.name, b)]
            if rng.random() < 0.5:
                sides.reverse()
            plan.first_shown[sides[0][0]] += 1
            domains = sorted(topics[key])
            evaluation: dict[str, Any] = {"prompt_id": a.id or b.id} if (a.id or b.id) else {}
            if domains and not route_by_domain:
                evaluation["domains"] = domains
            # Two models may write the same answer: the item of (bloom, llama) must not clash with
            # the item of (opt, llama) on the same texts, so the models are part of the id (hashed:
            # the id names no model).
            item_id = comparison_id(a.prompt, [(name, r.response) for name, r in sides])
            plan.items.append(
                Item.model_validate(
                    {
                        "id": item_id,
                        "prompt": a.prompt,
                        "candidates": [_candidate(name, r.response) for name, r in sides],
                        "domains": domains if route_by_domain else [],
                        "metadata": {"evaluation": evaluation},
                    }
                )
            )
            counts["items"] += 1
        counts["prompts_in_one_only"] += len(set(right.answers) - set(left.answers))
        plan.pairs[f"{left.name} vs {right.name}"] = counts
    return plan


def settings_for(raters_per_item: int, guidelines: str = GUIDELINES) -> dict[str, Any]:
    """Project settings of an evaluation: k raters per item (overlap on every item when k >= 2)."""
    policy: dict[str, Any] = {"randomise_order": True}
    if raters_per_item >= 2:
        policy.update(overlap_share=1.0, overlap_k=raters_per_item)
    return {"version": 1, "guidelines": guidelines, "policy": policy}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def check_blind(project_name: str, title: str, names: list[str]) -> None:
    """Raters see the project's name and title: neither may name a model."""
    for label, text in (("project name", project_name), ("title", title)):
        # as a word (a model called "a" does not make "eval" a leak)
        named = [
            n
            for n in names
            if re.search(rf"(?<![a-z0-9]){re.escape(n.lower())}(?![a-z0-9])", text.lower())
        ]
        if named:
            raise ValueError(
                f"the {label} {text!r} names the model {named[0]!r}, and raters see it; "
                "choose a name and title that do not (e.g. 'eval-2026-11')"
            )


def create_evaluation(
    engine: Engine,
    project_name: str,
    models: list[ModelOutputs],
    *,
    seed: int = 0,
    raters_per_item: int = 1,
    title: str = "",
    route_by_domain: bool = False,
) -> dict[str, Any]:
    """Create the comparison project and its items in one transaction; returns a summary."""
    if raters_per_item < 1:
        raise ValueError(f"raters per item must be at least 1, got {raters_per_item}")
    title = title or f"Blind evaluation {project_name}"
    check_blind(project_name, title, [m.name for m in models])
    plan = plan_evaluation(models, seed=seed, route_by_domain=route_by_domain)
    if not plan.items:
        raise ValueError(
            "no prompt was answered differently by two models: nothing to compare "
            f"(per pair: {plan.pairs})"
        )
    with transaction(engine) as session:
        project = repo.create_project(
            session,
            project_name,
            title=title,
            kinds=["pairwise"],
            settings=settings_for(raters_per_item),
        )
        for item in plan.items:
            repo.add_item(session, project, item)
    return {
        "project": project_name,
        "seed": seed,
        "raters_per_item": raters_per_item,
        "route_by_domain": route_by_domain,
        "models": [
            {
                "name": m.name,
                "file": str(m.path),
                "sha256": _sha256(m.path),
                "answers": len(m.answers),
                "extra_answers_left_out": m.extra_answers,
            }
            for m in models
        ],
        **plan.summary(),
    }
