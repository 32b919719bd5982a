"""Reward-model benchmark: ``rm train`` speed against TRL called directly, and held-out accuracy.

    python benchmarks/bench_rm.py --data-dir DIR                     # small CPU run (defaults below)
    python benchmarks/bench_rm.py --data-dir DIR --skip-accuracy --speed-pairs 256 --repeats 5
    python benchmarks/bench_rm.py --data-dir DIR --skip-speed --accuracy-pairs 0 \
        --variants plain,length_balance,length_parity --seeds 0,1,2 --max-length 256 --epochs 3

What is measured:

1. **speed** (``--speed-pairs`` hh-rlhf harmless pairs that fit ``--max-length`` tokens, so
   neither side truncates or drops and both train on the same pairs): wall time and peak RSS of
   (a) ``train_reward_model`` (preflab's ``rm train``: split, tokenize with truncation, TRL
   ``RewardTrainer``, save model, split and card) and (b) TRL's ``RewardTrainer`` called directly
   on the raw ``prompt/chosen/rejected`` text of the same training pairs with the same
   ``RewardConfig``, then ``save_model``. Each run is a fresh process (peak RSS is that
   process's ``ru_maxrss``). Target: preflab pairs/s >= 0.95x TRL's. ``--repeats`` alternating
   runs per side (preflab first, then TRL first, ...); the ratio is of the medians, and the time
   each side spends outside ``trainer.train()`` (load, tokenize, save) is printed apart, since
   that is the only place the two can differ: the training steps see the same number of tokens.
   ``--threads`` (default 1) sets torch's threads in both alike.
   TRL needs an EOS token it can append as text; BERT-style tokenizers have none, so the
   direct run sets ``eos_token=[SEP]`` (preflab tokenizes itself and needs no such setting).
   Also printed: the share of the sampled hh-rlhf pairs that TRL's ``max_length`` filter drops.
2. **accuracy** (``--accuracy-pairs`` per data set, 0 for all): hh-rlhf harmless (one label
   per pair; the prompt is the conversation up to the final ``Assistant:`` turn) and PandaLM
   (majority of the 3 annotators; ties and no-majority items skipped). Each of ``--variants``
   (``plain``: no length remedy; ``length_balance``; ``length_parity``; ``default``: what
   ``rm train`` does with no options; ``warmup``, ``mean`` (``--pooling mean``), ``prompt64``
   (``--max-prompt-length 64``): one option each on top of the default) for each of
   ``--seeds`` (the seed of the split by prompt and of training), and each of
   ``--train-shares`` (a learning curve: that share of the training prompts, the held-out
   split unchanged); ``rm eval``'s baselines fitted on the same split, and the reward model
   against each of them pair by pair (exact McNemar), per run and pooled. Printed per run:
   accuracy with its 95 % Wilson CI, accuracy when the chosen answer is longer / shorter and
   the gap between the two (the length bias). Reference figures from issue 12 (full data,
   split **by item**, so the same prompt and often the same answer text is on both sides):
   hh-rlhf longer-wins 0.437, shorter-wins 0.558, TF-IDF+LR 0.628, fine-tuned MiniLM 0.606
   (0.36 chosen longer / 0.80 chosen shorter); PandaLM longer-wins 0.665, TF-IDF+LR 0.866,
   fine-tuned MiniLM 0.860.

Data: ``--data-dir`` (default ``../shared/data`` beside the checkout); a clear message and exit
status 2 when the files are absent.
"""

from __future__ import annotations

import argparse
import gzip
import json
import multiprocessing as mp
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from preflab.train.data import Pair, PairSource

HH_FILE = "hh-rlhf-harmless-base-test.jsonl.gz"
PANDALM_FILE = "pandalm-testset-v1.json"
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
ASSISTANT = "\n\nAssistant:"


def hh_pairs(path: Path) -> list[Pair]:
    """hh-rlhf rows as (conversation so far, final chosen reply, final rejected reply)."""
    pairs = []
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            c, r = row["chosen"], row["rejected"]
            ic, ir = c.rfind(ASSISTANT), r.rfind(ASSISTANT)
            if ic < 0 or c[:ic] != r[:ir]:
                continue  # the two conversations differ before the last reply
            cut = ic + len(ASSISTANT)
            pairs.append(
                Pair(
                    c[:cut].strip(),
                    c[cut:].strip(),
                    r[ir + len(ASSISTANT) :].strip(),
                    domain="harmless",
                )
            )
    return pairs


