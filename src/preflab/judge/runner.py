"""Asking a model judge: requests planned per item, sent concurrently, replies parsed strictly,
cached, and turned into ``source: ai`` judgments. No database here (``project.py`` reads items
and stores labels).

* **Requests** go to an OpenAI-compatible ``POST .../chat/completions`` through
  :func:`preflab.train.sampling.request_chat` (``preflab sample``'s client: ``concurrency`` in
  flight, exponential backoff with full jitter on 429, 5xx, timeouts and dropped connections,
  ``Retry-After`` honoured).
* A **malformed reply** (not the JSON object the template asks for, or a grade off the rubric's
  scale) is asked again, up to ``parse_retries`` more times, then the label is a *failure* with
  the reason; nothing is guessed.
* **Pairwise** items are asked in both presentation orders. Orders that agree on the winner make
  one label (the weaker of the two strengths: "much better" only if both orders say so); orders
  that disagree make an ``order_inconsistent`` label, stored excluded (never a preference).
* The **cache** (one JSONL line per valid reply, appended as each arrives) is keyed by the
  SHA-256 of (template name and version, model, sampling parameters, the request's messages,
  which hold the item's prompt, the answers and their order): a rerun asks only what is missing.
* **Critique spans** (``pairwise@2``, ``unary@2``, when the project lists span categories): the
  judge quotes each span; the runner places a quote where it occurs exactly once in its answer
  (code points of ``Candidate.as_text()``) and drops, counted, one it cannot place or whose
  category the project lacks (:func:`placed_spans`).
* **Tokens**: the replies' ``usage`` summed, malformed replies included (they were paid for).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..schema import (
    CriteriaJudgment,
    CriteriaSet,
    CritiqueSpan,
    Dimension,
    Item,
    JudgeRecord,
    JudgeVerdict,
    JudgmentBase,
    PairwiseJudgment,
    Provenance,
    RubricJudgment,
    StepsJudgment,
    UnaryJudgment,
    prompt_as_text,
)
from ..train.sampling import (
    RetryPolicy,
    SampleCache,
    SampleStats,
    SamplingError,
    chat_url,
    request_chat,
    run_coroutine,
)
from .replies import Malformed, parse_reply
from .templates import JudgeTemplate


def judge_rater(model: str) -> str:
    """The rater id of a model judge's labels (one per model)."""
    return f"judge:{model}"


@dataclass(frozen=True)
class JudgeConfig:
    endpoint: str
    model: str
    template: JudgeTemplate
    concurrency: int = 8
    parse_retries: int = 2
    temperature: float = 0.0
    max_tokens: int = 512
    json_mode: bool = False
    api_key: str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)


@dataclass(frozen=True)
class Ask:
    """One chat request; ``key`` names its reply in the cache."""

    key: str
    messages: list[dict[str, str]]
    dimension: Dimension | None = None
    steps: tuple[str, ...] | None = None
    #: a criteria request: the criterion ids the reply must name, each once
    criteria: tuple[str, ...] | None = None


@dataclass
class Task:
    """One label to make: an item (and its candidates), asked with one or more requests."""

    key: str
    item_id: str
    kind: str
    candidates: tuple[str, ...]
    asks: list[Ask]
    rubric: tuple[str, int] | None = None
    steps: tuple[str, ...] | None = None
    #: the version of the item's approved criteria a criteria task grades against
    criteria_version: int | None = None
    #: candidate id -> ``Candidate.as_text()``: where a reply's quoted spans are looked for
    texts: dict[str, str] = field(default_factory=dict)
    #: the project's span categories (a span in another is dropped and counted)
    span_categories: tuple[str, ...] = ()

    @property
    def idempotency_key(self) -> str:
        return f"judge:{self.key}"


@dataclass
class Outcome:
    task: Task
    judgment: JudgmentBase | None = None
    exclusion_reason: str | None = None
    failure: str | None = None


@dataclass
class JudgeStats:
    tasks: int = 0
    already_stored: int = 0
    #: steps items skipped: no step split known (``project.step_split``)
    no_steps: int = 0
    #: criteria items skipped: no approved criteria (``metadata.criteria``)
    no_criteria: int = 0
    requests_planned: int = 0
    cached_replies: int = 0
    requests: int = 0
    retries: int = 0
    malformed: int = 0
    labels: int = 0
    order_inconsistent: int = 0
    failed: int = 0
    #: critique spans (templates pairwise@2, unary@2): placed in an answer; dropped because the
    #: quote is not in its answer, is in it more than once, or has a category the project lacks
    spans: int = 0
    spans_not_found: int = 0
    spans_ambiguous: int = 0
    spans_other_category: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0
    failures: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["failures"] = self.failures[:20]
        out["total_tokens"] = self.prompt_tokens + self.completion_tokens
        return out


