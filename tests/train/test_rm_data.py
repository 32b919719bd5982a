"""What ``rm train`` does to the data before TRL sees it: encode, truncate, split, gate, settings.

Regression tests for the two TRL pitfalls of issue 12 §2: ``RewardConfig(max_length=...)``
silently *drops* longer pairs (we truncate and count), and TRL's defaults (bf16, gradient
checkpointing) are wrong for a CPU (we pick settings by device).
"""

from __future__ import annotations

import random

import pytest

from preflab.train.data import Pair, PairDataError, length_parity, read_export, split_by_prompt
from preflab.train.encode import encode, token_length

pytestmark = pytest.mark.train


def test_a_short_pair_encodes_as_prompt_then_response_then_eos(tokenizer):
    enc = encode(tokenizer, "Rewrite the sentence", "Please let me know.", max_length=64)
    expected = tokenizer("Rewrite the sentence", "Please let me know.")["input_ids"] + [
        tokenizer.eos_token_id
    ]
    assert enc.ids == expected and not enc.truncated


def test_truncation_cuts_the_prompt_start_first_and_keeps_the_whole_answer(tokenizer):
    prompt = " ".join(["the"] * 50) + " Rewrite the sentence"
    enc = encode(tokenizer, prompt, "Please let me know.", max_length=12)
    assert enc.truncated and len(enc.ids) == 12
    text = tokenizer.decode(enc.ids)
    assert text.endswith("Rewrite the sentence Please let me know . <eos>")


def test_an_answer_longer_than_the_budget_keeps_its_start_and_the_eos(tokenizer):
    answer = "Please let me know " * 40
    enc = encode(tokenizer, "Rewrite", answer, max_length=10)
    assert enc.truncated and len(enc.ids) == 10
    assert enc.ids[-1] == tokenizer.eos_token_id
    assert tokenizer.decode(enc.ids[:4]) == "Please let me know"


def test_max_prompt_length_keeps_the_prompts_last_tokens_and_the_whole_answer(tokenizer):
    prompt = "Human: tell me a story Assistant: once upon a time Human: Rewrite the sentence"
    capped = encode(tokenizer, prompt, "Please let me know.", max_length=64, max_prompt_length=3)
    assert capped.truncated
    assert capped.ids == encode(tokenizer, "Rewrite the sentence", "Please let me know.", 64).ids
    assert len(tokenizer(prompt)["input_ids"]) > 3  # there was something to cut
    whole = encode(tokenizer, prompt, "Please let me know.", max_length=64, max_prompt_length=500)
    assert not whole.truncated
    assert whole.ids == encode(tokenizer, prompt, "Please let me know.", max_length=64).ids


def test_max_prompt_length_then_max_length_both_apply(tokenizer):
    prompt = " ".join(["the"] * 50) + " Rewrite the sentence"
    # the cap leaves 3 prompt tokens; max_length 8 then takes one more from the prompt's start
    enc = encode(tokenizer, prompt, "Please let me know.", max_length=8, max_prompt_length=3)
    assert enc.truncated and len(enc.ids) == 8 and enc.ids[-1] == tokenizer.eos_token_id
    assert enc.ids == encode(tokenizer, "Rewrite the sentence", "Please let me know.", 8).ids
    assert tokenizer.decode(enc.ids) == "the sentence Please let me know . <eos>"


class CountingTokenizer:
    """A tokenizer that counts its calls (everything else is the wrapped tokenizer's)."""

    def __init__(self, tokenizer):
        self.tokenizer, self.calls = tokenizer, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.tokenizer(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)


def test_a_pair_that_fits_costs_one_tokenizer_call_as_in_trl(tokenizer):
    counting = CountingTokenizer(tokenizer)
    encoded = [encode(counting, f"prompt {k}", "a short answer", 64) for k in range(20)]
    assert counting.calls <= 20 + 1  # one per pair, plus once to ask whether EOS is appended
    assert [e.ids for e in encoded] == [
        encode(tokenizer, f"prompt {k}", "a short answer", 64).ids for k in range(20)
    ]