def pandalm_pairs(path: Path) -> list[Pair]:
    """PandaLM items with a non-tie majority of the 3 annotators (1: response1, 2: response2)."""
    pairs = []
    for row in json.loads(path.read_text()):
        if not (isinstance(row["response1"], str) and isinstance(row["response2"], str)):
            continue  # 6 responses are JSON booleans
        votes = Counter(row[f"annotator{k}"] for k in (1, 2, 3))
        label, count = votes.most_common(1)[0]
        if count < 2 or label == 0:
            continue
        prompt = row["instruction"] + ("\n\n" + row["input"] if row["input"] else "")
        chosen, rejected = (
            (row["response1"], row["response2"])
            if label == 1
            else (row["response2"], row["response1"])
        )
        pairs.append(
            Pair(
                prompt,
                chosen,
                rejected,
                domain=row["motivation_app"].lower(),
                agreement=count / 3,
                n_raters=3,
            )
        )
    return pairs


def sample(pairs: list[Pair], n: int, seed: int) -> list[Pair]:
    pairs = list(pairs)
    random.Random(seed).shuffle(pairs)
    return pairs[:n]


# -- speed ------------------------------------------------------------------------------------


def _peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_seconds() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _set_threads(threads: int) -> None:
    import torch

    if threads > 0:  # both sides alike: on a shared machine fewer threads wait less on each other
        torch.set_num_threads(threads)


def _run_preflab(pairs: list[Pair], settings_kwargs: dict, out: str, threads: int, queue) -> None:
    # imported before the clock starts, as in the TRL run: `import trl` alone is a lazy shell,
    # and loading RewardTrainer (transformers.trainer, torch.distributed, dynamo) costs ~11
    # CPU-s in a fresh process, which the first version of this benchmark charged to preflab only
    import datasets  # noqa: F401
    from trl import RewardTrainer  # noqa: F401

    _set_threads(threads)

    from preflab.train.reward_model import RMSettings, train_reward_model

    settings = RMSettings(**settings_kwargs)
    start, cpu = time.perf_counter(), _cpu_seconds()
    result = train_reward_model(PairSource(pairs, {}, None, "bench"), Path(out), settings=settings)
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    queue.put(
        {
            "seconds": seconds,
            "cpu_seconds": cpu,
            "pairs": result.card["split"]["train_pairs"],
            "steps": result.card["training"]["steps"],
            "train_seconds": result.card["training"]["runtime_s"],
            "peak_rss_mb": _peak_rss_mb(),
        }
    )


def _run_trl(pairs: list[Pair], settings_kwargs: dict, out: str, threads: int, queue) -> None:
    _set_threads(threads)
    import datasets
    from transformers import set_seed
    from trl import RewardTrainer

    from preflab.train.data import split_by_prompt
    from preflab.train.reward_model import (
        RMSettings,
        default_backbone,
        load_backbone,
        reward_config,
    )

    settings = RMSettings(**settings_kwargs)
    start, cpu = time.perf_counter(), _cpu_seconds()
    set_seed(settings.seed)
    train, _ = split_by_prompt(pairs, settings.heldout, settings.seed)
    tokenizer, model = load_backbone(default_backbone())
    args = reward_config(Path(out), settings)
    if tokenizer.eos_token is None:
        args.eos_token = tokenizer.sep_token
    dataset = datasets.Dataset.from_list(
        [{"prompt": p.prompt, "chosen": p.chosen, "rejected": p.rejected} for p in train]
    )
    trainer = RewardTrainer(
        model=model, args=args, train_dataset=dataset, processing_class=tokenizer
    )
    train_seconds = trainer.train().metrics["train_runtime"]
    trainer.save_model(out)
    seconds, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    queue.put(
        {
            "seconds": seconds,
            "cpu_seconds": cpu,
            "pairs": len(trainer.train_dataset),
            "steps": trainer.state.global_step,
            "train_seconds": train_seconds,
            "peak_rss_mb": _peak_rss_mb(),
        }
    )


def _in_process(target, *args) -> dict:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(*args, queue))
    proc.start()
    result = queue.get()
    proc.join()
    return result


def fitting_pairs(pairs: list[Pair], max_length: int) -> list[Pair]:
    from preflab.train.encode import encode
    from preflab.train.reward_model import default_backbone, load_backbone

    tokenizer, _ = load_backbone(default_backbone())
    fits = [
        p
        for p in pairs
        if not (
            encode(tokenizer, p.prompt, p.chosen, max_length).truncated
            or encode(tokenizer, p.prompt, p.rejected, max_length).truncated
        )
    ]
    return fits


