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

A text whose token count was stored when it was written (:mod:`preflab.quality.text_stats`,
found in its memo by the text itself) is neither hashed nor tokenized, when the count is of the
wrapped function's tokenizer (its ``fingerprint``, see
:func:`preflab.quality.bias.default_token_length`); any other text is measured as above.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from typing import Any

from ...quality.text_stats import MEMO

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
        #: the tokenizer stored counts must be of to be taken (None: never taken)
        self.fingerprint: str | None = getattr(fn, "fingerprint", None)

    def stored(self, text: str) -> int | None:
        """The text's stored token count when it is of this function's tokenizer, else None."""
        found = MEMO.get(text) if self.fingerprint is not None else None
        if found is None or found[0] != self.fingerprint:
            return None
        return found[1]

    def __call__(self, text: str) -> int:
        value = self.stored(text)
        if value is not None:
            return value
        key = _key(text)
        value = self._lengths.get(key)
        if value is None:
            value = self._store(key, self.fn(text))
        return value

    def lengths(self, texts: Sequence[str]) -> list[int]:
        """The length of each text: stored, else from the cache, the others measured in one
        batch."""
        if self.fingerprint is None:
            return self._lengths_of(texts)
        out: list[int | None] = [self.stored(t) for t in texts]
        rest = [i for i, v in enumerate(out) if v is None]
        if rest:
            for i, v in zip(rest, self._lengths_of([texts[i] for i in rest]), strict=True):
                out[i] = v
        return out  # type: ignore[return-value]

    def _lengths_of(self, texts: Sequence[str]) -> list[int]:
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