def test_trl_drops_long_pairs_but_preflab_keeps_and_counts_them(
    tokenizer, export_dir, tmp_path, make_tiny_reward_model
):
    """TRL 1.x filters pairs over ``max_length`` (the pitfall); ``tokenize_pairs`` keeps them all."""
    import datasets
    from trl import RewardTrainer

    from preflab.train.reward_model import RMSettings, reward_config, tokenize_pairs

    pairs = read_export(export_dir).pairs
    max_length = 48
    lengths = token_length(tokenizer)
    # +1: the EOS both TRL and preflab append
    too_long = sum(
        lengths(p.prompt + p.chosen) + 1 > max_length
        or lengths(p.prompt + p.rejected) + 1 > max_length
        for p in pairs
    )
    assert 0 < too_long < len(pairs)
    settings = RMSettings(max_length=max_length, max_steps=1, progress=False)
    model = make_tiny_reward_model
    raw = datasets.Dataset.from_list(
        [{"prompt": p.prompt, "chosen": p.chosen, "rejected": p.rejected} for p in pairs]
    )
    trl_own = RewardTrainer(
        model=model(),
        args=reward_config(tmp_path / "a", settings),
        train_dataset=raw,
        processing_class=tokenizer,
    )
    assert len(trl_own.train_dataset) < len(pairs)  # TRL alone loses pairs

    tokenized = tokenize_pairs(tokenizer, pairs, max_length, margin_scale=1 / 3)
    ours = RewardTrainer(
        model=model(),
        args=reward_config(tmp_path / "b", settings),
        train_dataset=datasets.Dataset.from_dict(tokenized.rows),
        processing_class=tokenizer,
    )
    assert len(ours.train_dataset) == len(pairs)
    assert tokenized.truncated_pairs >= too_long
    assert (
        max(map(len, tokenized.rows["chosen_ids"] + tokenized.rows["rejected_ids"])) <= max_length
    )


def test_margin_is_the_resolved_strength_scaled(tokenizer):
    from preflab.train.reward_model import tokenize_pairs

    pairs = [Pair("p", "a", "b", margin=3.0), Pair("q", "c", "d", margin=1.5)]
    rows = tokenize_pairs(tokenizer, pairs, 32, margin_scale=1 / 3).rows
    assert rows["margin"] == pytest.approx([1.0, 0.5])
    assert "margin" not in tokenize_pairs(tokenizer, [Pair("p", "a", "b")], 32, 1 / 3).rows


def test_cpu_settings_turn_off_trl_bf16_and_gradient_checkpointing_defaults(tmp_path):
    import torch
    from trl import RewardConfig

    from preflab.train.reward_model import RMSettings, reward_config

    if torch.cuda.is_available():
        pytest.skip("checks the CPU settings")
    trl_default = RewardConfig(output_dir=str(tmp_path / "trl"), use_cpu=True)
    assert trl_default.bf16 and trl_default.gradient_checkpointing  # the ~24x slower CPU defaults
    ours = reward_config(tmp_path, RMSettings())
    assert not ours.bf16 and not ours.gradient_checkpointing and ours.use_cpu


@pytest.mark.parametrize(
    ("device", "expected"),
    [
        ("cpu", {"bf16": False, "use_cpu": True, "dataloader_num_workers": 0}),
        ("cuda-bf16", {"bf16": True, "use_cpu": False, "dataloader_num_workers": 2}),
        ("cuda-no-bf16", {"bf16": False, "use_cpu": False, "dataloader_num_workers": 2}),
    ],
)
def test_device_settings_use_bf16_only_on_a_gpu_that_supports_it(device, expected):
    from preflab.train.reward_model import Device, device_settings

    chosen = {
        "cpu": Device(cuda=False),
        "cuda-bf16": Device(cuda=True, bf16_supported=True),
        "cuda-no-bf16": Device(cuda=True, bf16_supported=False),
    }[device]
    settings = device_settings(chosen)
    assert {k: settings[k] for k in expected} == expected
    assert (
        settings["fp16"] is False
    )  # never: fp16 needs loss scaling this small model does not repay
    checkpointing = [k for k in settings if k.endswith("_checkpointing")]
    assert checkpointing and not any(settings[k] for k in checkpointing)


def test_device_detect_matches_torch():
    import torch

    from preflab.train.reward_model import Device

    detected = Device.detect()
    assert detected.cuda == torch.cuda.is_available()
    assert detected.bf16_supported == (detected.cuda and torch.cuda.is_bf16_supported())


def _pairs(n_prompts: int, per_prompt: int) -> list[Pair]:
    return [
        Pair(f"prompt {i}", f"good {i}.{k}", f"bad {i}.{k}")
        for i in range(n_prompts)
        for k in range(per_prompt)
    ]


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_split_by_prompt_puts_no_prompt_on_both_sides(seed):
    pairs = _pairs(40, 3)
    random.Random(seed).shuffle(pairs)
    train, held = split_by_prompt(pairs, 0.2, seed)
    assert not {p.prompt for p in train} & {p.prompt for p in held}
    assert len(train) + len(held) == len(pairs)
    assert len({p.prompt for p in held}) == 8  # 20 % of 40 prompts


def test_split_is_reproducible_whatever_the_row_order_and_depends_on_the_seed():
    pairs = _pairs(30, 2)

    def held(rows, seed):
        return {p.prompt for p in split_by_prompt(rows, 0.2, seed)[1]}

    assert held(pairs, 3) == held(list(reversed(pairs)), 3)
    assert held(pairs, 3) != held(pairs, 4)