def speed(pairs: list[Pair], args: argparse.Namespace) -> dict:
    fits = fitting_pairs(pairs, args.max_length)
    dropped = {
        n: 1 - len(fitting_pairs(pairs, n)) / len(pairs) for n in sorted({args.max_length, 256})
    }
    chosen = sample(fits, args.speed_pairs, args.seed)
    settings = {
        "max_length": args.max_length,
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "progress": False,
        "logging_steps": 1000,
        "length_balance": False,  # TRL trains on the split as it is: so does preflab here
    }
    runs: dict[str, list[dict]] = {"preflab": [], "trl": []}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.repeats):
            order = [("preflab", _run_preflab), ("trl", _run_trl)]
            for name, target in order if k % 2 == 0 else order[::-1]:
                out = f"{tmp}/{name}{k}"
                runs[name].append(_in_process(target, chosen, settings, out, args.threads))
    # medians of alternating runs: a neighbour's load burst moves one run, not the median
    rate = {n: median(x["pairs"] * args.epochs / x["seconds"] for x in r) for n, r in runs.items()}
    cpu_rate = {
        n: median(x["pairs"] * args.epochs / x["cpu_seconds"] for x in r) for n, r in runs.items()
    }
    outside = {n: median(x["seconds"] - x["train_seconds"] for x in r) for n, r in runs.items()}
    return {
        "pairs": len(chosen),
        "max_length": args.max_length,
        "epochs": args.epochs,
        "repeats": args.repeats,
        "threads": args.threads,
        "trl_would_drop_share": dropped,
        "runs": runs,
        "pairs_per_s": rate,
        "ratio": rate["preflab"] / rate["trl"],
        "pairs_per_cpu_s": cpu_rate,
        "cpu_ratio": cpu_rate["preflab"] / cpu_rate["trl"],
        "seconds_outside_training": outside,
        "peak_rss_mb": {n: max(x["peak_rss_mb"] for x in r) for n, r in runs.items()},
    }


# -- accuracy ---------------------------------------------------------------------------------


#: ``rm train`` variants compared on the same split (RMSettings overrides)
VARIANTS: dict[str, dict] = {
    "default": {},
    "plain": {"length_balance": False},
    "length_balance": {"length_balance": True},
    "length_balance_half": {"length_balance": True, "length_balance_strength": 0.5},
    "length_parity": {"length_parity": True, "length_balance": False},
    "warmup": {"warmup": 0.1},
    "mean": {"pooling": "mean"},
    "prompt64": {"max_prompt_length": 64},
}


def accuracy(name: str, pairs: list[Pair], args: argparse.Namespace) -> dict:
    """Train each variant in ``--variants`` for each seed in ``--seeds``; score the held-out split."""
    out: dict = {"pairs": len(pairs), "runs": []}
    labels = []
    for seed in args.seeds:
        for variant in args.variants:
            for share in args.train_shares:
                report = train_and_evaluate(name, pairs, args, seed, VARIANTS[variant], share)
                label = variant if share == 1 else f"{variant}@{share:g}"
                labels += [label] if label not in labels else []
                out["runs"].append({"variant": label, "seed": seed, "train_share": share, **report})
                print_run(name, out["runs"][-1])
    if len(args.seeds) > 1:
        out["pooled"] = {v: pooled([r for r in out["runs"] if r["variant"] == v]) for v in labels}
        for variant, methods in out["pooled"].items():
            print_pooled(name, variant, args.seeds, methods)
    return out


def _pool(parts: list[dict]) -> dict:
    """One accuracy over several held-out sets: the pairs counted together, a Wilson interval."""
    from preflab.quality.gold import wilson_interval

    n = sum(m["n"] for m in parts)
    correct = round(sum(m["accuracy"] * m["n"] for m in parts if m.get("accuracy") is not None))
    low, high = wilson_interval(correct, n)
    return {"accuracy": correct / n if n else None, "low": low, "high": high, "n": n}


def pooled(runs: list[dict]) -> dict:
    """Each method's accuracy and length strata pooled over the seeds' splits: a larger held-out
    set than any one split's (whose interval is ±0.07 on PandaLM), to compare methods by. The
    seeds draw their held-out prompts independently, so about a fifth of them recur across two
    seeds and the interval is somewhat narrower than an independent sample of that size gives."""
    out = {}
    for method in runs[0]["methods"]:
        ms = [r["methods"][method] for r in runs]
        strata = {
            s: _pool([m["strata"]["length"][s] for m in ms if s in m["strata"]["length"]])
            for s in ("chosen longer", "chosen shorter")
        }
        out[method] = {**_pool(ms), "strata": {"length": strata}}
    if all("versus" in r for r in runs):
        out["versus"] = {
            name: _pool_versus([r["versus"][name] for r in runs]) for name in runs[0]["versus"]
        }
    return out


