"""The math verifier's judging half: parse two answers and compare them (math-verify, sympy).

It runs inside a judge worker (:mod:`preflab.verify.worker`), which loads this file by its path:
absolute imports only, nothing from ``preflab``. math-verify's own timeouts (``signal.alarm``)
are off: the worker is killed at the task's limit instead, which also stops a long C call.

Only math-verify's LaTeX extraction is used: its plain expression mode calls sympy's
``parse_expr``, which ``eval``s text, and candidate text is never evaluated. The answer is handed
over as one box, read whole or not at all (``extraction_mode="first_match"``): given ``$...$``,
math-verify searches the text for answers (``$1$ $\\frac{7}{12}$``, ``1 \\text{ final answer
is } \\frac{7}{12}``) and takes the last one it can read, another way to give two answers.

**One value.** Where the expected answer is a value (a number, an expression, a set, an
interval, a tuple), a candidate that states a relation is refused: math-verify reads
``a = b`` as its right side ``b`` and ``a \\approx b`` as its left side, so
``\\frac12 = \\frac{7}{12}`` would pay for ``\\frac{7}{12}``. Accepted are a naming of the value,
``x = 3``, ``f(x) = 3``, ``\\angle ABC = 30^\\circ``, ``(x, y) = (1, 2)``, ``x \\in (1, 2]`` (a
left side of symbols only that is not a constant), also element-wise in a list (``x = 1, x =
2``), and an equation or chain whose every side is the expected value
(``\\frac13 + \\frac14 = \\frac{7}{12}``). Refused: any other equation or chain
(``x = 1 = \\frac{7}{12}``, ``\\frac{x}{x} = \\frac{7}{12}``), inequalities, ``\\neq``,
``\\equiv`` (read as ``=``), ``\\approx``, and an ``=`` the parser dropped (it reads
``1 = \\sout{x} = \\frac{7}{12}``, which it cannot read whole, as its last part). Where the
expected answer is itself a relation (``x > 3``, ``y = 2x + 1``), relations are compared as such.
"""

from __future__ import annotations

import logging
import re

APPROX = re.compile(r"\\(?:approx|approxeq|thickapprox)(?![A-Za-z])|≈|~\s*=")
EQUALS = re.compile(r"(?<![\\<>!])=")  # what math-verify splits a chain at


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
    return parse(
        f"\\boxed{{{answer}}}",
        extraction_config=config,
        parsing_timeout=None,
        extraction_mode="first_match",
    )


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


def _is_name(side) -> bool:
    """Symbols only (``x``, ``f(x)``, ``\\angle ABC``, ``(x, y)``), and not a constant
    (``\\frac{x}{x}``)."""
    from latex2sympy2_extended.latex2sympy2 import is_expr_of_only_symbols
    from sympy import simplify

    try:
        return is_expr_of_only_symbols(side) and bool(simplify(side).free_symbols)
    except (TypeError, ValueError, AttributeError, NotImplementedError):
        return False


def _equalities(relation) -> list | None:
    """The equations of ``a = b`` or of a chain ``a = b = c``; None for any other relation."""
    from sympy import Eq

    if isinstance(relation, Eq):
        return [relation]
    links = list(getattr(relation, "_unsorted_args", None) or relation.args)
    return links if links and all(isinstance(link, Eq) for link in links) else None


def relation_refusal(gold: list, predicted: list, answer: str) -> str | None:
    """Why ``answer`` (parsed: ``predicted``) is refused as a relation where ``gold`` is a
    value; None when it is not.

    An equation (or a chain of them) is accepted when its first side names the value
    (``x = 3``) or when every side that is not that name is the expected value itself
    (``\\frac13 + \\frac14 = \\frac{7}{12}``, worked out in the box)."""
    from math_verify import verify

    if any(_is_relation(v) for v in _elements(gold[:1])):
        return None  # the expected answer is a relation: math-verify compares relations
    if APPROX.search(answer):
        return (
            f"the final answer {answer!r} is an approximation (\\approx), a relation where the "
            "task expects a value"
        )
    accepted = 0
    for value in _elements(predicted[:1]):
        if not _is_relation(value):
            continue
        links = _equalities(value)
        if links is not None:
            sides = [links[0].lhs] + [link.rhs for link in links]
            if len(links) == 1 and _is_name(sides[0]) and not _is_relation(sides[1]):
                accepted += 1
                continue
            values = sides[1:] if _is_name(sides[0]) else sides
            if all(
                not _is_relation(side) and verify(gold, [side], timeout_seconds=None)
                for side in values
            ):
                accepted += len(links)
                continue
        return (
            f"the final answer {answer!r} states a relation ({value}) where the task expects "
            "a value; give the value alone (or 'name = value')"
        )
    if len(EQUALS.findall(answer)) > accepted:
        return (
            f"the final answer {answer!r} has an '=' that was not read as an equation (a chain "
            "the parser read in part): a relation where the task expects a value"
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