# -- planning ----------------------------------------------------------------------------


def _digest(value: Any) -> str:
    blob = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def _scale_text(d: Dimension) -> str:
    lo, hi = d.bounds
    text = f"{lo:g} to {hi:g}"
    if d.scale != "interval":
        text += " (whole numbers)"
    if d.labels:
        text += "; " + ", ".join(f"{lo + i:g} = {label}" for i, label in enumerate(d.labels))
    return text


def span_request(kind: str, categories: Sequence[str]) -> str:
    """The text a ``$spans`` placeholder becomes: a request for critique spans in the project's
    categories, quoted exactly (the runner places a quote by exact match only); nothing when the
    project lists no categories."""
    if not categories or kind not in ("pairwise", "unary"):
        return ""
    answer = '"answer": "A" | "B", ' if kind == "pairwise" else ""
    return (
        "\n\nAlso mark critique spans: short stretches of "
        + ("an answer" if kind == "pairwise" else "the answer")
        + " that are wrong or problematic. Quote each exactly as it appears in the answer "
        "(copy the characters, do not paraphrase; quote enough to be unique), give it one "
        f"category of: {', '.join(categories)}, and a short note. Add them to the JSON object "
        f'as "spans": [{{{answer}"quote": "exact text", "category": "...", "note": "..."}}] '
        "(an empty list when there is nothing to mark)."
    )


def plan_tasks(
    items: Sequence[Item],
    config: JudgeConfig,
    *,
    dimensions: Sequence[Dimension] = (),
    rubric: tuple[str, int] | None = None,
    steps: Mapping[str, Sequence[str]] | None = None,
    criteria: Mapping[str, CriteriaSet] | None = None,
    span_categories: Sequence[str] = (),
) -> list[Task]:
    """The tasks of ``items`` for the template's kind (items the caller found fit it; for
    ``steps``, the step split of each item's answer in ``steps``, by item id; for ``criteria``,
    each item's approved criteria in ``criteria``, by item id). A template with ``$spans`` asks
    for critique spans in ``span_categories`` (:func:`span_request`)."""
    t = config.template
    spans = span_request(t.kind, span_categories)
    params = {"temperature": config.temperature, "max_tokens": config.max_tokens}
    base = {"template": t.label, "model": config.model, "params": params}

    def ask(
        messages: list[dict[str, str]],
        dimension: Dimension | None = None,
        split: tuple[str, ...] | None = None,
    ) -> Ask:
        return Ask(_digest({**base, "messages": messages}), messages, dimension, split)

    tasks = []
    for item in items:
        assert item.id is not None
        prompt = prompt_as_text(item.prompt)
        texts = {str(c.id): c.as_text() for c in item.candidates}
        asks: list[Ask]
        if t.kind == "pairwise":
            lo, hi = sorted(texts)
            cands: tuple[str, ...] = (lo, hi)
            asks = [
                ask(t.messages(prompt=prompt, answer_a=texts[a], answer_b=texts[b], spans=spans))
                for a, b in ((lo, hi), (hi, lo))
            ]
        elif t.kind == "rubric":
            (cid,) = texts
            cands = (cid,)
            asks = [
                ask(
                    t.messages(
                        prompt=prompt,
                        answer=texts[cid],
                        dimension=d.name,
                        dimension_description=d.description or d.name,
                        scale=_scale_text(d),
                    ),
                    d,
                )
                for d in dimensions
            ]
        elif t.kind == "unary":
            (cid,) = texts
            cands = (cid,)
            asks = [ask(t.messages(prompt=prompt, answer=texts[cid], spans=spans))]
        elif t.kind == "steps" and steps is not None and item.id in steps:
            (cid,) = texts
            cands = (cid,)
            split = tuple(steps[item.id])
            numbered = "\n".join(f"{i}. {text}" for i, text in enumerate(split, start=1))
            asks = [ask(t.messages(prompt=prompt, steps=numbered), split=split)]
        elif t.kind == "criteria" and criteria is not None and item.id in criteria:
            (cid,) = texts
            tasks.append(criteria_task(item.id, cid, prompt, texts[cid], criteria[item.id], config))
            continue
        else:
            raise ValueError(f"the judge runner does not label {t.kind!r} items yet")
        key = _digest({**base, "item": item.id, "asks": [a.key for a in asks]})
        tasks.append(
            Task(
                key,
                item.id,
                t.kind,
                cands,
                asks,
                rubric if t.kind == "rubric" else None,
                asks[0].steps if t.kind == "steps" else None,
                texts=texts,
                span_categories=tuple(span_categories),
            )
        )
    return tasks