def _pool_versus(parts: list[dict]) -> dict:
    """The RM against a baseline pair by pair, the discordant pairs of every split counted
    together (exact McNemar on the sum; pairs recurring across splits count once a split)."""
    from preflab.train.evaluation import mcnemar_exact

    a, b = sum(v["a_only"] for v in parts), sum(v["b_only"] for v in parts)
    return {"a_only": a, "b_only": b, "p_value": mcnemar_exact(a, b)}


def _print_versus(versus: dict) -> None:
    for key, label in METHOD_LABELS.items():
        if key in versus:
            v = versus[key]
            print(
                f"  RM vs {label}: {v['a_only']:g} pairs only the RM gets right, "
                f"{v['b_only']:g} only {label}; exact McNemar p = {v['p_value']:.3g}"
            )


def print_pooled(name: str, variant: str, seeds: list[int], methods: dict) -> None:
    print(
        f"\n{name}, variant {variant}, pooled over seeds {','.join(map(str, seeds))} "
        f"({methods['reward_model']['n']} held-out pairs in all)"
    )
    print(
        f"  {'method':<30}{'accuracy':>9}{'95% CI':>16}{'ch. longer':>12}{'ch. shorter':>12}{'gap':>8}"
    )
    print(_row(f"MiniLM RM ({variant})", methods["reward_model"]))
    for key, label in METHOD_LABELS.items():
        if key in methods:
            print(_row(label, methods[key]))
    if "versus" in methods:
        _print_versus(methods["versus"])


def train_and_evaluate(
    name: str,
    pairs: list[Pair],
    args: argparse.Namespace,
    seed: int,
    overrides: dict,
    train_share: float = 1.0,
) -> dict:
    from preflab.train.data import read_pairs
    from preflab.train.evaluation import evaluate_pairs
    from preflab.train.reward_model import RMSettings, train_reward_model
    from preflab.train.score import RewardScorer

    with tempfile.TemporaryDirectory() as tmp:
        settings = RMSettings(
            max_length=args.max_length,
            epochs=args.epochs,
            batch_size=args.batch_size,
            learning_rate=args.learning_rate,
            seed=seed,
            progress=False,
            logging_steps=1000,
            **overrides,
        )
        start = time.perf_counter()
        card = train_reward_model(
            PairSource(pairs, {}, None, name), Path(tmp), settings=settings, train_share=train_share
        ).card
        train, held = (
            read_pairs(Path(tmp) / "split/train.jsonl"),
            read_pairs(Path(tmp) / "split/heldout.jsonl"),
        )
        scorer = RewardScorer(Path(tmp))
        rc = scorer.score([p.prompt for p in held], [p.chosen for p in held])
        rr = scorer.score([p.prompt for p in held], [p.rejected for p in held])
        report = evaluate_pairs(
            held, train, reward_chosen=rc, reward_rejected=rr, length=scorer.length, seed=seed
        )
    report["seconds"] = time.perf_counter() - start
    report["truncated_pairs"] = card["truncated_pairs"]
    report["train_pairs"] = card["split"]["train_pairs"]
    report["steps"] = card["training"]["steps"]
    return report


def _acc(m: dict, stratum: str | None = None) -> str:
    if stratum is not None:
        m = m["strata"]["length"].get(stratum) or {"accuracy": None}
    return "   –  " if m.get("accuracy") is None else f"{m['accuracy']:.3f}"


METHOD_LABELS = {
    "longer_wins": "longer wins",
    "shorter_wins": "shorter wins",
    "tfidf_lr": "TF-IDF + LR",
}


def _row(label: str, m: dict) -> str:
    gap = _gap(m)
    return (
        f"  {label:<30}{_acc(m):>9}   [{m['low']:.3f}, {m['high']:.3f}]"
        f"{_acc(m, 'chosen longer'):>12}{_acc(m, 'chosen shorter'):>12}"
        f"{'   –' if gap is None else f'{gap:7.3f}':>8}"
    )


def _gap(m: dict) -> float | None:
    strata = m["strata"]["length"]
    a = strata.get("chosen longer", {}).get("accuracy")
    b = strata.get("chosen shorter", {}).get("accuracy")
    return None if a is None or b is None else abs(a - b)


