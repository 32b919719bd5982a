"""Monitors of an RL run: language drift, zero-variance groups, entropy, response length.

RLVR's known failure modes (issue 29) show in a handful of numbers per step; TRL logs some of
them (``kl``, ``entropy``, ``completions/mean_length``, ``frac_reward_zero_std``) and preflab
adds **language drift**. The functions here are the definitions, tested on constructed
completions and logits; :mod:`.rl` logs them per step and writes them in the RL report.

**Language drift** (:func:`language_drift`): the share of a completion's *letters* written in a
script other than the prompt's dominant script. A letter is a character of Unicode category
``L*``; its script is the first word of its Unicode name (``LATIN``,
``CYRILLIC``, ``GREEK``, ``ARABIC``, ``HEBREW``, ``DEVANAGARI``, ``HANGUL``, ``THAI``, ...), with
``CJK`` ideographs, ``HIRAGANA`` and ``KATAKANA`` counted as one script (``HAN``: Japanese mixes
the three) and ``FULLWIDTH`` / ``HALFWIDTH`` forms as their base script; mathematical alphanumerics and modifier letters are notation and
do not count. Digits, punctuation,
symbols and whitespace are not letters and never count, so code, numbers and LaTeX written in an
English answer to an English prompt score 0. A prompt without letters has no script: its
completions score 0. This is a script measure, not language identification: French answering an
English prompt is not drift by it (both Latin); Russian or Chinese answering it is.
"""

from __future__ import annotations

import math
import unicodedata
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

#: first words of Unicode character names counted as the same script
SCRIPT_ALIASES = {"CJK": "HAN", "HIRAGANA": "HAN", "KATAKANA": "HAN", "IDEOGRAPHIC": "HAN"}
#: name words that qualify a form rather than name a script
_QUALIFIERS = {"FULLWIDTH", "HALFWIDTH"}
#: letters of notation, not of a language: never counted
_NOTATION = {"MATHEMATICAL", "MODIFIER", "DOUBLE-STRUCK", "SCRIPT", "BLACK-LETTER"}


@lru_cache(maxsize=4096)
def script_of(ch: str) -> str | None:
    """The script of a letter (see the module docstring), None for anything that is not one."""
    if not unicodedata.category(ch).startswith("L"):
        return None
    words = [w for w in unicodedata.name(ch, "").split() if w not in _QUALIFIERS]
    if not words or words[0] in _NOTATION:
        return None
    return SCRIPT_ALIASES.get(words[0], words[0])


def script_counts(text: str) -> Counter[str]:
    return Counter(s for s in map(script_of, text) if s is not None)


def dominant_script(text: str) -> str | None:
    """The script most of ``text``'s letters are written in (ties: alphabetical), or None."""
    counts = script_counts(text)
    if not counts:
        return None
    return min(counts, key=lambda s: (-counts[s], s))


def language_drift(prompt: str, completion: str) -> float:
    """Share of the completion's letters outside the prompt's dominant script (0 without
    letters on either side)."""
    script = dominant_script(prompt)
    counts = script_counts(completion)
    letters = sum(counts.values())
    if script is None or letters == 0:
        return 0.0
    return (letters - counts[script]) / letters


def mean_language_drift(prompts: Sequence[str], completions: Sequence[str]) -> float:
    """The mean of :func:`language_drift` over prompt/completion pairs (0 for none)."""
    if not completions:
        return 0.0
    return sum(language_drift(p, c) for p, c in zip(prompts, completions, strict=True)) / len(
        completions
    )


def zero_variance_share(rewards: Sequence[float], group_size: int) -> float:
    """Share of GRPO groups (``group_size`` consecutive rewards, TRL's order: each prompt's
    generations side by side) whose rewards are all equal: their advantages are all 0 and they
    teach nothing (TRL logs the same figure as ``frac_reward_zero_std``)."""
    if group_size < 1 or len(rewards) % group_size:
        raise ValueError(f"{len(rewards)} rewards do not split into groups of {group_size}")
    groups = [rewards[i : i + group_size] for i in range(0, len(rewards), group_size)]
    if not groups:
        return 0.0
    flat = sum(1 for g in groups if max(g) - min(g) <= 1e-8 * max(1.0, abs(max(g))))
    return flat / len(groups)


def token_entropy(logits: Any, mask: Any = None) -> float:
    """Mean per-token entropy (nats) of the policy's next-token distributions: ``logits`` of
    shape ``(..., vocab)``, ``mask`` (same leading shape) selecting the completion's tokens.
    ``log(vocab)`` for a uniform policy, 0 for a deterministic one; collapsing entropy is the
    failure GRPO on zero-variance prompts invites."""
    import torch

    logits = torch.as_tensor(logits, dtype=torch.float64)
    logp = torch.log_softmax(logits, dim=-1)
    ent = -(logp.exp() * logp).sum(-1)
    if mask is None:
        return float(ent.mean())
    m = torch.as_tensor(mask, dtype=torch.float64)
    total = float(m.sum())
    return float((ent * m).sum() / total) if total else math.nan
