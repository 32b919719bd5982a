"""The verifiers as trainer reward functions, each called the way its framework calls it."""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import preflab.verify.adapters as adapters
from preflab.verify import verify
from preflab.verify.adapters import task_from_label

from .conftest import ADD_TESTS, CORRECT

pytestmark = pytest.mark.usefixtures("sandbox")  # code verification runs sandboxed

ADAPTERS_FILE = Path(adapters.__file__)
VERL_REWARD_FILE = ADAPTERS_FILE.with_name("verl_reward.py")


@pytest.fixture
def labels(tmp_path: Path) -> dict[str, str]:
    db = tmp_path / "n.sqlite"
    with sqlite3.connect(db) as c:
        c.executescript("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2), (3);")
    return {
        "math": r"\frac{1}{2}",
        "sql": json.dumps(
            {
                "task_id": "sum",
                "kind": "sql",
                "fixture": str(db),
                "reference_query": "SELECT SUM(x) FROM t",
            }
        ),
        "code": json.dumps(
            {
                "task_id": "add",
                "kind": "code",
                "files": {"tests/test_add.py": ADD_TESTS},
                "f2p": ["tests/test_add.py::test_add"],
                "p2p": ["tests/test_add.py::test_zero"],
            }
        ),
    }


GOOD = {
    "math": r"so \boxed{0.5}",
    "sql": "```sql\nSELECT 6\n```",
    "code": f"```python\n{CORRECT}```",
}
BAD = {
    "math": r"\boxed{2}",
    "sql": "SELECT 5",
    "code": "```python\ndef add(a, b):\n    return 0\n```",
}


def load_by_path(name: str, path: Path = ADAPTERS_FILE):
    """How verl (``custom_reward_function.path``) and OpenRLHF (``--remote_rm_url x.py``) load a
    reward file: by its path, outside any package."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_labels_name_a_task_or_a_math_answer(labels):
    assert task_from_label(labels["math"]).kind == "math"
    assert task_from_label(labels["sql"]).kind == "sql"
    assert task_from_label(json.loads(labels["code"])).kind == "code"


def test_trl_reward_function_scores_text_and_conversational_completions(labels):
    kinds = list(labels)
    completions = [GOOD[k] for k in kinds] + [
        [{"role": "assistant", "content": BAD[k]}] for k in kinds
    ]
    rewards = adapters.trl_reward_func(
        prompts=["p"] * 6,
        completions=completions,
        completion_ids=[[0]] * 6,
        trainer_state=None,
        verify_task=[labels[k] for k in kinds] * 2,
    )
    assert rewards == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]


def test_verl_compute_score_called_as_verl_calls_it(labels):
    compute_score = load_by_path("custom_module").compute_score
    for kind in labels:
        good = compute_score(
            data_source=f"preflab/{kind}",
            solution_str=GOOD[kind],
            ground_truth=labels[kind],
            extra_info={"index": 0},
        )
        bad = compute_score(
            data_source=f"preflab/{kind}",
            solution_str=BAD[kind],
            ground_truth=labels[kind],
            extra_info={"index": 0},
        )
        assert (good["score"], bad["score"]) == (1.0, 0.0), kind
    via_extra = compute_score("preflab/sql", GOOD["sql"], "ignored", {"verify_task": labels["sql"]})
    assert via_extra["score"] == 1.0


@pytest.mark.parametrize(
    "reward_file, extra_info, tower",
    [
        (VERL_REWARD_FILE, {"style": "rule", "verifier": "preflab.verify:math"}, "9^{9^{9^{9}}}"),
        (ADAPTERS_FILE, {"index": 0}, "10^{10^{10^{10}}}"),
    ],
    ids=["verl_reward", "adapters"],
)
def test_verl_on_an_executor_thread_stops_a_power_tower_at_the_limit(
    labels, reward_file, extra_info, tower
):
    """verl's reward manager calls ``compute_score`` from a thread pool, where math-verify's
    ``signal.alarm`` timeout cannot run (it used to be off there: > 150 s for one answer). The
    judge worker is killed at the task's limit instead: 5 s, a bare math label's default."""
    compute_score = load_by_path("custom_module", reward_file).compute_score
    with ThreadPoolExecutor(max_workers=2) as executor:
        warm = executor.submit(
            compute_score, "preflab/math", GOOD["math"], labels["math"], extra_info
        )
        assert warm.result()["score"] == 1.0  # a ready worker: its start is not the answer's cost
        started = time.monotonic()
        hostile = executor.submit(
            compute_score, "preflab/math", rf"so \boxed{{{tower}}}", labels["math"], extra_info
        )
        assert hostile.result()["score"] == 0.0
        assert time.monotonic() - started < 5 + 3.0
        honest = executor.submit(
            compute_score, "preflab/math", GOOD["math"], labels["math"], extra_info
        )
        assert honest.result()["score"] == 1.0  # a fresh worker took the killed one's place


def test_openrlhf_remote_reward_function(labels):
    reward_func = load_by_path("reward_func").reward_func
    kinds = list(labels)
    prompts = [f"<user>task {k}</user>" for k in kinds] * 2
    responses = [GOOD[k] for k in kinds] + [BAD[k] for k in kinds]
    out = reward_func(
        [p + r for p, r in zip(prompts, responses)], prompts, [labels[k] for k in kinds] * 2
    )
    assert out["rewards"].tolist() == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert out["scores"].tolist() == out["rewards"].tolist()


@pytest.mark.train
def test_two_grpo_steps_use_the_verifier_as_reward(labels, tmp_path):
    """A real ``GRPOTrainer`` (tiny Llama from a config, word-level tokenizer built here, CPU)
    runs 2 steps with the verifier as its only reward function."""
    pytest.importorskip("trl")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import datasets
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast
    from trl import GRPOConfig, GRPOTrainer

    prompts = ["What is one half? Answer: ", "Sum the column: ", "Write add(a, b): "]
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(
        prompts + list(GOOD.values()),
        trainers.WordLevelTrainer(special_tokens=["<unk>", "<pad>", "<eos>", "<bos>"]),
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        pad_token="<pad>",
        eos_token="<eos>",
        bos_token="<bos>",
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=2,
            num_key_value_heads=2,
            max_position_embeddings=128,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
            bos_token_id=tokenizer.bos_token_id,
        )
    )
    dataset = datasets.Dataset.from_dict({"prompt": prompts, "verify_task": list(labels.values())})

    calls = []

    def recorded(prompts, completions, verify_task, **kwargs):
        rewards = adapters.trl_reward_func(prompts, completions, verify_task, **kwargs)
        calls.append((list(completions), list(verify_task), rewards))
        return rewards

    recorded.__name__ = "preflab_verify"
    args = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=8,
        report_to=[],
        use_cpu=True,
        bf16=False,
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[recorded],
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    trainer.train()
    assert trainer.state.global_step == 2
    assert calls, "the verifier was never called"
    for completions, tasks, rewards in calls:  # the rewards are exactly the verifier's verdicts
        assert rewards == [verify(task_from_label(t), c).reward for c, t in zip(completions, tasks)]
    logged = [log for log in trainer.state.log_history if "rewards/preflab_verify/mean" in log]
    assert len(logged) == 2
