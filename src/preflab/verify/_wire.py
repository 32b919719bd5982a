"""The one channel between a judge and the candidate it tests: plain data, nothing else.

Standalone (imports nothing of preflab): a copy is loaded by the judge's runner and another by
the candidate's stub, each inside its own sandbox.

A frame is a 4-byte big-endian length and a UTF-8 JSON body. A value is encoded as tagged JSON:
``null``/``true``/``false``, numbers and strings stand for themselves, a JSON array is a
``list``, and every JSON object has exactly one key naming its type: ``{"t": [...]}`` tuple,
``{"d": [[k, v], ...]}`` dict, ``{"s": [...]}`` set, ``{"f": [...]}`` frozenset, ``{"b": hex}``
bytes. Only these exact built-in types cross: an ``int`` subclass, an object with a custom
``__eq__``, a generator or any other object is refused by :func:`encode` (the candidate's side
says why) and, whatever bytes arrive, :func:`decode` builds nothing but exact built-in values (the
judge's side is the one that holds). Depth, element count and frame size are bounded.
"""

import json
import math
import os
import struct

MAX_FRAME = 16 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 2_000_000
_HEADER = struct.Struct(">I")


class Refused(ValueError):
    """A value that may not cross the channel; the message says which and why."""


def _describe(value):
    kind = type(value)
    return (
        f"{kind.__module__}.{kind.__qualname__}" if kind.__module__ != "builtins" else kind.__name__
    )


def encode(value):
    """``value`` as a JSON-able tagged tree; :class:`Refused` for anything not plain data."""
    budget = [MAX_NODES]
    return _encode(value, 0, budget, "value")


def _encode(value, depth, budget, where):
    budget[0] -= 1
    if budget[0] < 0:
        raise Refused(f"{where}: more than {MAX_NODES} elements")
    if depth > MAX_DEPTH:
        raise Refused(f"{where}: nested deeper than {MAX_DEPTH}")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return value
    if kind is float:
        if math.isnan(value):
            return {"n": "nan"}
        if math.isinf(value):
            return {"n": "inf" if value > 0 else "-inf"}
        return value
    if kind is list:
        return [_encode(v, depth + 1, budget, f"{where}[{k}]") for k, v in enumerate(value)]
    if kind is tuple:
        return {"t": [_encode(v, depth + 1, budget, f"{where}[{k}]") for k, v in enumerate(value)]}
    if kind is dict:
        return {
            "d": [
                [
                    _encode(k, depth + 1, budget, f"{where} key"),
                    _encode(v, depth + 1, budget, f"{where}[{k!r}]"),
                ]
                for k, v in value.items()
            ]
        }
    if kind is set or kind is frozenset:
        tag = "s" if kind is set else "f"
        return {tag: [_encode(v, depth + 1, budget, f"{where} element") for v in value]}
    if kind is bytes:
        return {"b": value.hex()}
    raise Refused(
        f"{where}: a {_describe(value)} cannot cross the channel: only exact built-in types "
        "(None, bool, int, float, str, bytes, list, tuple, dict, set, frozenset) do"
    )


def decode(tree):
    """The value a tagged tree stands for, built from exact built-in types only."""
    budget = [MAX_NODES]
    return _decode(tree, 0, budget)


def _decode(tree, depth, budget):
    budget[0] -= 1
    if budget[0] < 0:
        raise Refused(f"more than {MAX_NODES} elements")
    if depth > MAX_DEPTH:
        raise Refused(f"nested deeper than {MAX_DEPTH}")
    kind = type(tree)
    if tree is None or kind is bool or kind is str or kind is int or kind is float:
        return tree
    if kind is list:
        return [_decode(v, depth + 1, budget) for v in tree]
    if kind is not dict or len(tree) != 1:
        raise Refused(f"malformed value {str(tree)[:80]!r}")
    ((tag, body),) = tree.items()
    if tag == "n" and body in ("nan", "inf", "-inf"):
        return float(body)
    if tag == "b" and type(body) is str:
        try:
            return bytes.fromhex(body)
        except ValueError:
            raise Refused("malformed bytes") from None
    if type(body) is not list:
        raise Refused(f"malformed value {str(tree)[:80]!r}")
    items = [_decode(v, depth + 1, budget) for v in body]
    try:
        if tag == "t":
            return tuple(items)
        if tag == "s":
            return set(items)
        if tag == "f":
            return frozenset(items)
        if tag == "d":
            out = {}
            for pair in items:
                if type(pair) is not list or len(pair) != 2:
                    raise Refused("malformed dict entry")
                out[pair[0]] = pair[1]
            return out
    except TypeError as e:  # an unhashable key or element
        raise Refused(f"malformed value: {e}") from None
    raise Refused(f"unknown tag {tag!r}")


def send(fd, message):
    body = json.dumps(message, separators=(",", ":"), allow_nan=False).encode("utf-8")
    if len(body) > MAX_FRAME:
        raise Refused(f"message of {len(body)} bytes is over the {MAX_FRAME}-byte limit")
    data = _HEADER.pack(len(body)) + body
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exactly(fd, size):
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the channel")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def receive(fd):
    """The next message (a JSON object); ``EOFError`` when the peer is gone, :class:`Refused`
    for a frame that is too big or not one JSON object."""
    (size,) = _HEADER.unpack(_read_exactly(fd, _HEADER.size))
    if size > MAX_FRAME:
        raise Refused(f"a message of {size} bytes is over the {MAX_FRAME}-byte limit")
    try:
        message = json.loads(_read_exactly(fd, size).decode("utf-8"))
    except (ValueError, RecursionError) as e:  # bad JSON, bad UTF-8, an int of 5,000 digits
        raise Refused(f"unreadable message ({type(e).__name__})") from None
    if type(message) is not dict:
        raise Refused("a message must be a JSON object")
    return message
