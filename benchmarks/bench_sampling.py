"""Sampling and rollout-verification throughput: ``preflab sample`` against the in-process
OpenAI-compatible server, and ``verify rollouts`` scoring.

    python benchmarks/bench_sampling.py                  # 13 prompts x 32, 8 in flight
    python benchmarks/bench_sampling.py --n 64 --delay 0.02 --json out.json

What is timed, in one run:

1. **baseline**: one ``httpx.Client`` posting the same requests one after another (no
   concurrency, no cache, no retries): what a plain loop gets from the same server.
2. **sample, cold**: :func:`preflab.train.sampling.sample` with ``--concurrency`` requests in
   flight and a fresh cache file (every sample is drawn and written to the cache).
3. **sample, warm**: the same call again: every sample comes from the cache.
4. **verify rollouts**: the math and SQL rollouts of (2) (code runs in the sandbox and is timed
   by ``bench_verify.py``) through :func:`preflab.verify.rollouts.score_rollouts` (verdicts,
   pass@k, 1000 bootstrap resamples; guessability off), against a bare loop of
   :func:`preflab.verify.verify` on the same rollouts.

The server answers each request after ``--delay`` seconds (a model's latency; the default
10 ms), from the scripted policy of ``examples/stages/answers.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

import httpx  # noqa: E402

from preflab.train.openai_stub import StubPolicy, StubServer  # noqa: E402
from preflab.train.sampling import (  # noqa: E402
    RetryPolicy,
    SamplingParams,
    chat_url,
    messages_of,
    read_prompt_rows,
    sample,
)
from preflab.verify import verify  # noqa: E402
from preflab.verify.rollouts import Rollout, load_tasks_with_meta, score_rollouts  # noqa: E402

STAGES = ROOT / "examples" / "stages"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=32, help="samples per prompt")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--delay", type=float, default=0.01, help="server latency, seconds")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()

    prompts = read_prompt_rows(STAGES / "tasks.jsonl")
    answers = json.loads((STAGES / "answers.json").read_text())
    params = SamplingParams(temperature=1.0, max_tokens=512)
    total = len(prompts) * args.n
    figures: dict[str, dict[str, float]] = {}

    with StubServer(StubPolicy(answers, delay_s=args.delay)) as server:
        # 1. baseline: a plain sequential loop
        started, tokens = time.perf_counter(), 0
        with httpx.Client(timeout=30) as client:
            for p in prompts:
                for i in range(args.n):
                    r = client.post(
                        chat_url(server.url),
                        json={
                            "model": "stub",
                            "messages": messages_of(p.prompt),
                            "max_tokens": params.max_tokens,
                            "seed": i,
                        },
                    )
                    tokens += r.json()["usage"]["completion_tokens"]
        wall = time.perf_counter() - started
        figures["baseline sequential"] = {
            "wall_s": wall,
            "requests_per_s": total / wall,
            "tokens_per_s": tokens / wall,
        }
        with tempfile.TemporaryDirectory() as tmp:
            cache = Path(tmp) / "cache.jsonl"
            for label in ("sample cold (cache written)", "sample warm (all from cache)"):
                started = time.perf_counter()
                rows, stats = sample(
                    prompts,
                    args.n,
                    endpoint=server.url,
                    model="stub",
                    params=params,
                    cache_path=cache,
                    concurrency=args.concurrency,
                    retry=RetryPolicy(),
                )
                wall = time.perf_counter() - started
                out_tokens = sum(r["metadata"]["tokens"]["completion"] for r in rows)
                figures[label] = {
                    "wall_s": wall,
                    "requests": stats.requests,
                    "requests_per_s": stats.requests / wall,
                    "samples_per_s": total / wall,
                    "tokens_per_s": out_tokens / wall,
                }

    tasks, meta = load_tasks_with_meta(STAGES / "tasks.jsonl")
    rollouts = [
        Rollout(k, r["metadata"]["task_id"], r["response"], r)
        for k, r in enumerate(rows)
        if tasks[r["metadata"]["task_id"]].kind in ("math", "sql")
    ]
    for r in rollouts:  # warm-up, untimed: parsers and caches ready for both timings
        verify(tasks[r.task_id], r.completion)
    started = time.perf_counter()
    for r in rollouts:
        verify(tasks[r.task_id], r.completion)
    wall = time.perf_counter() - started
    figures["baseline verify loop"] = {"wall_s": wall, "rollouts_per_s": len(rollouts) / wall}
    started = time.perf_counter()
    score_rollouts(tasks, meta, rollouts, resamples=1000, workers=1, guess=False)
    wall = time.perf_counter() - started
    figures["verify rollouts + pass@k"] = {"wall_s": wall, "rollouts_per_s": len(rollouts) / wall}

    base = figures["baseline sequential"]
    print(
        f"{len(prompts)} prompts x {args.n} samples = {total}; server latency {args.delay * 1000:.0f} ms; "
        f"concurrency {args.concurrency}"
    )
    for label, f in figures.items():
        parts = [f"{k} {v:,.1f}" for k, v in f.items() if k != "wall_s"]
        ratio = ""
        if "samples_per_s" in f:
            ratio = f"  x{f['samples_per_s'] / base['requests_per_s']:.1f} vs baseline"
        if label == "verify rollouts + pass@k":
            loop = figures["baseline verify loop"]["rollouts_per_s"]
            ratio = f"  x{f['rollouts_per_s'] / loop:.2f} vs bare verify loop"
        print(f"  {label:30s} {f['wall_s']:7.3f}s  {', '.join(parts)}{ratio}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