def criteria_text(cset: CriteriaSet) -> str:
    """The criteria as the template shows them: one ``- [id] text`` line each (no weights: the
    judge says what is met, the reward is computed from that)."""
    return "\n".join(f"- [{c.id}] {c.text}" for c in cset.criteria)


def criteria_task(
    item_id: str,
    candidate_id: str,
    prompt: str,
    answer: str,
    cset: CriteriaSet,
    config: JudgeConfig,
) -> Task:
    """One request grading ``answer`` against an approved criteria set (the project's runs and
    the reward functions of :mod:`.rubric_reward` both build it here)."""
    t = config.template
    if t.kind != "criteria":
        raise ValueError(f"template {t.label} is a {t.kind} template, not a criteria one")
    params = {"temperature": config.temperature, "max_tokens": config.max_tokens}
    base = {"template": t.label, "model": config.model, "params": params}
    messages = t.messages(prompt=prompt, answer=answer, criteria=criteria_text(cset))
    ask = Ask(_digest({**base, "messages": messages}), messages, criteria=tuple(cset.ids()))
    key = _digest({**base, "item": item_id, "asks": [ask.key], "criteria": cset.version})
    return Task(key, item_id, "criteria", (candidate_id,), [ask], criteria_version=cset.version)


# -- asking ------------------------------------------------------------------------------


def _parse(ask: Ask, kind: str, text: str) -> dict[str, Any]:
    reply = parse_reply(text, kind)
    if ask.dimension is not None:
        why = ask.dimension.check(reply["score"])
        if why is not None:
            raise Malformed(f"score: {why} (dimension {ask.dimension.name})")
    if ask.steps is not None:
        why = steps_problem(reply["verdicts"], len(ask.steps))
        if why is not None:
            raise Malformed(f"verdicts: {why}")
    if ask.criteria is not None:
        named, wanted = set(reply["met"]), set(ask.criteria)
        if named != wanted:
            missing, unknown = sorted(wanted - named), sorted(named - wanted)
            raise Malformed(
                "met: "
                + "; ".join(
                    ([f"missing {missing}"] if missing else [])
                    + ([f"not criteria of this item {unknown}"] if unknown else [])
                )
            )
    return reply


def steps_problem(verdicts: Sequence[int], n_steps: int) -> str | None:
    """Why step verdicts do not fit ``n_steps`` steps (the rule of ``StepsJudgment``)."""
    if len(verdicts) > n_steps:
        return f"{len(verdicts)} verdicts for {n_steps} steps"
    if -1 in verdicts:
        if verdicts.index(-1) != len(verdicts) - 1:
            return "verdicts go on after the first wrong step (-1); stop there"
    elif len(verdicts) != n_steps:
        return f"{len(verdicts)} verdicts for {n_steps} steps and no wrong step: one per step"
    return None


