"""``preflab sample`` and ``preflab advise``: measure what the policy can do, decide the stage.

Thin: parse, call :mod:`.sampling` / :mod:`.advise`, print. Mounted by :mod:`preflab.cli`,
lazily (``LAZY_COMMANDS``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TimeElapsedColumn
from rich.table import Table

from ..cli_common import LineProgress

out = Console()
err = Console(stderr=True)


def _fail(message: str, code: int = 2) -> typer.Exit:
    err.print(message, style="red", markup=False, highlight=False, soft_wrap=True)
    return typer.Exit(code)


def sample_command(
    prompts: Annotated[
        Path,
        typer.Argument(
            exists=True, dir_okay=False, help="JSONL of {task_id, prompt, domain?, choices?}"
        ),
    ],
    n: Annotated[int, typer.Option("--n", min=1, help="Samples per prompt.")] = 8,
    out_path: Annotated[Path, typer.Option("--out", "-o", help="rollouts.jsonl to write.")] = Path(
        "rollouts.jsonl"
    ),
    endpoint: Annotated[
        str | None,
        typer.Option(help="OpenAI-compatible server, e.g. http://localhost:8000/v1."),
    ] = None,
    model: Annotated[str | None, typer.Option(help="Model name the endpoint serves.")] = None,
    local: Annotated[
        Path | None,
        typer.Option(help="Local transformers causal LM directory (instead of --endpoint)."),
    ] = None,
    temperature: Annotated[float, typer.Option(min=0.0, help="Sampling temperature.")] = 1.0,
    top_p: Annotated[float, typer.Option(min=0.0, max=1.0, help="Nucleus sampling.")] = 1.0,
    max_tokens: Annotated[int, typer.Option(min=1, help="Tokens per answer at most.")] = 512,
    seed: Annotated[int, typer.Option(help="Base seed; sample i uses seed + i.")] = 0,
    concurrency: Annotated[int, typer.Option(min=1, help="Requests in flight.")] = 8,
    retries: Annotated[
        int, typer.Option(min=0, help="Retries of a request (429/5xx/timeout).")
    ] = 5,
    backoff: Annotated[
        float, typer.Option(min=0.0, help="Base of the exponential backoff, seconds.")
    ] = 0.5,
    timeout: Annotated[float, typer.Option(min=0.1, help="Seconds per request.")] = 120.0,
    cache: Annotated[
        Path | None,
        typer.Option(help="Resumable sample cache (default: OUT + '.cache.jsonl')."),
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Draw every sample afresh.")] = False,
    api_key: Annotated[
        str | None, typer.Option(envvar="OPENAI_API_KEY", help="Bearer token for the endpoint.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the run's figures as JSON.")
    ] = False,
) -> None:
    """Sample N answers per prompt from an endpoint or a local model into rollouts.jsonl."""
    from .sampling import (
        RetryPolicy,
        SamplesFailed,
        SamplingError,
        SamplingParams,
        read_prompt_rows,
        sample,
        write_rows,
    )

    if local is not None:
        import os

        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    cache_path = None if no_cache else (cache or out_path.with_name(out_path.name + ".cache.jsonl"))
    try:
        rows_in = read_prompt_rows(prompts)
        progress = LineProgress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        )
        with progress:
            bar = progress.add_task("sampling", total=len(rows_in) * n)
            rows, stats = sample(
                rows_in,
                n,
                endpoint=endpoint,
                model=model,
                local=local,
                params=SamplingParams(temperature=temperature, top_p=top_p, max_tokens=max_tokens),
                seed=seed,
                cache_path=cache_path,
                concurrency=concurrency,
                retry=RetryPolicy(max_retries=retries, base_s=backoff, timeout_s=timeout),
                api_key=api_key,
                on_done=lambda k: progress.advance(bar, k),
            )
    except (SamplingError, OSError) as e:
        raise _fail(str(e), 1 if isinstance(e, SamplesFailed) else 2) from e
    write_rows(out_path, rows)
    figures = stats.as_dict()
    if as_json:
        print(json.dumps(figures, indent=2))
        return
    out.print(
        f"wrote {len(rows)} rollouts ({len(rows_in)} prompts x {n}) to {out_path}: "
        f"{stats.cached} from the cache, {stats.requests} requests ({stats.retries} retries), "
        f"{stats.prompt_tokens} prompt + {stats.completion_tokens} completion tokens drawn "
        f"in {stats.wall_s:.2f}s",
        highlight=False,
    )


def _overrides(values: list[str]) -> dict[str, Any]:
    out_values: dict[str, Any] = {}
    for item in values:
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--set {item!r}: expected NAME=VALUE, e.g. stop_sft_at=0.5")
        out_values[name.strip()] = json.loads(value)
    return out_values


def advise_command(
    report: Annotated[
        Path,
        typer.Argument(
            exists=True, dir_okay=False, help="pass@k report (`preflab verify rollouts --report`)"
        ),
    ],
    out_dir: Annotated[
        Path, typer.Option("--out", "-o", help="Directory for advice.json/html and prompt lists.")
    ] = Path("advice"),
    policy: Annotated[
        Path | None,
        typer.Option(
            exists=True, dir_okay=False, help="YAML/JSON policy whose `stages:` sets thresholds."
        ),
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Threshold NAME=VALUE (repeatable), e.g. stop_sft_at=0.5."),
    ] = None,
    group_size: Annotated[
        int | None, typer.Option(min=2, help="GRPO group size (default 8).")
    ] = None,
    create_project: Annotated[
        str | None,
        typer.Option(help="Create a demonstration project of this name with the SFT prompts."),
    ] = None,
    db: Annotated[
        str | None,
        typer.Option("--db", help="Database URL or SQLite path (with --create-project)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the advice as JSON.")] = False,
) -> None:
    """Decide each domain's stage from pass@k (cold start SFT, stop SFT, preference data,
    GRPO) and write the prompt lists: demonstrations, grpo, preference, drop."""
    from pydantic import ValidationError

    from .advise import advise, load_thresholds, write_advice

    try:
        overrides = _overrides(set_ or [])
        if group_size is not None:
            overrides["group_size"] = group_size
        thresholds = load_thresholds(policy, overrides)
        data = json.loads(report.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or "tasks" not in data:
            raise ValueError(f"{report}: not a pass@k report (no 'tasks'); run `verify rollouts`")
    except (ValidationError, ValueError, OSError) as e:
        raise _fail(str(e)) from e
    advice = advise(data, thresholds)
    if create_project:
        from .demo_project import create_demonstration_project

        try:
            created = create_demonstration_project(
                db, create_project, advice["lists"]["demonstrations"]
            )
        except ValueError as e:
            raise _fail(str(e)) from e
        advice["demonstration_project"] = created
    write_advice(advice, out_dir)
    if as_json:
        print(json.dumps(advice, indent=2, ensure_ascii=False))
        return
    table = Table(title="stage advice per domain")
    for column in ("domain", "tasks", "SFT", "preference data", "no GRPO/DPO prompts"):
        table.add_column(column)
    for name, d in advice["domains"].items():
        table.add_row(name, str(d["tasks"]), d["sft"], d["preference"], str(d["no_rl_prompts"]))
    out.print(table)
    counts = ", ".join(f"{k} {len(v)}" for k, v in advice["lists"].items())
    out.print(f"prompt lists ({counts}) and advice.json/html in {out_dir}", highlight=False)
    if advice.get("demonstration_project"):
        p = advice["demonstration_project"]
        out.print(f"created project {p['name']!r} with {p['items']} prompts", highlight=False)
