"""One rule for turning (prompt, response) into reward-model input ids, used by training,
evaluation, scoring, best-of-N and RL alike.

TRL's ``RewardTrainer`` *drops* every pair longer than ``max_length`` (measured here: 20.5 % of
hh-rlhf harmless at 256 tokens). We tokenize ourselves and hand TRL ready ``chosen_ids`` /
``rejected_ids``, truncating instead: the prompt loses tokens from its start first (its end is
closest to the answer), then the response from its end; the special tokens always survive.
``max_prompt_length`` caps the prompt alone (its last tokens kept) before that rule applies.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any


@dataclass(frozen=True, slots=True)
class Encoded:
    ids: list[int]
    truncated: bool


def _append_eos(tokenizer: Any) -> bool:
    """Causal-LM tokenizers add no end marker of their own: append EOS, as TRL does."""
    return tokenizer.eos_token_id is not None and _adds_no_eos(tokenizer, tokenizer.eos_token_id)


@lru_cache(maxsize=8)
def _adds_no_eos(tokenizer: Any, eos: int) -> bool:
    """Asked once per tokenizer and EOS, not once per text (it costs a tokenizer call)."""
    return tokenizer("x")["input_ids"][-1] != eos


def _whole(tokenizer: Any, prompt: str, response: str, eos: bool) -> list[int]:
    ids = tokenizer(prompt, response)["input_ids"] if prompt else tokenizer(response)["input_ids"]
    return [*ids, tokenizer.eos_token_id] if eos else ids


def _offsets(tokenizer: Any, text: str) -> list[tuple[int, int]]:
    return (
        tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        if text
        else []
    )


def last_tokens(tokenizer: Any, text: str, n: int) -> str:
    """``text`` from the start of its ``n``-th last token (all of it when it has no more)."""
    offsets = _offsets(tokenizer, text)
    if len(offsets) <= n:
        return text
    return text[offsets[len(offsets) - n][0] :] if n > 0 else ""


def encode(
    tokenizer: Any,
    prompt: str,
    response: str,
    max_length: int,
    max_prompt_length: int | None = None,
) -> Encoded:
    """Input ids for ``prompt`` + ``response`` of at most ``max_length`` tokens.

    Cuts are made at token boundaries of the text (character offsets), and the tokenizer then
    adds its own special tokens, so a short pair encodes exactly as ``tokenizer(prompt, response)``.
    With ``max_prompt_length`` the prompt keeps at most its last that many tokens (a cut counts
    as truncation).
    """
    if max_prompt_length is not None and prompt:
        kept = last_tokens(tokenizer, prompt, max_prompt_length)
        if kept != prompt:
            return Encoded(encode(tokenizer, kept, response, max_length).ids, True)
    eos = _append_eos(tokenizer)
    whole = _whole(tokenizer, prompt, response, eos)
    if len(whole) <= max_length:  # most pairs: one tokenizer call, as TRL's own tokenizing
        return Encoded(whole, False)
    p, r = _offsets(tokenizer, prompt), _offsets(tokenizer, response)
    budget = max_length - tokenizer.num_special_tokens_to_add(pair=bool(p)) - int(eos)
    if budget < 1:
        raise ValueError(
            f"max_length {max_length} leaves no room for text with this tokenizer's special tokens"
        )
    truncated = len(p) + len(r) > budget
    if truncated:
        keep_prompt = max(0, budget - len(r))
        prompt = prompt[p[len(p) - keep_prompt][0] :] if keep_prompt else ""
        keep_response = budget - keep_prompt
        if keep_response < len(r):
            response = response[: r[keep_response - 1][1]]
    room = max_length - int(eos)
    if prompt:
        ids = tokenizer(prompt, response, truncation="longest_first", max_length=room)["input_ids"]
    else:
        ids = tokenizer(response, truncation=True, max_length=room)["input_ids"]
    if eos:
        ids = [*ids, tokenizer.eos_token_id]
    return Encoded(ids, truncated)


def token_length(tokenizer: Any) -> Any:
    """Length of a text in this tokenizer's tokens (for strata, baselines and parity)."""
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False))
