"""Sampling a policy: ``preflab sample PROMPTS --n N --out rollouts.jsonl``.

Two sources, one output:

* an **OpenAI-compatible endpoint** (``POST {endpoint}/chat/completions``: vLLM, SGLang, TGI,
  Ollama, llama.cpp, hosted APIs): ``concurrency`` requests in flight, retries with exponential
  backoff and full jitter on 429, 5xx, timeouts and dropped connections (``Retry-After`` is
  honoured, capped), a resumable cache, token accounting from the answers' ``usage``;
* a **local transformers causal LM** (a directory; CPU works for small models), seeded per
  sample, tokens counted with its tokenizer.

Every sample is one request with ``seed = seed + sample_index``, so sample *i* of a prompt is the
same sample whether it was drawn in the first run or a resumed one. The **cache** (one JSONL
line per finished sample, appended and flushed as each arrives) is keyed by the SHA-256 of
``(model, prompt, sampling parameters, base seed, sample index)``; a rerun draws only what is
missing, a rerun with ``--n`` larger draws only the new indices, and a changed parameter misses.

Rows are the ``rollouts.jsonl`` shape preflab reads everywhere (``import``, ``rm score``, ``eval
create``): ``{"prompt", "response", "reward": null, "model", "domains", "metadata"}`` with
``metadata = {"task_id", "sample_index", "seed", "sampling": {...}, "tokens": {"prompt",
"completion"}, "finish_reason", "source"}`` (and ``choices`` when the prompt row has them).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RETRY_STATUSES = frozenset({408, 409, 425, 429}) | frozenset(range(500, 600))


class SamplingError(ValueError):
    """Bad input or an endpoint that refuses, with a message meant for the user."""


class SamplesFailed(SamplingError):
    """Some samples could not be drawn after their retries; those drawn are in the cache."""


@dataclass(frozen=True)
class PromptRow:
    task_id: str
    prompt: str | list[dict[str, Any]]
    domain: str | None = None
    choices: list[str] | None = None


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 512

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RetryPolicy:
    max_retries: int = 5
    base_s: float = 0.5
    cap_s: float = 30.0
    timeout_s: float = 120.0


@dataclass
class SampleStats:
    samples: int = 0
    cached: int = 0
    requests: int = 0
    retries: int = 0
    failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["errors"] = self.errors[:10]
        out["requests_per_s"] = round(self.requests / self.wall_s, 2) if self.wall_s else None
        out["completion_tokens_per_s"] = (
            round(self.completion_tokens / self.wall_s, 1) if self.wall_s else None
        )
        return out


# -- prompts -----------------------------------------------------------------------------


def read_prompt_rows(path: Path) -> list[PromptRow]:
    """``{"task_id" (or "id"), "prompt", "domain"?, "choices"?}`` rows; a tasks file whose rows
    carry a ``prompt`` is one too. Every bad line is reported, ``file:line: field: reason``."""
    rows, errors, seen = [], [], set()
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                errors.append(f"{where}: (line): invalid JSON: {e.msg}")
                continue
            if not isinstance(record, dict):
                errors.append(f"{where}: (line): expected a JSON object")
                continue
            task_id = record.get("task_id", record.get("id"))
            prompt = record.get("prompt")
            domain = record.get("domain")
            choices = record.get("choices")
            if not isinstance(task_id, str) or not task_id:
                errors.append(f"{where}: task_id: missing (give task_id or id)")
            elif task_id in seen:
                errors.append(f"{where}: task_id: duplicate {task_id!r}")
            elif not (isinstance(prompt, str) and prompt.strip()) and not (
                isinstance(prompt, list) and prompt and all(isinstance(m, dict) for m in prompt)
            ):
                errors.append(f"{where}: prompt: expected text or a list of chat messages")
            elif domain is not None and not isinstance(domain, str):
                errors.append(f"{where}: domain: expected a string")
            elif choices is not None and not (
                isinstance(choices, list) and all(isinstance(c, str) for c in choices)
            ):
                errors.append(f"{where}: choices: expected a list of strings")
            else:
                seen.add(task_id)
                rows.append(PromptRow(task_id, prompt, domain, choices))
    if errors:
        raise SamplingError("\n".join(errors) + "\nfix these lines and run again")
    if not rows:
        raise SamplingError(f"{path}: no prompts")
    return rows


def messages_of(prompt: str | list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)


# -- the cache ---------------------------------------------------------------------------


def cache_key(
    model: str, prompt: str | list[dict[str, Any]], params: SamplingParams, seed: int, index: int
) -> str:
    blob = json.dumps(
        {"model": model, "prompt": prompt, "params": params.as_dict(), "seed": seed, "i": index},
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode()).hexdigest()


class SampleCache:
    """Append-only JSONL ``{"key", "row"}``; a torn last line (a killed run) is ignored."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.rows: dict[str, dict[str, Any]] = {}
        if path is not None and path.exists():
            with open(path, encoding="utf-8") as f:
                for line in f:
                    try:
                        entry = json.loads(line)
                        self.rows[entry["key"]] = entry["row"]
                    except (json.JSONDecodeError, KeyError, TypeError):
                        continue
        self._file = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "a", encoding="utf-8")

    def get(self, key: str) -> dict[str, Any] | None:
        return self.rows.get(key)

    def put(self, key: str, row: dict[str, Any]) -> None:
        self.rows[key] = row
        if self._file is not None:
            self._file.write(json.dumps({"key": key, "row": row}, ensure_ascii=False) + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


# -- rows --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    prompt: PromptRow
    index: int
    seed: int
    key: str


def plan_jobs(
    prompts: Sequence[PromptRow], n: int, model: str, params: SamplingParams, seed: int
) -> list[Job]:
    return [
        Job(p, i, seed + i, cache_key(model, p.prompt, params, seed, i))
        for p in prompts
        for i in range(n)
    ]


def rollout_row(
    job: Job,
    *,
    text: str,
    model: str,
    params: SamplingParams,
    prompt_tokens: int | None,
    completion_tokens: int | None,
    finish_reason: str | None,
    source: str,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "task_id": job.prompt.task_id,
        "sample_index": job.index,
        "seed": job.seed,
        "sampling": params.as_dict(),
        "tokens": {"prompt": prompt_tokens, "completion": completion_tokens},
        "finish_reason": finish_reason,
        "source": source,
    }
    if job.prompt.choices is not None:
        meta["choices"] = job.prompt.choices
    return {
        "prompt": job.prompt.prompt,
        "response": text,
        "reward": None,
        "model": model,
        "domains": [job.prompt.domain] if job.prompt.domain else [],
        "metadata": meta,
    }


def _count(stats: SampleStats, row: dict[str, Any]) -> None:
    tokens = row["metadata"]["tokens"]
    stats.prompt_tokens += tokens.get("prompt") or 0
    stats.completion_tokens += tokens.get("completion") or 0


# -- an OpenAI-compatible endpoint -------------------------------------------------------


def chat_url(endpoint: str) -> str:
    """``http://host:8000`` or ``.../v1`` or the full route: the chat completions URL."""
    base = endpoint.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    if not base.endswith("/v1"):
        base += "/v1"
    return base + "/chat/completions"


def _retry_after(value: str | None, cap: float) -> float | None:
    if value is None:
        return None
    try:
        return min(max(float(value), 0.0), cap)
    except ValueError:
        return None


async def request_chat(
    client: Any,
    url: str,
    body: dict[str, Any],
    retry: RetryPolicy,
    stats: SampleStats,
    rng: random.Random,
) -> dict[str, Any]:
    """One chat completion (``{"text", "finish_reason", "usage"}``), retried with backoff on 429,
    5xx, timeouts and dropped connections; ``stats.requests`` and ``stats.retries`` counted.
    Shared by ``preflab sample`` and ``preflab judge run``."""
    import httpx

    last = ""
    for attempt in range(retry.max_retries + 1):
        if attempt:
            stats.retries += 1
        stats.requests += 1
        wait: float | None = None
        try:
            response = await client.post(url, json=body)
        except (httpx.TimeoutException, httpx.TransportError) as e:
            last = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        else:
            if response.status_code == 200:
                try:
                    data = response.json()
                    choice = data["choices"][0]
                    content = choice["message"]["content"]
                except (ValueError, KeyError, IndexError, TypeError) as e:
                    raise SamplingError(
                        f"{url}: unexpected answer ({e!r}): {response.text[:200]}"
                    ) from e
                return {
                    "text": content if isinstance(content, str) else "",
                    "finish_reason": choice.get("finish_reason"),
                    "usage": data.get("usage") or {},
                }
            last = f"HTTP {response.status_code}: {response.text[:200]}"
            if response.status_code not in RETRY_STATUSES:
                raise SamplingError(f"{url}: {last}")
            wait = _retry_after(response.headers.get("retry-after"), retry.cap_s)
        if attempt == retry.max_retries:
            break
        if wait is None:  # exponential backoff, full jitter (AWS architecture blog, 2015)
            wait = rng.uniform(0, min(retry.cap_s, retry.base_s * 2**attempt))
        await asyncio.sleep(wait)
    raise SamplingError(f"{url}: gave up after {retry.max_retries + 1} attempts: {last}")


def run_coroutine(coroutine: Any) -> Any:
    """``asyncio.run``, also from a thread whose event loop is already running (a notebook,
    Playwright's sync API, a web handler): then on a thread of its own, waited for."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


async def _sample_endpoint(
    jobs: Sequence[Job],
    *,
    endpoint: str,
    model: str,
    params: SamplingParams,
    cache: SampleCache,
    stats: SampleStats,
    concurrency: int,
    retry: RetryPolicy,
    api_key: str | None,
    on_done: Callable[[int], None] | None,
) -> None:
    import httpx

    url = chat_url(endpoint)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    rng = random.Random(0)
    queue: asyncio.Queue[Job] = asyncio.Queue()
    for job in jobs:
        queue.put_nowait(job)

    async def worker(client: httpx.AsyncClient) -> None:
        while True:
            try:
                job = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            body = {
                "model": model,
                "messages": messages_of(job.prompt.prompt),
                "temperature": params.temperature,
                "top_p": params.top_p,
                "max_tokens": params.max_tokens,
                "seed": job.seed,
                "n": 1,
            }
            try:
                answer = await request_chat(client, url, body, retry, stats, rng)
            except SamplingError as e:
                stats.failed += 1
                stats.errors.append(f"{job.prompt.task_id}#{job.index}: {e}")
            else:
                usage = answer["usage"]
                row = rollout_row(
                    job,
                    text=answer["text"],
                    model=model,
                    params=params,
                    prompt_tokens=usage.get("prompt_tokens"),
                    completion_tokens=usage.get("completion_tokens"),
                    finish_reason=answer["finish_reason"],
                    source="endpoint",
                )
                cache.put(job.key, row)
                _count(stats, row)
            if on_done:
                on_done(1)

    async with httpx.AsyncClient(
        headers=headers, limits=limits, timeout=httpx.Timeout(retry.timeout_s)
    ) as client:
        await asyncio.gather(*(worker(client) for _ in range(max(1, concurrency))))


# -- a local transformers model ----------------------------------------------------------


def _sample_local(
    jobs: Sequence[Job],
    *,
    path: Path,
    model: str,
    params: SamplingParams,
    cache: SampleCache,
    stats: SampleStats,
    on_done: Callable[[int], None] | None,
) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    lm = AutoModelForCausalLM.from_pretrained(path)
    lm.eval()
    for job in jobs:
        prompt = job.prompt.prompt
        ids: Any
        if getattr(tokenizer, "chat_template", None):
            ids = tokenizer.apply_chat_template(
                messages_of(prompt), add_generation_prompt=True, return_tensors="pt"
            )
            if not isinstance(ids, torch.Tensor):  # newer transformers: a BatchEncoding
                ids = ids["input_ids"]
        else:
            text = (
                prompt
                if isinstance(prompt, str)
                else "\n".join(str(m.get("content", "")) for m in prompt)
            )
            ids = tokenizer(text, return_tensors="pt")["input_ids"]
        torch.manual_seed(job.seed)
        sampled = params.temperature > 0
        with torch.no_grad():
            output = lm.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                do_sample=sampled,
                temperature=params.temperature if sampled else None,
                top_p=params.top_p if sampled else None,
                max_new_tokens=params.max_tokens,
                pad_token_id=tokenizer.pad_token_id
                if tokenizer.pad_token_id is not None
                else tokenizer.eos_token_id,
            )
        new = output[0, ids.shape[1] :]
        eos = tokenizer.eos_token_id
        finish = "stop" if eos is not None and bool((new == eos).any()) else "length"
        stats.requests += 1
        row = rollout_row(
            job,
            text=str(tokenizer.decode(new, skip_special_tokens=True)),
            model=model,
            params=params,
            prompt_tokens=int(ids.shape[1]),
            completion_tokens=int(new.shape[0]),
            finish_reason=finish,
            source="local",
        )
        cache.put(job.key, row)
        _count(stats, row)
        if on_done:
            on_done(1)


# -- the whole run -----------------------------------------------------------------------


def sample(
    prompts: Sequence[PromptRow],
    n: int,
    *,
    endpoint: str | None = None,
    model: str | None = None,
    local: Path | None = None,
    params: SamplingParams = SamplingParams(),
    seed: int = 0,
    cache_path: Path | None = None,
    concurrency: int = 8,
    retry: RetryPolicy | None = None,
    api_key: str | None = None,
    on_done: Callable[[int], None] | None = None,
) -> tuple[list[dict[str, Any]], SampleStats]:
    """Rows for every (prompt, index < n) in prompt order, and the run's figures.

    Samples already in the cache are not drawn again. Raises :class:`SamplingError` when a
    sample could not be drawn (those drawn stay in the cache; a rerun resumes)."""
    if n < 1:
        raise SamplingError("--n must be at least 1")
    if (endpoint is None) == (local is None):
        raise SamplingError("give exactly one of --endpoint URL (with --model) or --local PATH")
    if endpoint is not None and not model:
        raise SamplingError("--endpoint needs --model NAME (the model the server serves)")
    name = model or (local.name if local is not None else "local")
    jobs = plan_jobs(prompts, n, name, params, seed)
    cache = SampleCache(cache_path)
    stats = SampleStats(samples=len(jobs))
    started = time.monotonic()
    try:
        todo = []
        for job in jobs:
            hit = cache.get(job.key)
            if hit is None:
                todo.append(job)
            else:
                stats.cached += 1
                if on_done:
                    on_done(1)
        if todo and endpoint is not None:
            run_coroutine(
                _sample_endpoint(
                    todo,
                    endpoint=endpoint,
                    model=name,
                    params=params,
                    cache=cache,
                    stats=stats,
                    concurrency=concurrency,
                    retry=retry or RetryPolicy(),
                    api_key=api_key,
                    on_done=on_done,
                )
            )
        elif todo and local is not None:
            _sample_local(
                todo,
                path=local,
                model=name,
                params=params,
                cache=cache,
                stats=stats,
                on_done=on_done,
            )
    finally:
        cache.close()
        stats.wall_s = time.monotonic() - started
    if stats.failed:
        where = f" (the {stats.samples - stats.failed} drawn are cached in {cache_path}; run again to resume)"
        raise SamplesFailed(
            f"{stats.failed} of {stats.samples} samples failed{where if cache_path else ''}:\n"
            + "\n".join(stats.errors[:5])
        )
    rows = [cache.rows[job.key] for job in jobs]
    return rows, stats


def write_rows(path: Path, rows: Iterable[dict[str, Any]]) -> int:
    """Atomically: a temporary file renamed into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    n = 0
    with open(tmp, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    tmp.replace(path)
    return n