def test_split_needs_two_prompts():
    with pytest.raises(PairDataError, match="at least 2"):
        split_by_prompt(_pairs(1, 5), 0.2, 0)


def test_length_parity_keeps_ratios_within_bounds_inclusive():
    words = lambda n: " ".join(["w"] * n)  # noqa: E731
    pairs = [
        Pair("p", words(6), words(7)),  # 0.857: kept
        Pair("p", words(6), words(5)),  # 1.20: kept (bound included)
        Pair("p", words(5), words(6)),  # 0.833: too short
        Pair("p", words(10), words(5)),
    ]  # 2.0: too long
    assert length_parity(pairs, lambda t: len(t.split()), (0.85, 1.20)) == pairs[:2]


def test_length_balance_repeats_the_rarer_side_until_length_decides_nothing():
    from preflab.train.data import length_balanced

    words = lambda n: " ".join(["w"] * n)  # noqa: E731
    n_words = lambda t: len(t.split())  # noqa: E731
    shorter_wins = [Pair(f"p{i}", words(3), words(9)) for i in range(7)]
    longer_wins = [Pair(f"q{i}", words(9), words(3)) for i in range(2)]
    tie = [Pair("t", words(4), words(4))]
    balanced = length_balanced([*shorter_wins, *longer_wins, *tie], n_words, seed=0)
    longer = [p for p in balanced if n_words(p.chosen) > n_words(p.rejected)]
    shorter = [p for p in balanced if n_words(p.chosen) < n_words(p.rejected)]
    assert len(longer) == len(shorter) == 7
    assert set(longer) == set(longer_wins) and sorted(shorter, key=str) == sorted(
        shorter_wins, key=str
    )
    assert balanced.count(tie[0]) == 1
    assert balanced == length_balanced([*shorter_wins, *longer_wins, *tie], n_words, seed=0)


def test_length_balance_at_half_strength_closes_half_the_gap():
    from preflab.train.data import length_balanced

    words = lambda n: " ".join(["w"] * n)  # noqa: E731
    n_words = lambda t: len(t.split())  # noqa: E731
    shorter_wins = [Pair(f"p{i}", words(3), words(9)) for i in range(9)]
    longer_wins = [Pair(f"q{i}", words(9), words(3)) for i in range(3)]
    pairs = [*shorter_wins, *longer_wins]
    half = length_balanced(pairs, n_words, seed=0, strength=0.5)
    assert sum(n_words(p.chosen) > n_words(p.rejected) for p in half) == 3 + 3  # gap 6 -> 3
    assert sum(n_words(p.chosen) < n_words(p.rejected) for p in half) == 9
    assert sorted(length_balanced(pairs, n_words, seed=0, strength=0.0), key=str) == sorted(
        pairs, key=str
    )
    with pytest.raises(ValueError, match="within 0..1"):
        length_balanced(pairs, n_words, seed=0, strength=1.5)


def test_length_balance_leaves_one_sided_data_alone():
    from preflab.train.data import length_balanced

    pairs = [Pair(f"p{i}", "a", "a b") for i in range(3)]
    assert length_balanced(pairs, lambda t: len(t.split()), seed=0) == pairs


def test_read_export_says_what_to_do_without_a_manifest(tmp_path):
    with pytest.raises(PairDataError, match="no manifest.json.*preflab export"):
        read_export(tmp_path)


def test_warmup_is_a_share_of_the_steps(tmp_path):
    """``--warmup 0.1``: the first tenth of the steps warm the learning rate up from 0 (a float
    below 1 is a share of the steps in transformers 5; an int would be a step count)."""
    from preflab.train.reward_model import RMSettings, reward_config

    assert reward_config(tmp_path, RMSettings(warmup=0.1)).get_warmup_steps(120) == 12
    assert reward_config(tmp_path, RMSettings(warmup=0.0)).get_warmup_steps(120) == 0


def test_share_of_prompts_keeps_whole_prompts_and_is_seeded():
    from preflab.train.data import share_of_prompts

    pairs = [Pair(f"prompt {k % 10}", f"a{k}", f"b{k}") for k in range(40)]
    half = share_of_prompts(pairs, 0.5, seed=3)
    prompts = {p.prompt for p in half}
    assert len(prompts) == 5 and half == [p for p in pairs if p.prompt in prompts]
    shuffled = random.Random(0).sample(pairs, len(pairs))
    assert {p.prompt for p in share_of_prompts(shuffled, 0.5, seed=3)} == prompts
    assert {p.prompt for p in share_of_prompts(pairs, 0.5, seed=4)} != prompts
    assert len({p.prompt for p in share_of_prompts(pairs, 0.01, seed=3)}) == 1