async def _ask_all(
    asks: Sequence[Ask],
    config: JudgeConfig,
    cache: SampleCache,
    stats: JudgeStats,
    failures: dict[str, str],
    on_done: Callable[[int], None] | None,
) -> None:
    import httpx

    url = chat_url(config.endpoint)
    kind = config.template.kind
    headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
    n = max(1, config.concurrency)
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    rng = random.Random(0)
    counters = SampleStats()  # request_chat counts requests and retries here
    queue: asyncio.Queue[Ask] = asyncio.Queue()
    for a in asks:
        queue.put_nowait(a)

    async def one(client: httpx.AsyncClient, a: Ask) -> None:
        body: dict[str, Any] = {
            "model": config.model,
            "messages": a.messages,
            "temperature": config.temperature,
            "max_tokens": config.max_tokens,
            "n": 1,
        }
        if config.json_mode:
            body["response_format"] = {"type": "json_object"}
        last = ""
        for _ in range(config.parse_retries + 1):
            try:
                answer = await request_chat(client, url, body, config.retry, counters, rng)
            except SamplingError as e:
                failures[a.key] = str(e)
                return
            usage = answer["usage"]
            stats.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            stats.completion_tokens += int(usage.get("completion_tokens") or 0)
            try:
                reply = _parse(a, kind, answer["text"])
            except Malformed as e:
                stats.malformed += 1
                last = str(e)
                continue
            cache.put(a.key, {"reply": reply, "usage": usage})
            return
        failures[a.key] = f"malformed reply, {config.parse_retries + 1} times; last: {last}"

    async def worker(client: httpx.AsyncClient) -> None:
        while True:
            try:
                a = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            await one(client, a)
            if on_done:
                on_done(1)

    timeout = httpx.Timeout(config.retry.timeout_s)
    async with httpx.AsyncClient(headers=headers, limits=limits, timeout=timeout) as client:
        await asyncio.gather(*(worker(client) for _ in range(n)))
    stats.requests += counters.requests
    stats.retries += counters.retries


# -- labels ------------------------------------------------------------------------------


def _record(config: JudgeConfig, verdicts: list[JudgeVerdict] | None = None) -> JudgeRecord:
    t = config.template
    return JudgeRecord(
        model=config.model,
        template=t.name,
        template_version=t.version,
        endpoint=config.endpoint,
        verdicts=verdicts,
    )


def _provenance(task: Task, record: JudgeRecord, now: datetime) -> Provenance:
    return Provenance(
        rater_id=judge_rater(record.model),
        source="ai",
        rubric_id=task.rubric[0] if task.rubric else None,
        rubric_version=task.rubric[1] if task.rubric else None,
        submitted_at=now,
        idempotency_key=task.idempotency_key,
        judge=record,
    )


def _winner(reply: dict[str, Any]) -> str:
    return {"A": "a", "B": "b", "tie": "tie"}[reply["winner"]]


def placed_spans(
    task: Task,
    replies: Sequence[dict[str, Any]],
    orders: Sequence[Sequence[str]],
    stats: JudgeStats,
) -> list[CritiqueSpan] | None:
    """The replies' quoted spans as offsets into their answers (``orders``: each reply's answers
    as shown, A first). A quote is placed only where it occurs exactly once in its answer; one
    not found, found more than once, or in a category the project lacks is dropped and counted,
    never guessed. The same span from both orders of a pair is one span."""
    found: dict[tuple[str, int, int, str, str], CritiqueSpan] = {}
    for reply, order in zip(replies, orders, strict=True):
        for sp in reply.get("spans") or []:
            letter = sp.get("answer") or "A"
            index = "AB".index(letter)
            if index >= len(order):
                stats.spans_not_found += 1
                continue
            cid = order[index]
            text, quote = task.texts.get(cid, ""), sp["quote"]
            start = text.find(quote)
            if start < 0:
                stats.spans_not_found += 1
            elif text.find(quote, start + 1) >= 0:
                stats.spans_ambiguous += 1
            elif sp["category"] not in task.span_categories:
                stats.spans_other_category += 1
            else:
                span = CritiqueSpan(
                    candidate_id=cid,
                    start=start,
                    end=start + len(quote),
                    category=sp["category"],
                    note=sp.get("note") or "",
                )
                found.setdefault(span.sort_key(), span)
    stats.spans += len(found)
    return list(found.values()) or None


