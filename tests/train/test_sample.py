"""``preflab sample`` against a real OpenAI-compatible HTTP server running in this process (the
client is httpx over a socket; nothing of it is mocked) and a tiny local causal LM."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from preflab.cli import app
from preflab.train.openai_stub import StubPolicy, StubServer
from preflab.train.sampling import (
    PromptRow,
    RetryPolicy,
    SamplingError,
    SamplingParams,
    chat_url,
    read_prompt_rows,
    sample,
)

PROMPTS = [
    PromptRow("add", "What is 2 + 3?", domain="math"),
    PromptRow(
        "cap", [{"role": "user", "content": "Capital of France?"}], choices=["Paris", "Rome"]
    ),
]
ANSWERS = {
    "What is 2 + 3?": ["answer: 5", "answer: 6 or so", "answer: 5"],
    "Capital of France?": ["Paris", "Rome"],
}
FAST = RetryPolicy(max_retries=3, base_s=0.01, cap_s=0.05, timeout_s=5)


def test_the_stub_is_a_real_openai_compatible_server():
    with StubServer(StubPolicy(ANSWERS)) as server:
        r = httpx.post(
            f"{server.url}/chat/completions",
            json={
                "model": "m",
                "messages": [{"role": "user", "content": "What is 2 + 3?"}],
                "seed": 1,
            },
        )
        assert r.status_code == 200
        body = r.json()
        assert body["choices"][0]["message"]["content"] == "answer: 6 or so"
        assert body["usage"] == {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}
        assert httpx.get(f"{server.url}/models").json()["data"][0]["id"] == "stub"


def test_endpoint_rows_seeds_and_token_accounting(tmp_path):
    policy = StubPolicy(ANSWERS)
    with StubServer(policy) as server:
        rows, stats = sample(
            PROMPTS,
            4,
            endpoint=server.url,
            model="policy-v1",
            params=SamplingParams(temperature=0.7, top_p=0.9, max_tokens=64),
            seed=10,
            cache_path=tmp_path / "cache.jsonl",
            retry=FAST,
        )
    assert len(rows) == 8 and policy.requests == 8 and stats.requests == 8
    first = rows[0]
    assert first["model"] == "policy-v1" and first["reward"] is None
    assert first["domains"] == ["math"] and rows[4]["domains"] == []
    meta = first["metadata"]
    assert meta["task_id"] == "add" and meta["sample_index"] == 0 and meta["seed"] == 10
    assert meta["sampling"] == {"temperature": 0.7, "top_p": 0.9, "max_tokens": 64}
    assert meta["source"] == "endpoint" and meta["finish_reason"] == "stop"
    assert rows[4]["metadata"]["choices"] == ["Paris", "Rome"]
    # seed 10 + i picks answer (10 + i) mod len: the server's scripted policy
    assert [r["response"] for r in rows[:4]] == ["answer: 6 or so", "answer: 5", "answer: 5"] + [
        "answer: 6 or so"
    ]
    assert [r["response"] for r in rows[4:]] == ["Paris", "Rome", "Paris", "Rome"]
    assert (
        stats.prompt_tokens == sum(r["metadata"]["tokens"]["prompt"] for r in rows) == 4 * 5 + 4 * 3
    )
    assert stats.completion_tokens == sum(r["metadata"]["tokens"]["completion"] for r in rows)
    assert stats.completion_tokens == (4 + 2 + 2 + 4) + 4


def test_requests_run_concurrently():
    policy = StubPolicy(ANSWERS, delay_s=0.2)
    with StubServer(policy) as server:
        _, stats = sample(PROMPTS, 8, endpoint=server.url, model="m", concurrency=8, retry=FAST)
    assert policy.max_in_flight >= 4
    assert stats.wall_s < 16 * 0.2 / 2  # sequential would take 3.2 s


def test_retries_429_and_5xx_with_backoff():
    for status in (429, 500, 503):
        policy = StubPolicy(ANSWERS, fail_first=2, fail_status=status)
        with StubServer(policy) as server:
            rows, stats = sample(PROMPTS, 3, endpoint=server.url, model="m", retry=FAST)
        assert len(rows) == 6
        assert policy.failures == 4 and stats.retries == 4 and stats.requests == 10


def test_gives_up_after_the_retries_and_keeps_what_it_drew(tmp_path):
    policy = StubPolicy(ANSWERS, fail_first=100)
    with StubServer(policy) as server:
        with pytest.raises(SamplingError, match="gave up after 4 attempts: HTTP 429"):
            sample(PROMPTS, 2, endpoint=server.url, model="m", retry=FAST)
    assert policy.requests == 4 * 4


def test_a_client_error_is_not_retried():
    policy = StubPolicy(ANSWERS, fail_first=1, fail_status=400)
    with StubServer(policy) as server:
        with pytest.raises(SamplingError, match="HTTP 400"):
            sample(PROMPTS, 1, endpoint=server.url, model="m", retry=FAST)
    assert policy.requests == 2  # one per sample, none again


def test_timeouts_are_retried_then_reported():
    policy = StubPolicy(ANSWERS, delay_s=0.5)
    retry = RetryPolicy(max_retries=1, base_s=0.01, timeout_s=0.1)
    with StubServer(policy) as server:
        with pytest.raises(SamplingError, match="ReadTimeout"):
            sample(PROMPTS[:1], 1, endpoint=server.url, model="m", retry=retry)
    assert policy.requests == 2


def test_the_cache_resumes_and_is_keyed_by_prompt_params_and_index(tmp_path):
    cache = tmp_path / "c.jsonl"
    policy = StubPolicy(ANSWERS)
    with StubServer(policy) as server:

        def run(n, **kw):
            before = policy.requests
            rows, stats = sample(
                PROMPTS, n, endpoint=server.url, model="m", cache_path=cache, retry=FAST, **kw
            )
            return rows, stats, policy.requests - before

        rows, _, drawn = run(4)
        assert drawn == 8
        again, stats, drawn = run(4)
        assert drawn == 0 and stats.cached == 8 and again == rows
        _, _, drawn = run(6)  # two more indices per prompt
        assert drawn == 4
        _, _, drawn = run(6, params=SamplingParams(temperature=0.5))  # other params: misses
        assert drawn == 12
        _, _, drawn = run(6, seed=1)  # another base seed: misses
        assert drawn == 12
        # a run killed mid-write leaves a torn last line: ignored, that sample drawn again
        lines = cache.read_text().splitlines()
        cache.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:20])
        _, stats, drawn = run(6, seed=1)
        assert drawn == 1 and stats.cached == 11


def test_chat_url_accepts_the_usual_spellings():
    for given in ("http://h:8000", "http://h:8000/", "http://h:8000/v1", "http://h:8000/v1/"):
        assert chat_url(given) == "http://h:8000/v1/chat/completions"
    assert chat_url("http://h/v1/chat/completions") == "http://h/v1/chat/completions"


def test_bad_arguments():
    with pytest.raises(SamplingError, match="exactly one"):
        sample(PROMPTS, 1)
    with pytest.raises(SamplingError, match="--model"):
        sample(PROMPTS, 1, endpoint="http://127.0.0.1:9")


def test_prompt_file_errors_name_the_line(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(
        '{"task_id": "a", "prompt": "x"}\n{"task_id": "a", "prompt": "y"}\n{"prompt": "z"}\n'
        '{"id": "b", "prompt": ""}\n'
    )
    with pytest.raises(SamplingError) as e:
        read_prompt_rows(path)
    text = str(e.value)
    assert f"{path}:2: task_id: duplicate" in text and f"{path}:3: task_id: missing" in text
    assert f"{path}:4: prompt" in text


def test_cli_sample_against_the_endpoint(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"task_id": "add", "prompt": "What is 2 + 3?", "domain": "math"}\n')
    out = tmp_path / "rollouts.jsonl"
    policy = StubPolicy(ANSWERS)
    with StubServer(policy) as server:
        args = ["sample", str(prompts), "--n", "3", "--endpoint", server.url, "--model", "m"]
        result = CliRunner().invoke(app, [*args, "--out", str(out), "--seed", "0"])
        assert result.exit_code == 0, result.output
        assert "wrote 3 rollouts" in result.output
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r["response"] for r in rows] == ["answer: 5", "answer: 6 or so", "answer: 5"]
        assert (tmp_path / "rollouts.jsonl.cache.jsonl").exists()
        result = CliRunner().invoke(app, [*args, "--out", str(out), "--json"])
        assert json.loads(result.output)["cached"] == 3 and policy.requests == 3


def test_cli_sample_failure_exits_1_and_says_how_to_resume(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"task_id": "add", "prompt": "What is 2 + 3?"}\n')
    with StubServer(StubPolicy(ANSWERS, fail_first=100, fail_status=500)) as server:
        result = CliRunner().invoke(
            app,
            ["sample", str(prompts), "--n", "2", "--endpoint", server.url, "--model", "m"]
            + ["--retries", "1", "--backoff", "0.01", "--out", str(tmp_path / "r.jsonl")],
        )
    assert result.exit_code == 1
    assert "2 of 2 samples failed" in result.output and "run again to resume" in result.output
    assert not (tmp_path / "r.jsonl").exists()


def test_local_model_samples_are_seeded_and_counted(policy_dir: Path, tmp_path):
    prompts = [PromptRow("p", "the answer is good"), PromptRow("q", "a response")]
    params = SamplingParams(temperature=1.0, max_tokens=6)
    rows, stats = sample(prompts, 3, local=policy_dir, params=params, cache_path=tmp_path / "c")
    assert len(rows) == 6 and stats.requests == 6
    assert all(r["metadata"]["source"] == "local" for r in rows)
    assert all(0 < r["metadata"]["tokens"]["completion"] <= 6 for r in rows)
    assert all(r["metadata"]["tokens"]["prompt"] >= 2 for r in rows)
    assert rows[0]["model"] == policy_dir.name
    assert len({r["response"] for r in rows[:3]}) > 1  # three seeds, not one answer three times
    # the same seeds without the cache: the same samples
    again, _ = sample(prompts, 3, local=policy_dir, params=params)
    assert [r["response"] for r in again] == [r["response"] for r in rows]


def test_sampling_from_a_thread_whose_event_loop_is_running(tmp_path):
    """A caller inside a running event loop (a notebook, Playwright's sync API, a web handler):
    ``asyncio.run`` would refuse; the sampler runs its loop on a thread of its own."""
    import asyncio

    policy = StubPolicy(ANSWERS)

    async def caller():
        return sample(PROMPTS, 2, endpoint=server.url, model="m", retry=FAST)

    with StubServer(policy) as server:
        rows, stats = asyncio.run(caller())
    assert len(rows) == 4 and stats.requests == 4
