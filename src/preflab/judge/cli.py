"""``preflab judge run``, ``preflab judge audit``, ``preflab judge templates``. Thin: parse, call
:mod:`preflab.judge`, print. ``preflab/cli.py`` mounts :data:`judge_app` as ``judge``,
lazily (``LAZY_COMMANDS``: imported when it runs).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, TimeElapsedColumn
from rich.table import Table

from ..cli_common import DbOption, JsonOption, LineProgress, engine_for, err, fail, out, print_json
from ..quality.family import parse_family_options

judge_app = typer.Typer(
    help="Label a project with a model judge (source: ai) and audit it against the people.",
    no_args_is_help=True,
)


def default_cache(project: str, model: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{project}.{model}")
    return Path(".preflab-judge") / f"{slug}.jsonl"


@judge_app.command("run")
def run(
    project: str,
    endpoint: Annotated[
        str,
        typer.Option(
            help="OpenAI-compatible server: http://host:8000/v1 (vLLM, SGLang, TGI, Ollama, "
            "llama.cpp, hosted APIs)."
        ),
    ],
    model: Annotated[str, typer.Option(help="The model the server serves (the judge).")],
    template: Annotated[
        str,
        typer.Option(
            help="pairwise, rubric, unary, steps, criteria (newest version), NAME@VERSION, or a template JSON file "
            "(`preflab judge templates`)."
        ),
    ] = "pairwise",
    concurrency: Annotated[int, typer.Option(min=1, max=256, help="Requests in flight.")] = 8,
    retries: Annotated[
        int, typer.Option(min=0, max=20, help="Retries of a request on 429, 5xx, timeouts.")
    ] = 5,
    parse_retries: Annotated[
        int, typer.Option(min=0, max=10, help="Asks again after a malformed reply.")
    ] = 2,
    timeout: Annotated[float, typer.Option(min=1, help="Seconds a request may take.")] = 120.0,
    temperature: Annotated[float, typer.Option(min=0, max=2)] = 0.0,
    max_tokens: Annotated[int, typer.Option(min=16, help="Tokens a reply may take.")] = 512,
    json_mode: Annotated[
        bool,
        typer.Option(help='Send response_format {"type": "json_object"} (if the server has it).'),
    ] = False,
    limit: Annotated[int | None, typer.Option(min=1, help="Label the first N items only.")] = None,
    cache: Annotated[
        Path | None,
        typer.Option(help="Reply cache (JSONL); default .preflab-judge/PROJECT.MODEL.jsonl."),
    ] = None,
    no_cache: Annotated[bool, typer.Option(help="Keep no reply cache.")] = False,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Label PROJECT's items with a model judge. Labels are stored `source: ai` (rater
    `judge:MODEL`) with the model, template and endpoint in their provenance; pairs are asked in
    both orders and an order-inconsistent verdict is stored excluded (never a preference). A
    rerun asks only what is missing. The API key, if any, is read from PREFLAB_JUDGE_API_KEY."""
    from ..store.repo import NotFound
    from ..train.sampling import RetryPolicy
    from .project import JudgeRunError, judge_project
    from .runner import JudgeConfig
    from .templates import TemplateError, load_template

    try:
        tmpl = load_template(template)
    except TemplateError as e:
        fail(str(e), 2)
    config = JudgeConfig(
        endpoint=endpoint,
        model=model,
        template=tmpl,
        concurrency=concurrency,
        parse_retries=parse_retries,
        temperature=temperature,
        max_tokens=max_tokens,
        json_mode=json_mode,
        api_key=os.environ.get("PREFLAB_JUDGE_API_KEY") or None,
        retry=RetryPolicy(max_retries=retries, timeout_s=timeout),
    )
    cache_path = None if no_cache else (cache or default_cache(project, model))
    engine = engine_for(db)
    progress = LineProgress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=as_json,
    )
    try:
        with progress:
            bar = progress.add_task("asking", total=None)
            _, stats = judge_project(
                engine,
                project,
                config,
                cache_path=cache_path,
                limit=limit,
                on_total=lambda n: progress.update(bar, total=n),
                on_done=lambda n: progress.advance(bar, n),
            )
    except NotFound as e:
        fail(str(e), 2)
    except JudgeRunError as e:
        fail(str(e), 2)
    finally:
        engine.dispose()
    summary = {"template": tmpl.label, "model": model, "endpoint": endpoint, **stats.as_dict()}
    if as_json:
        print_json(summary)
    else:
        out.print(
            f"judge {model} ({tmpl.label}) on [bold]{project}[/]: {stats.labels} labels, "
            f"{stats.order_inconsistent} order-inconsistent (stored excluded), {stats.failed} "
            f"failed, {stats.already_stored} already stored; {stats.requests} requests "
            f"({stats.retries} retries, {stats.malformed} malformed replies, "
            f"{stats.cached_replies} replies from the cache); tokens: {stats.prompt_tokens} "
            f"prompt + {stats.completion_tokens} completion = "
            f"{stats.prompt_tokens + stats.completion_tokens}",
            highlight=False,
        )
        if stats.no_steps:
            err.print(
                f"{stats.no_steps} steps item(s) skipped: no step split (give the answer "
                "metadata.steps, or label it once on the web page)",
                highlight=False,
            )
        if stats.no_criteria:
            err.print(
                f"{stats.no_criteria} item(s) skipped: no approved criteria (preflab criteria "
                "add / approve)",
                highlight=False,
            )
        for line in stats.failures[:10]:
            err.print(f"failed: {line}", markup=False, highlight=False, soft_wrap=True)
    if stats.failed:
        fail(
            f"{stats.failed} of {stats.tasks} labels failed (reasons above); the others are "
            "stored; run again to retry the failed ones"
        )


