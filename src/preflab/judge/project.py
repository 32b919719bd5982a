"""A project's side of a judge run: which items a template can label, which labels the judge
already stored (so a rerun skips them even without the reply cache), storing the new ones through
the store layer (``repo.add_judgment``, as every other writer), and reading a project for the
audit."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine

from ..io.quality_source import judge_section
from ..schema import (
    CriteriaSet,
    Item,
    JudgmentBase,
    StepsJudgment,
    approved_criteria,
    kinds_for_item,
)
from ..schema.policy import stored_policy
from ..store import JudgmentRow, Rater, repo, transaction
from .runner import JudgeConfig, JudgeStats, Outcome, judge_rater, plan_tasks, run_tasks


class JudgeRunError(ValueError):
    """A run that cannot start (a project that does not collect the kind ...), in words."""


def _fits(item: Item, kinds: list[str], kind: str) -> bool:
    declared = item.metadata.get("kinds")
    return kind in kinds_for_item(
        kinds, len(item.candidates), declared if isinstance(declared, list) else None
    )


def step_split(item: Item, judgments: Sequence[JudgmentBase]) -> list[str] | None:
    """The steps a judge checks: the answer's ``metadata.steps`` (a list of texts), else the
    split a person's steps label of it recorded (so the judge's step units are the people's),
    else ``None`` (the item is skipped and counted: the web page's split lives with the server)."""
    (candidate,) = item.candidates
    declared = candidate.metadata.get("steps")
    if isinstance(declared, list) and declared and all(isinstance(s, str) for s in declared):
        return list(declared)
    for j in reversed(judgments):
        if isinstance(j, StepsJudgment) and j.candidate_id == candidate.id:
            return list(j.steps)
    return None


def judge_project(
    engine: Engine,
    project_name: str,
    config: JudgeConfig,
    *,
    cache_path: Path | None,
    limit: int | None = None,
    on_total: Callable[[int], None] | None = None,
    on_done: Callable[[int], None] | None = None,
) -> tuple[list[Outcome], JudgeStats]:
    """Label the project's items that fit the template's kind; store labels in one transaction."""
    kind = config.template.kind
    stats = JudgeStats()
    with transaction(engine) as session:
        project = repo.get_project(session, project_name)
        if kind not in project.kinds:
            raise JudgeRunError(
                f"project {project_name!r} collects {project.kinds}, not {kind!r}: pick a "
                f"template of one of those kinds (preflab judge templates)"
            )
        categories = stored_policy(project.settings).span_categories
        dimensions: list[Any] = []
        rubric_ref = None
        if kind == "rubric":
            rubric = repo.get_rubric(session, project)
            if rubric is None:
                raise JudgeRunError(
                    f"project {project_name!r} has no rubric: a rubric template grades its "
                    "dimensions (preflab rubric add)"
                )
            dimensions, rubric_ref = list(rubric.dimensions), (rubric.id, rubric.version)
        items = []
        splits: dict[str, list[str]] = {}
        criteria: dict[str, CriteriaSet] = {}
        for record in repo.iter_items_with_judgments(session, project):
            if not _fits(record.item, project.kinds, kind):
                continue
            if kind == "steps":
                split = step_split(record.item, record.judgments)
                if split is None:
                    stats.no_steps += 1
                    continue
                splits[str(record.item.id)] = split
            if kind == "criteria":  # only approved criteria are graded
                cset = approved_criteria(record.item.metadata)
                if cset is None:
                    stats.no_criteria += 1
                    continue
                criteria[str(record.item.id)] = cset
            items.append(record.item)
            if limit is not None and len(items) >= limit:
                break
        stored = set(
            session.scalars(
                select(JudgmentRow.idempotency_key)
                .join(Rater, Rater.pk == JudgmentRow.rater_pk)
                .where(
                    JudgmentRow.project_pk == project.pk,
                    Rater.rater_key == judge_rater(config.model),
                    JudgmentRow.idempotency_key.is_not(None),
                )
            )
        )
    tasks = plan_tasks(
        items,
        config,
        dimensions=dimensions,
        rubric=rubric_ref,
        steps=splits,
        criteria=criteria,
        span_categories=categories,
    )
    stats.tasks = len(tasks)
    todo = [t for t in tasks if t.idempotency_key not in stored]
    stats.already_stored = len(tasks) - len(todo)
    if on_total:
        on_total(len({a.key for t in todo for a in t.asks}))
    outcomes, stats = run_tasks(todo, config, cache_path=cache_path, stats=stats, on_done=on_done)
    with transaction(engine) as session:
        project = repo.get_project(session, project_name)
        for outcome in outcomes:
            if outcome.judgment is not None:
                repo.add_judgment(
                    session, project, outcome.judgment, exclusion_reason=outcome.exclusion_reason
                )
    return outcomes, stats


def audit_project(
    engine: Engine,
    project_name: str,
    *,
    families: dict[str, str] | None = None,
    n_boot: int = 1000,
) -> dict[str, Any]:
    """``preflab judge audit``: the quality report's ``judges`` section, alone."""
    with transaction(engine) as session:
        project = repo.get_project(session, project_name)
        return judge_section(session, project, families=families, n_boot=n_boot)