def pairwise_outcome(
    task: Task,
    replies: list[dict[str, Any]],
    config: JudgeConfig,
    stats: JudgeStats | None = None,
) -> Outcome:
    """Both orders' replies as one label, or an order-inconsistent one (excluded)."""
    lo, hi = task.candidates
    verdicts = [
        JudgeVerdict(shown_order=order, winner=_winner(r), strength=r["strength"])
        for order, r in zip(((lo, hi), (hi, lo)), replies, strict=True)
    ]
    directions = [
        0 if v.winner == "tie" else (-1 if v.shown_order[v.winner == "b"] == lo else 1)
        for v in verdicts
    ]
    now = datetime.now(UTC)
    record = _record(config, verdicts)
    rationale = replies[0]["rationale"] or None
    spans = placed_spans(task, replies, ((lo, hi), (hi, lo)), stats or JudgeStats())
    if directions[0] == directions[1]:
        d = directions[0]
        strength = min(v.strength for v in verdicts)
        judgment = PairwiseJudgment(
            item_id=task.item_id,
            shown_order=(lo, hi),
            winner="tie" if d == 0 else ("a" if d < 0 else "b"),
            strength=strength,
            rationale=rationale,
            spans=spans,
            provenance=_provenance(task, record, now),
        )
        return Outcome(task, judgment)
    record = record.model_copy(update={"outcome": "order_inconsistent"})
    first = verdicts[0]
    judgment = PairwiseJudgment(
        item_id=task.item_id,
        shown_order=(lo, hi),
        winner=first.winner,
        strength=first.strength,
        rationale=rationale,
        spans=spans,
        provenance=_provenance(task, record, now),
    )
    said = "; ".join(f"shown {v.shown_order[0]} first: {v.winner} {v.strength}" for v in verdicts)
    return Outcome(task, judgment, exclusion_reason=f"judge order-inconsistent ({said})")


def outcome_of(
    task: Task,
    replies: list[dict[str, Any]],
    config: JudgeConfig,
    stats: JudgeStats | None = None,
) -> Outcome:
    if task.kind == "pairwise":
        return pairwise_outcome(task, replies, config, stats)
    now = datetime.now(UTC)
    prov = _provenance(task, _record(config), now)
    rationale = "\n".join(r["rationale"] for r in replies if r["rationale"]) or None
    (cid,) = task.candidates
    judgment: JudgmentBase
    if task.kind == "rubric":
        scores = {
            a.dimension.name: r["score"]
            for a, r in zip(task.asks, replies, strict=True)
            if a.dimension is not None
        }
        judgment = RubricJudgment(
            item_id=task.item_id,
            candidate_id=cid,
            scores=scores,
            rationale=rationale,
            provenance=prov,
        )
    elif task.kind == "criteria":
        assert task.criteria_version is not None
        judgment = CriteriaJudgment(
            item_id=task.item_id,
            candidate_id=cid,
            criteria_version=task.criteria_version,
            met=replies[0]["met"],
            rationale=rationale,
            provenance=prov,
        )
    elif task.kind == "steps":
        assert task.steps is not None
        judgment = StepsJudgment(
            item_id=task.item_id,
            candidate_id=cid,
            steps=list(task.steps),
            verdicts=replies[0]["verdicts"],
            rationale=rationale,
            provenance=prov,
        )
    else:
        judgment = UnaryJudgment(
            item_id=task.item_id,
            candidate_id=cid,
            label=replies[0]["acceptable"],
            rationale=rationale,
            spans=placed_spans(task, replies[:1], [(cid,)], stats or JudgeStats()),
            provenance=prov,
        )
    return Outcome(task, judgment)


def run_tasks(
    tasks: Sequence[Task],
    config: JudgeConfig,
    *,
    cache_path: Path | None,
    stats: JudgeStats | None = None,
    on_done: Callable[[int], None] | None = None,
) -> tuple[list[Outcome], JudgeStats]:
    """Ask what the cache does not hold; one outcome per task (a label or a failure)."""
    stats = stats or JudgeStats()
    started = time.monotonic()
    cache = SampleCache(cache_path)
    failures: dict[str, str] = {}
    try:
        unique = {a.key: a for t in tasks for a in t.asks}
        stats.requests_planned += len(unique)
        todo = [a for k, a in unique.items() if cache.get(k) is None]
        stats.cached_replies += len(unique) - len(todo)
        if on_done and len(unique) > len(todo):
            on_done(len(unique) - len(todo))
        if todo:
            run_coroutine(_ask_all(todo, config, cache, stats, failures, on_done))
    finally:
        cache.close()
        stats.wall_s += time.monotonic() - started
    outcomes = []
    for task in tasks:
        failed = [failures[a.key] for a in task.asks if a.key in failures]
        if failed:
            reason = failed[0]
            stats.failed += 1
            stats.failures.append(f"{task.item_id}: {reason}")
            outcomes.append(Outcome(task, failure=reason))
            continue
        replies = [cache.rows[a.key]["reply"] for a in task.asks]
        outcome = outcome_of(task, replies, config, stats)
        if outcome.exclusion_reason is not None:
            stats.order_inconsistent += 1
        else:
            stats.labels += 1
        outcomes.append(outcome)
    return outcomes, stats