def _fmt(x: Any) -> str:
    if x is None:
        return "–"
    if isinstance(x, float):
        return f"{x:.3f}"
    return str(x)


def _ci(d: dict[str, Any] | None, key: str = "alpha") -> str:
    if not d:
        return "–"
    return f"{_fmt(d.get(key))} [{_fmt(d.get('low'))}, {_fmt(d.get('high'))}]"


@judge_app.command("audit")
def audit(
    project: str,
    family: Annotated[
        list[str] | None,
        typer.Option(
            "--family",
            help="PREFIX=FAMILY: models whose name starts with PREFIX are of FAMILY (repeatable; "
            "default: the name's leading letters after the last '/').",
        ),
    ] = None,
    n_boot: Annotated[int, typer.Option(min=0, help="Bootstrap replicates of the CIs.")] = 1000,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Audit PROJECT's model judges against its people: agreement per dimension (with the
    human-human ceiling), position consistency, length bias and self-preference
    (docs/judges.md)."""
    from ..store.repo import NotFound
    from .project import audit_project

    try:
        families = parse_family_options(family or [])
    except ValueError as e:
        fail(str(e), 2)
    engine = engine_for(db)
    try:
        result = audit_project(engine, project, families=families, n_boot=n_boot)
    except NotFound as e:
        fail(str(e), 2)
    finally:
        engine.dispose()
    if as_json:
        print_json(result)
        return
    if not result["judges"]:
        out.print(f"project {project!r} has no judge labels (preflab judge run)")
        return
    for j in result["judges"]:
        out.print(
            f"[bold]{j['judge']}[/] (family {j['family']}): {j['labels']} labels, "
            f"{j['order_inconsistent']} order-inconsistent",
            highlight=False,
        )
        table = Table("kind", "dimension", "units", "judge-human α [CI]", "human-human α [CI]")
        for row in j["agreement"]:
            table.add_row(
                row["kind"],
                row["dimension"],
                str(row["n_units"]),
                _ci(row["judge_human"]),
                _ci(row["human_human"]),
            )
        out.print(table)
        pos = j["position_consistency"]
        if pos:
            out.print(
                f"position consistency: {pos['consistent']}/{pos['pairs']} = "
                f"{_fmt(pos['share_consistent'])}; first shown chosen "
                f"{_fmt(pos['first_shown_share'])}",
                highlight=False,
            )
        lb, lh = j["length_bias"], j["length_bias_humans_same_pairs"]
        if lb:
            out.print(
                f"length bias: judge chose the longer answer in "
                f"{_fmt(lb.get('share_chosen_longer'))} of {lb.get('n_differ')} pairs; people on "
                f"the same pairs {_fmt((lh or {}).get('share_chosen_longer'))}",
                highlight=False,
            )
        sp = j["self_preference"]
        if sp and sp.get("pairs"):
            out.print(
                f"self-preference ({sp['family']}): judge {_fmt(sp['judge_own_share'])} vs people "
                f"{_fmt(sp['human_own_share'])} on {sp['pairs']} pairs: "
                f"delta {_ci(sp, 'delta')}",
                highlight=False,
            )


@judge_app.command("templates")
def templates(as_json: JsonOption = False) -> None:
    """The prompt templates shipped with preflab, with their versions."""
    from .templates import shipped

    rows = shipped()
    if as_json:
        print_json(
            [
                {"name": t.name, "version": t.version, "kind": t.kind, "description": t.description}
                for t in rows
            ]
        )
        return
    table = Table("template", "kind", "description")
    for t in rows:
        table.add_row(t.label, t.kind, t.description)
    out.print(table)
