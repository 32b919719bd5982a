"""Candidate lengths for the length gate and the verbosity penalty: batched and cached.

Tokenizing one text at a time was most of an export's time (62 % at a million judgments): each
call crosses into the tokenizer's Rust code for one short text, and the penalty measured again
the texts the gate had just measured. :class:`CachedLength` wraps a length function: the texts
a gate is about to measure are tokenized in one call of the fast tokenizer's batch API (the
function's ``batch`` attribute, see :func:`preflab.quality.bias.default_token_length`), and each
distinct text's length is kept under a 128-bit BLAKE2b digest of the text, so a text is tokenized
once while it is in the cache. The cache is bounded (:data:`CACHE_SIZE` entries, the oldest
leave first), so its memory does not grow with the project. Lengths are the wrapped function's
own: the batch API applies the same rules (no special tokens, no truncation, no padding).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from typing import Any

#: Most lengths kept (about 100 bytes each): far more than the candidates of one chunk of items.
CACHE_SIZE = 200_000


def _key(text: str) -> bytes:
    return hashlib.blake2b(str(text).encode("utf-8", "surrogatepass"), digest_size=16).digest()


class CachedLength:
    """``length(text)`` of a wrapped function, measured in batches and cached by text digest."""

    def __init__(self, fn: Callable[[str], int], size: int = CACHE_SIZE) -> None:
        self.fn = fn
        self.batch: Callable[[list[str]], list[int]] | None = getattr(fn, "batch", None)
        self.size = size
        self._lengths: dict[bytes, int] = {}
        # the quality engine reads the unit of an export's length function (bias.length_in)
        self.unit = getattr(fn, "unit", None)

    def __call__(self, text: str) -> int:
        key = _key(text)
        value = self._lengths.get(key)
        if value is None:
            value = self._store(key, self.fn(text))
        return value

    def lengths(self, texts: Sequence[str]) -> list[int]:
        """The length of each text; the ones not in the cache are measured in one batch."""
        keys = [_key(t) for t in texts]
        cache = self._lengths
        found: dict[bytes, int] = {}
        missing: dict[bytes, str] = {}
        for key, text in zip(keys, texts, strict=True):
            if key in found or key in missing:
                continue
            value = cache.get(key)
            if value is None:
                missing[key] = text
            else:
                found[key] = value
        if missing:
            todo = list(missing.values())
            measured = self.batch(todo) if self.batch is not None else [self.fn(t) for t in todo]
            for key, value in zip(missing, measured, strict=True):
                found[key] = self._store(key, value)
        return [found[k] for k in keys]

    def _store(self, key: bytes, value: int) -> int:
        cache = self._lengths
        if len(cache) >= self.size:  # oldest first (dicts keep insertion order)
            for old in list(islice(cache, max(1, self.size // 10))):
                del cache[old]
        cache[key] = value
        return value


def cached(fn: Any) -> Any:
    """``fn`` wrapped in a :class:`CachedLength` when it measures tokens (words and characters
    cost less to count than to hash, and the quality engine recognises ``word_length`` by
    identity); other functions are returned as they are."""
    if isinstance(fn, CachedLength) or getattr(fn, "unit", None) != "tokens":
        return fn
    return CachedLength(fn)


def lengths_of(fn: Any, texts: Iterable[str]) -> list[int]:
    """``[fn(t) for t in texts]``, in one batch when ``fn`` is a :class:`CachedLength`."""
    if isinstance(fn, CachedLength):
        return fn.lengths(list(texts))
    return [fn(t) for t in texts]
