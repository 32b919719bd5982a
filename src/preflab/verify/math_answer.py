"""The math verifier: the final answer of a completion, checked for equivalence with sympy.

Parsing is Hugging Face's ``math-verify`` (LaTeX through its ANTLR grammar into sympy objects;
sets, intervals, fractions, surds, matrices). Only its LaTeX extraction is used: its plain
expression mode calls sympy's ``parse_expr``, which ``eval``s text, and candidate text is never
evaluated. A plain answer (``answer: 3/4``) is handed over as inline LaTeX, which the grammar
reads too.
"""

from __future__ import annotations

import re
import threading
import time

from .result import Verdict
from .tasks import MathTask

MAX_ANSWER_CHARS = 500
ANSWER_LINE = re.compile(r"(?:final\s+answer|answer)\s*(?:is)?\s*[:=]\s*(.+)", re.IGNORECASE)


def _braced(text: str, start: int) -> str | None:
    """The content of the ``{...}`` group opening at ``text[start]``, braces balanced."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i]
    return None


def extract_final_answer(text: str) -> str | None:
    """The last ``\\boxed{...}`` (or ``\\fbox``), else the last ``answer: ...`` line, else None."""
    for marker in (r"\boxed", r"\fbox"):
        at = text.rfind(marker + "{")
        if at >= 0:
            found = _braced(text, at + len(marker))
            if found is not None:
                return found.strip()
    matches = ANSWER_LINE.findall(text)
    if matches:
        return matches[-1].strip().strip("$").rstrip(".").strip().strip("$").strip()
    return None


def _parse(answer: str):
    from math_verify import LatexExtractionConfig, parse

    config = [LatexExtractionConfig(boxed_match_priority=0)]
    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    return parse(f"${answer}$", extraction_config=config, parsing_timeout=timeout)


def _as_float(parsed) -> float | None:
    if not parsed:
        return None
    try:
        value = parsed[0]
        return float(value.evalf()) if getattr(value, "is_number", False) else None
    except (TypeError, ValueError, AttributeError):
        return None


def equivalent(gold: str, predicted: str, *, tolerance: float | None = None) -> bool:
    """Whether two answers denote the same value/set/interval (symbolically, or numerically
    within a relative ``tolerance``)."""
    from math_verify import verify

    gold_parsed, predicted_parsed = _parse(gold), _parse(predicted)
    if not gold_parsed or not predicted_parsed:
        return False
    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    if verify(gold_parsed, predicted_parsed, timeout_seconds=timeout):
        return True
    if tolerance is not None:
        a, b = _as_float(gold_parsed), _as_float(predicted_parsed)
        if a is not None and b is not None:
            return abs(a - b) <= tolerance * max(1.0, abs(a))
    return False


def verify_math(task: MathTask, completion: str) -> Verdict:
    started = time.monotonic()
    answer = extract_final_answer(completion)
    if answer is None:
        reward, reason = 0.0, "no final answer (\\boxed{...} or 'answer: ...') found"
    elif len(answer) > MAX_ANSWER_CHARS:
        reward, reason = 0.0, f"final answer longer than {MAX_ANSWER_CHARS} characters"
    elif equivalent(task.answer, answer, tolerance=task.tolerance):
        reward, reason = 1.0, f"{answer!r} is equivalent to {task.answer!r}"
    else:
        reward, reason = 0.0, f"{answer!r} is not equivalent to {task.answer!r}"
    return Verdict(
        task_id=task.task_id,
        kind="math",
        reward=reward,
        reason=reason,
        wall_s=time.monotonic() - started,
    )
