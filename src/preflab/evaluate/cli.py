"""``preflab eval create`` and ``preflab eval report``. Thin: parse, call :mod:`preflab.evaluate`, print.

``preflab/cli.py`` mounts :data:`eval_app` as ``eval``, lazily (``LAZY_COMMANDS``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from ..cli_common import DbOption, JsonOption, engine_for, err, fail, out, print_json

eval_app = typer.Typer(
    help="Blind side-by-side evaluation of model versions by people.", no_args_is_help=True
)


def _sources(
    model_a: Path | None, model_b: Path | None, models: list[str], mixed: int = 0
) -> list[tuple[str | None, Path]]:
    sources: list[tuple[str | None, Path]] = [
        (None, p) for p in (model_a, model_b) if p is not None
    ]
    for spec in models:
        name, sep, path = spec.partition("=")
        if not sep or not name.strip() or not path:
            fail(f"--model {spec!r}: expected NAME=FILE, e.g. --model v3=rollouts-v3.jsonl", 2)
        if not Path(path).is_file():
            fail(f"--model {spec!r}: no file {path}", 2)
        sources.append((name.strip(), Path(path)))
    if len(sources) < 2 and not mixed:
        fail(
            "an evaluation needs the outputs of at least two models: --model-a FILE --model-b FILE "
            "(or --model NAME=FILE, repeated; or --outputs FILE with several models)",
            2,
        )
    return sources


@eval_app.command("create")
def create(
    project: str,
    model_a: Annotated[
        Path | None,
        typer.Option(
            "--model-a",
            help="Model A's outputs (rollouts.jsonl shape: prompt, response, model?).",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    model_b: Annotated[
        Path | None,
        typer.Option("--model-b", help="Model B's outputs.", exists=True, dir_okay=False),
    ] = None,
    models: Annotated[
        list[str] | None,
        typer.Option("--model", help="NAME=FILE: another model's outputs (repeatable)."),
    ] = None,
    mixed: Annotated[
        list[Path] | None,
        typer.Option(
            "--outputs",
            help="A file with several models' outputs, split "
            "by each row's 'model' (e.g. `export -f rollouts`; repeatable).",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    first_answer: Annotated[
        bool,
        typer.Option(
            help="A model with several answers to a prompt: use the first (default: an error)."
        ),
    ] = False,
    seed: Annotated[int, typer.Option(help="Seed of the per-item answer order.")] = 0,
    raters_per_item: Annotated[
        int, typer.Option(help="People per item (>= 2: every item overlapped).")
    ] = 1,
    title: Annotated[str, typer.Option(help="Title raters see (name no model here).")] = "",
    route_by_domain: Annotated[
        bool,
        typer.Option(
            help="Make the outputs' domain tags item domains: only raters "
            "verified in them get the item (default: tags for the report)."
        ),
    ] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """A comparison project from two or more models' outputs on the same prompts; raters never see
    which model wrote which answer. Then add raters (`preflab serve`) and label as usual."""
    from ..store.repo import StoreError
    from .create import create_evaluation
    from .outputs import OutputsInvalid, read_all_outputs

    sources = _sources(model_a, model_b, models or [], len(mixed or []))
    if raters_per_item < 1 or raters_per_item > 50:
        fail(f"--raters-per-item {raters_per_item}: choose 1 to 50", 2)
    try:
        outputs = read_all_outputs(sources, mixed or [], first_answer=first_answer)
        summary = create_evaluation(
            engine_for(db),
            project,
            outputs,
            seed=seed,
            raters_per_item=raters_per_item,
            title=title,
            route_by_domain=route_by_domain,
        )
    except OutputsInvalid as exc:
        for p in exc.problems[:50]:
            err.print(str(p), highlight=False, markup=False, soft_wrap=True)
        fail(
            f"{len(exc.problems)} problem(s) in the model outputs; nothing was created. Fix the lines above "
            "(`preflab validate FILE` checks a file alone).",
            2,
        )
    except (StoreError, ValueError) as exc:
        fail(str(exc), 2)
    if as_json:
        print_json(summary)
        return
    out.print(
        f"created evaluation [bold]{project}[/]: {summary['items']} items from "
        f"{', '.join(m['name'] for m in summary['models'])} (seed {seed})",
        highlight=False,
    )
    for pair, counts in summary["pairs"].items():
        out.print(
            f"  {pair}: {counts['items']} items, {counts['identical_skipped']} identical answers skipped, "
            f"{counts['prompts_in_one_only']} prompts answered by one model only",
            highlight=False,
            markup=False,
        )


@eval_app.command("report")
def report(
    project: str,
    out_path: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write a self-contained HTML report here.")
    ] = None,
    human_eval: Annotated[
        Path | None,
        typer.Option("--human-eval", help="Write every verdict as human_eval.jsonl here."),
    ] = None,
    rm_scores: Annotated[
        Path | None,
        typer.Option(
            "--rm-scores",
            help="Reward-model scores of the same answers "
            "(rollouts.jsonl from `preflab rm score`).",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    bootstrap: Annotated[
        int, typer.Option(help="Bootstrap samples for the rating intervals (0: none).")
    ] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 0,
    include_ai: Annotated[bool, typer.Option(help="Count AI-sourced verdicts too.")] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Win/tie/loss per model pair (Wilson CIs), Arena ratings (bootstrap CIs), per domain, and the
    reward model against people."""
    from ..store.repo import StoreError
    from .outputs import OutputsInvalid
    from .report import (
        RATING_HEADER,
        build_report,
        load_verdicts,
        rating_rows,
        read_rm_scores,
        render_html,
        write_human_eval,
    )

    if bootstrap < 0:
        fail("--bootstrap must be 0 or more", 2)
    try:
        scores = read_rm_scores(rm_scores) if rm_scores is not None else None
        data = load_verdicts(engine_for(db), project, include_ai=include_ai)
    except OutputsInvalid as exc:
        for p in exc.problems[:50]:
            err.print(str(p), highlight=False, markup=False, soft_wrap=True)
        fail(f"{len(exc.problems)} problem(s) in --rm-scores {rm_scores}", 2)
    except StoreError as exc:
        fail(str(exc), 2)
    result = build_report(data, rm_scores=scores, rounds=bootstrap, seed=seed)
    if out_path is not None:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(render_html(result), encoding="utf-8")
        err.print(f"wrote {out_path}", highlight=False)
    if human_eval is not None:
        n = write_human_eval(data, human_eval)
        err.print(f"wrote {n} verdicts to {human_eval}", highlight=False)
    if as_json:
        print_json(result)
        return
    if not result["battles"]:
        out.print(f"{project}: no verdicts on model pairs yet", highlight=False)
        return
    table = Table(
        *RATING_HEADER,
        title=f"{project}: {result['battles']} battles, {result['raters']} raters",
        title_justify="left",
    )
    for row in rating_rows(result["ratings"]):
        table.add_row(*map(str, row))
    out.print(table)
    rm = result.get("rm_agreement")
    if rm and rm["agreement"] is not None:
        low, high = rm["agreement_ci"]
        out.print(
            f"reward model agrees with people on {rm['agree']}/{rm['decided']} decided battles: "
            f"{rm['agreement']:.1%} [{low:.1%}, {high:.1%}]",
            highlight=False,
        )
