"""The math verifier's judging half: parse two answers and compare them (math-verify, sympy).

It runs inside a judge worker (:mod:`preflab.verify.worker`), which loads this file by its path:
absolute imports only, nothing from ``preflab``. math-verify's own timeouts (``signal.alarm``)
are off: the worker is killed at the task's limit instead, which also stops a long C call.

Only math-verify's LaTeX extraction is used: its plain expression mode calls sympy's
``parse_expr``, which ``eval``s text, and candidate text is never evaluated.

**One value.** Where the expected answer is a value (a number, an expression, a set, an
interval, a tuple), a candidate that states a relation is refused: math-verify reads
``a = b`` as its right side ``b`` and ``a \\approx b`` as its left side, so
``\\frac12 = \\frac{7}{12}`` would pay for ``\\frac{7}{12}``. Accepted is one naming of the
value: ``x = 3``, ``f(x) = 3``, ``x \\in (1, 2]``, also element-wise in a list
(``x = 1, x = 2``). Refused: a relation between values or expressions, a chain
(``x = 1 = \\frac{7}{12}``), inequalities, ``\\neq``, ``\\equiv``, ``\\approx``. Where the
expected answer is itself a relation (``x > 3``, ``y = 2x + 1``), relations are compared as such.
"""

from __future__ import annotations

import logging
import re

APPROX = re.compile(r"\\(?:approx|approxeq|thickapprox)(?![A-Za-z])|≈|~\s*=")


def warm_up() -> None:
    """Import the parser and build its regexes and grammar before the first job is timed."""
    logging.getLogger("math_verify").setLevel(logging.ERROR)  # "timeout disabled": we kill
    judge(r"\frac{1}{2}", "0.5", None)


def run(job: dict) -> dict:
    equal, refusal = judge(job["gold"], job["answer"], job.get("tolerance"))
    return {"equivalent": equal, "refusal": refusal}


def parse(answer: str) -> list:
    from math_verify import LatexExtractionConfig, parse

    config = [LatexExtractionConfig(boxed_match_priority=0)]
    return parse(f"${answer}$", extraction_config=config, parsing_timeout=None)


def _as_float(parsed) -> float | None:
    if not parsed:
        return None
    try:
        value = parsed[0]
        return float(value.evalf()) if getattr(value, "is_number", False) else None
    except (TypeError, ValueError, AttributeError):
        return None


def _elements(value):
    """The value itself, or the members of a set/tuple/list of answers, recursively."""
    from sympy import FiniteSet, Tuple

    if isinstance(value, FiniteSet | Tuple | list | tuple):
        for member in value.args if isinstance(value, FiniteSet | Tuple) else value:
            yield from _elements(member)
    else:
        yield value


def _is_relation(value) -> bool:
    from sympy.core.relational import Relational
    from sympy.logic.boolalg import BooleanAtom, BooleanFunction

    return isinstance(value, Relational | BooleanFunction | BooleanAtom)


def _is_name(value) -> bool:
    """A symbol (``x``, ``x_1``, ``\\theta``) or an undefined function of symbols (``f(x)``)."""
    from sympy import Symbol
    from sympy.core.function import AppliedUndef

    if isinstance(value, Symbol):
        return True
    return isinstance(value, AppliedUndef) and all(isinstance(a, Symbol) for a in value.args)


def relation_refusal(gold: list, predicted: list, answer: str) -> str | None:
    """Why ``answer`` (parsed: ``predicted``) is refused as a relation where ``gold`` is a
    value; None when it is not."""
    from sympy import Eq

    if any(_is_relation(v) for v in _elements(gold[:1])):
        return None  # the expected answer is a relation: math-verify compares relations
    if APPROX.search(answer):
        return f"the final answer {answer!r} is an approximation (\\approx) where the task expects a value"
    for value in _elements(predicted[:1]):
        if not _is_relation(value):
            continue
        if isinstance(value, Eq) and _is_name(value.lhs) and not _is_relation(value.rhs):
            continue  # x = 3: naming the value
        return (
            f"the final answer {answer!r} states a relation ({value}) where the task expects "
            "a value; give the value alone (or one 'name = value')"
        )
    return None


def judge(gold: str, answer: str, tolerance: float | None) -> tuple[bool, str | None]:
    """Whether ``answer`` denotes the same value/set/interval as ``gold`` (symbolically, or
    numerically within a relative ``tolerance``), and the refusal reason, if any (then False)."""
    from math_verify import verify

    gold_parsed, predicted = parse(gold), parse(answer)
    if not gold_parsed or not predicted:
        return False, None
    refusal = relation_refusal(gold_parsed, predicted, answer)
    if refusal:
        return False, refusal
    if verify(gold_parsed, predicted, timeout_seconds=None):
        return True, None
    if tolerance is not None:
        a, b = _as_float(gold_parsed), _as_float(predicted)
        if a is not None and b is not None:
            return abs(a - b) <= tolerance * max(1.0, abs(a)), None
    return False, None