def print_run(name: str, run: dict) -> None:
    """One trained variant against the baselines fitted on the same split."""
    print(
        f"\n{name}, variant {run['variant']}, seed {run['seed']}: {run['train_pairs']} train / "
        f"{run['n_heldout']} held-out pairs, {run['steps']} steps, {run['truncated_pairs']} truncated, "
        f"{run['seconds']:.0f} s",
        flush=True,
    )
    print(
        f"  {'method':<30}{'accuracy':>9}{'95% CI':>16}{'ch. longer':>12}{'ch. shorter':>12}{'gap':>8}"
    )
    print(_row(f"MiniLM RM ({run['variant']})", run["methods"]["reward_model"]))
    for key, label in METHOD_LABELS.items():
        if key in run["methods"]:
            print(_row(label, run["methods"][key]))
    if "versus" in run:
        _print_versus(run["versus"])
    rho = (run["spearman_reward_length"] or {}).get("rho", float("nan"))
    print(
        f"  Spearman(reward, length) {rho:.3f}; ECE {run['calibration']['reward_model']['ece']:.3f}",
        flush=True,
    )


def main() -> int:
    from preflab.train.reward_model import RMSettings

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--speed-pairs", type=int, default=64)
    parser.add_argument(
        "--accuracy-pairs", type=int, default=300, help="pairs per data set (0: all of them)"
    )
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3, help="alternating runs per side")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's choice)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-accuracy", action="store_true")
    parser.add_argument(
        "--learning-rate", type=float, default=RMSettings.learning_rate, help="rm train's default"
    )
    parser.add_argument(
        "--variants",
        type=lambda v: v.split(","),
        default=["default", "plain"],
        help=f"comma-separated, of {', '.join(VARIANTS)}",
    )
    parser.add_argument(
        "--seeds", type=lambda v: [int(x) for x in v.split(",")], default=[0], help="e.g. 0,1,2"
    )
    parser.add_argument(
        "--datasets", type=lambda v: v.split(","), default=["hh", "pandalm"], help="hh,pandalm"
    )
    parser.add_argument(
        "--train-shares",
        type=lambda v: [float(x) for x in v.split(",")],
        default=[1.0],
        help="comma-separated shares of the training prompts to train on, the held-out split "
        "unchanged (a learning curve; TF-IDF + LR fitted on the same share)",
    )
    parser.add_argument("--json", type=Path, help="also write all figures here")
    args = parser.parse_args()

    missing = [f for f in (HH_FILE, PANDALM_FILE) if not (args.data_dir / f).is_file()]
    if missing:
        print(
            f"error: {', '.join(missing)} not found in {args.data_dir}; pass --data-dir DIR holding the shared "
            "data sets (see ../shared/data/README.md)",
            file=sys.stderr,
        )
        return 2
    hh = hh_pairs(args.data_dir / HH_FILE)
    panda = pandalm_pairs(args.data_dir / PANDALM_FILE)
    results: dict = {
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    }
    if not args.skip_speed:
        s = results["speed"] = speed(hh, args)
        print(
            f"speed ({s['pairs']} hh-rlhf pairs fitting {s['max_length']} tokens, {s['epochs']} epoch(s)):"
        )
        for name in ("preflab", "trl"):
            print(
                f"  {name:<8} {s['pairs_per_s'][name]:7.2f} pairs/s wall  {s['pairs_per_cpu_s'][name]:7.2f} pairs/CPU-s"
                f"   peak RSS {s['peak_rss_mb'][name]:7.0f} MB"
            )
        print(
            f"  ratio preflab/TRL (medians of {s['repeats']} alternating runs): {s['ratio']:.3f} wall, "
            f"{s['cpu_ratio']:.3f} CPU (target >= 0.95)"
        )
        print(
            "  seconds outside trainer.train() (load, tokenize, save): "
            + ", ".join(f"{n} {v:.1f}" for n, v in s["seconds_outside_training"].items())
        )
        for n, share in s["trl_would_drop_share"].items():
            print(
                f"  TRL's max_length={n} filter would drop {share:.1%} of hh-rlhf harmless (preflab truncates them)"
            )
    if not args.skip_accuracy:
        for key, name, pairs in (("hh", "hh-rlhf harmless", hh), ("pandalm", "PandaLM", panda)):
            if key in args.datasets:
                chosen = sample(pairs, args.accuracy_pairs or len(pairs), args.seed)
                results[name] = accuracy(name, chosen, args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
