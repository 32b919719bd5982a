"""``preflab verify steps PROJECT``: Monte Carlo checks of a project's step labels
(:mod:`.mc_steps`); the estimates beside the human labels, agreement figures, and disagreements
sent to the review queue with their evidence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from ..cli_common import engine_for
from .mc_steps import StepCheck, StepUnit, agreement, check_steps, endpoint_sampler, evidence_note

console = Console()
err = Console(stderr=True)


def project_units(engine, project_name: str) -> tuple[list[StepUnit], list[str]]:
    """Every counting ``steps`` judgment of the project as a :class:`StepUnit`; the task is the
    item's verifier task (:func:`.items.item_task`: ``metadata.verify_task``, or a math item's
    reference) or, for an item not marked verifiable, its ``reference`` as a math answer. Items
    without either are listed in the second value and not checked."""
    from preflab.schema import StepsJudgment, prompt_as_text
    from preflab.store import repo, transaction

    from .items import item_task
    from .tasks import MathTask

    units: list[StepUnit] = []
    skipped: list[str] = []
    with transaction(engine) as session:
        project = repo.get_project(session, project_name)
        for entry in repo.iter_items_with_judgments(session, project):
            item = entry.item
            labels = [
                (j, m) for j, m in zip(entry.judgments, entry.meta, strict=True)
                if isinstance(j, StepsJudgment)
            ]  # fmt: skip
            if not labels:
                continue
            task = item_task(item)
            if task is None and item.reference:
                task = MathTask(task_id=item.id or "", kind="math", answer=item.reference)
            if task is None:
                skipped.append(
                    f"{item.id}: no task to verify answers with (metadata.verify_task or a "
                    "reference answer)"
                )
                continue
            prompt = prompt_as_text(item.prompt)
            for j, meta in labels:
                units.append(
                    StepUnit(
                        item_id=item.id or "",
                        candidate_id=j.candidate_id,
                        prompt=prompt,
                        steps=list(j.steps),
                        verdicts=list(j.verdicts),
                        task=task,
                        judgment_id=meta.get("pk"),
                        rater=j.provenance.rater_id,
                    )
                )
    return units, skipped


def send_back(engine, project_name: str, checks: list[StepCheck], threshold: float) -> dict:
    """One review request per disagreeing judgment (every disagreeing step's evidence in its
    note), created as a reviewer's send-back is (:func:`preflab.server.services.revisions.send_back`) with
    no reviewer: the label goes back to its rater, the item page shows the note, and the item is
    in the adjudication queue with the note's first line as its reason. A judgment already
    waiting for a revision, or revised since, is left as it is (counted)."""
    from preflab.server.errors import ServiceError
    from preflab.server.services.revisions import send_back as create
    from preflab.store import repo, transaction

    notes: dict[int, list[str]] = {}
    for c in checks:
        if c.disagree and c.judgment_id is not None:
            notes.setdefault(c.judgment_id, []).append(evidence_note(c, threshold))
    sent, skipped = [], []
    with transaction(engine) as session:
        project = repo.get_project(session, project_name)
        for judgment_pk, parts in notes.items():
            try:
                with session.begin_nested():
                    req = create(session, project.pk, judgment_pk, None, "\n\n".join(parts))  # type: ignore[arg-type]
                sent.append({"judgment_id": judgment_pk, "request_id": req.pk})
            except ServiceError as e:
                skipped.append({"judgment_id": judgment_pk, "why": e.message})
    return {"sent": sent, "skipped": skipped}


def render_html(report: dict[str, Any], checks: list[StepCheck]) -> str:
    from preflab.quality.html_parts import escape, html_page, html_table

    a = report["agreement"]
    body = [
        f"<p>{a['steps_checked']} labelled steps of {a['solutions']} step-labelled solutions; "
        f"{report['n']} rollouts from each step's prefix, verified by the task's verifier. The "
        "Monte Carlo estimate of a step is the share of its rollouts reaching a correct answer "
        "(Math-Shepherd's soft estimate). Compared with the human verdict (+1 → 1, −1 → 0; "
        f"neutral steps not compared): a disagreement is a gap above {a['threshold']}; agreement "
        f"and κ binarise the estimate at {a['sound_at']}.</p>",
        "<p>A weak policy fails from sound prefixes and a strong one recovers from wrong steps; "
        "N rollouts carry binomial noise. A disagreement asks a person to look.</p>",
        "<h2>Agreement</h2>",
        html_table(
            ["steps compared", "neutral", "agreement", "Cohen's κ", "disagreements"],
            [[a["compared"], a["neutral"], a["agreement"], a["kappa"], a["disagreements"]]],
        ),
        html_table(["human / Monte Carlo", "count"], [[k, v] for k, v in a["confusion"].items()]),
        html_table(
            ["human verdict", "steps", "mean estimate"],
            [[k, v["steps"], v["mean_estimate"]] for k, v in a["by_human_verdict"].items()],
        ),
        "<h2>Disagreements</h2>",
        html_table(
            ["item", "candidate", "judgment", "step", "human", "estimate", "rollouts", "evidence"],
            [
                [
                    c.item_id,
                    c.candidate_id,
                    c.judgment_id,
                    c.step,
                    c.human_verdict,
                    c.mc_estimate,
                    f"{c.mc_correct}/{c.mc_n}",
                    " | ".join(c.evidence),
                ]
                for c in checks
                if c.disagree
            ],
        ),
    ]
    if report.get("review"):
        r = report["review"]
        body.append(
            f"<p>Sent to review: {len(r['sent'])} judgments; left as they were: "
            f"{escape(len(r['skipped']))}.</p>"
        )
    return html_page("preflab Monte Carlo check of step labels", body)


def steps_command(
    project: str = typer.Argument(..., help="project name"),
    db: str | None = typer.Option(
        None, "--db", help="Database URL or SQLite path (env var PREFLAB_DB; default ./preflab.db)."
    ),
    n: int = typer.Option(8, "--n", min=1, help="Rollouts from each step's prefix."),
    endpoint: str | None = typer.Option(None, help="OpenAI-compatible server of the policy."),
    model: str | None = typer.Option(None, help="The model the server serves."),
    local: Path | None = typer.Option(None, help="A local transformers model directory instead."),
    threshold: float = typer.Option(
        0.5, min=0.0, max=1.0, help="Report a step when |human score - estimate| exceeds this."
    ),
    out_dir: Path = typer.Option(Path("mc-steps"), "--out", "-o", help="Directory for the report."),
    review: bool = typer.Option(
        False,
        "--send-back",
        help="Send each disagreeing label to the review queue with its evidence.",
    ),
    temperature: float = typer.Option(1.0, help="Sampling temperature."),
    max_tokens: int = typer.Option(512, help="Tokens per rollout."),
    seed: int = typer.Option(0, help="Base seed (sample i: seed + i)."),
    concurrency: int = typer.Option(8, min=1, help="Requests in flight."),
    workers: int = typer.Option(1, "--workers", "-w", min=1, help="Verifier processes."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Monte Carlo check of step labels: rollouts from each labelled step's prefix, verified, the
    share reaching a correct answer compared with the human verdict (agreement, κ,
    disagreements; estimates in mc_steps.jsonl beside the labels)."""
    from preflab.store.repo import NotFound
    from preflab.train.sampling import SamplingError, SamplingParams

    engine = engine_for(db)
    try:
        units, skipped = project_units(engine, project)
    except NotFound as e:
        err.print(str(e), style="red", markup=False, highlight=False)
        raise typer.Exit(2) from e
    for line in skipped:
        err.print(f"not checked: {line}", markup=False, highlight=False)
    if not units:
        err.print(f"project {project!r} has no step labels to check", style="red")
        raise typer.Exit(2)
    out_dir.mkdir(parents=True, exist_ok=True)
    sampler = endpoint_sampler(
        endpoint=endpoint,
        model=model,
        local=local,
        params=SamplingParams(temperature=temperature, max_tokens=max_tokens),
        seed=seed,
        cache_path=out_dir / "rollouts.cache.jsonl",
        concurrency=concurrency,
    )
    try:
        checks = check_steps(units, n, sampler, threshold=threshold, workers=workers)
    except SamplingError as e:
        err.print(str(e), style="red", markup=False, highlight=False)
        raise typer.Exit(1 if "failed" in str(e) else 2) from e
    report: dict[str, Any] = {
        "project": project,
        "n": n,
        "model": model or (str(local) if local else None),
        "agreement": agreement(checks, threshold=threshold),
        "not_checked": skipped,
        "disagreements": [c.row() for c in checks if c.disagree],
    }
    if review:
        report["review"] = send_back(engine, project, checks, threshold)
    with open(out_dir / "mc_steps.jsonl", "w", encoding="utf-8") as f:
        for c in checks:
            f.write(json.dumps(c.row(), ensure_ascii=False) + "\n")
    (out_dir / "mc_report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (out_dir / "mc_report.html").write_text(render_html(report, checks), encoding="utf-8")
    if as_json:
        print(json.dumps(report, indent=2))
        return
    a = report["agreement"]
    kappa = "n/a" if a["kappa"] is None else f"{a['kappa']:.3f}"
    agree = "n/a" if a["agreement"] is None else f"{a['agreement']:.3f}"
    console.print(
        f"{a['steps_checked']} steps of {a['solutions']} solutions checked ({n} rollouts each): "
        f"agreement {agree}, κ {kappa}, {a['disagreements']} disagreements"
        + (f", {len(report['review']['sent'])} sent to review" if review else "")
        + f"; {out_dir / 'mc_steps.jsonl'}, mc_report.json, mc_report.html",
        highlight=False,
        markup=False,
    )
