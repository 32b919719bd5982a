"""The math verifier: the final answer of a completion, checked for equivalence with sympy.

Parsing is Hugging Face's ``math-verify`` (LaTeX through its ANTLR grammar into sympy objects;
sets, intervals, fractions, surds, matrices); never ``eval`` (see :mod:`._math_judge`). A plain
answer (``answer: 3/4``) is handed over as inline LaTeX, which the grammar reads too.

**Exactly one final answer.** The answer is the content of the ``\\boxed{...}`` (or
``\\fbox``); with no box, of the ``answer: ...`` line. Several different ones (after collapsing
whitespace; the same answer boxed twice is fine, and so is a box around a box) are reward 0 with
the reason: a grader that takes the last (or the first) would pay a policy for hedging. Where the
task expects a value, a relation (``\\frac12 = \\frac{7}{12}``) is refused too
(:func:`._math_judge.relation_refusal`).

**Limits.** The final answer is at most :data:`MAX_ANSWER_CHARS` characters; finding it is one
linear pass over the completion. Parsing and comparing run in a judge worker process
(:mod:`.worker`): at most ``task.timeout_s`` seconds (the worker is killed then, on any thread)
and :data:`MEMORY_MB` MiB of address space.
"""

from __future__ import annotations

import re
import time

from .result import Verdict
from .tasks import MathTask
from .worker import JobFailed, JobTimeout, run_job

MAX_ANSWER_CHARS = 500
MEMORY_MB = 1024  # the worker's address space; warmed up, the worker takes ~65 MiB of it
DEFAULT_TIMEOUT_S = 5.0
# possessive quantifiers: "answer" and a million spaces cost one pass, not a million squared
ANSWER_LINE = re.compile(r"(?:final\s++answer|answer)\s*+(?:is\s*+)?[:=]\s*+(.+)", re.IGNORECASE)
BOX = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])\s*")
BOX_TOKEN = re.compile(r"\\[A-Za-z]+|\S")


BRACE = re.compile(r"[{}]")
TOO_LONG = f"final answer longer than {MAX_ANSWER_CHARS} characters (or a box never closed)"
MAX_SHOWN = 4


def _closing(text: str, at: int) -> int | None:
    """Where the ``{`` at ``text[at]`` closes, looking at most :data:`MAX_ANSWER_CHARS` + 1
    characters ahead (escaped braces counted too: they are balanced in ``\\{1, 2\\}``)."""
    depth = 0
    for brace in BRACE.finditer(text, at, min(len(text), at + MAX_ANSWER_CHARS + 2)):
        depth += 1 if brace.group() == "{" else -1
        if depth == 0:
            return brace.start()
    return None


def _boxed(text: str):
    """The contents of every ``\\boxed``/``\\fbox`` in ``text``, nested ones included, in
    order: a braced argument, or the single token after the command (``\\boxed 5``); None for a
    box that is longer than :data:`MAX_ANSWER_CHARS` or never closed."""
    for match in BOX.finditer(text):
        at = match.end()
        if text.startswith("{", at):
            end = _closing(text, at)
            yield None if end is None else text[at + 1 : end]
        elif token := BOX_TOKEN.match(text, at):
            yield token.group()


def _same_form(answer: str) -> str:
    """Whitespace collapsed, and a box around the whole answer taken off."""
    answer = " ".join(answer.split())
    while (box := BOX.match(answer)) and answer.startswith("{", box.end()):
        if _closing(answer, box.end()) != len(answer) - 1:
            break
        answer = " ".join(answer[box.end() + 1 : -1].split())
    return answer


def _answer_lines(text: str):
    for line in ANSWER_LINE.finditer(text):
        yield line.group(1).strip().strip("$").rstrip(".").strip().strip("$").strip()


def find_final_answer(text: str) -> tuple[str | None, str | None]:
    """``(answer, None)``, or ``(None, why)``: no final answer, more than one, or one over
    :data:`MAX_ANSWER_CHARS` characters. One pass over ``text``; it stops at the first answer
    that is too long or at the fifth different one."""
    last: str | None = None
    forms: dict[str, None] = {}  # insertion-ordered set of the answers' normal forms
    for source in (_boxed(text), _answer_lines(text)):  # answer lines count where no box is
        for found in source:
            if found is None or len(found) > MAX_ANSWER_CHARS:
                return None, TOO_LONG
            last = found.strip()
            forms.setdefault(_same_form(last), None)
            if len(forms) > MAX_SHOWN:
                break
        if last is not None:
            break
    if last is None:
        return None, "no final answer (\\boxed{...} or 'answer: ...') found"
    if len(forms) > 1:
        shown = ", ".join(repr(f if len(f) <= 40 else f[:37] + "...") for f in forms)
        more = "at least " if len(forms) > MAX_SHOWN else ""
        return None, (
            f"{more}{len(forms)} different final answers ({shown}); a completion must give "
            "exactly one"
        )
    return last, None


def extract_final_answer(text: str) -> str | None:
    """The one final answer of ``text``, or None (none, or several different ones)."""
    return find_final_answer(text)[0]


def judge_answer(
    gold: str,
    answer: str,
    *,
    tolerance: float | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> tuple[bool, str]:
    """``(equivalent, reason)`` for two answers, parsed and compared in a judge worker within
    ``timeout_s``."""
    try:
        value = run_job(
            "math",
            {"gold": gold, "answer": answer, "tolerance": tolerance},
            timeout_s=timeout_s,
            memory_mb=MEMORY_MB,
        )
    except JobTimeout:
        return False, (
            f"parsing and comparing {answer[:60]!r} timed out after {timeout_s:g} s "
            "(the worker was killed)"
        )
    except JobFailed as e:
        return False, f"could not verify {answer[:60]!r}: {e}"
    if value["refusal"]:
        return False, value["refusal"]
    if value["equivalent"]:
        return True, f"{answer!r} is equivalent to {gold!r}"
    return False, f"{answer!r} is not equivalent to {gold!r}"


def equivalent(
    gold: str, predicted: str, *, tolerance: float | None = None, timeout_s: float = 5.0
) -> bool:
    """Whether two answers denote the same value/set/interval (symbolically, or numerically
    within a relative ``tolerance``); False for a refused relation or past ``timeout_s``."""
    return judge_answer(gold, predicted, tolerance=tolerance, timeout_s=timeout_s)[0]


def verify_math(task: MathTask, completion: str) -> Verdict:
    started = time.monotonic()
    answer, problem = find_final_answer(completion)
    if answer is None:
        reward, reason = 0.0, problem or "no final answer"
    else:
        ok, reason = judge_answer(
            task.answer, answer, tolerance=task.tolerance, timeout_s=task.timeout_s
        )
        reward = 1.0 if ok else 0.0
    return Verdict(
        task_id=task.task_id,
        kind="math",
        reward=reward,
        reason=reason,
        wall_s=time.monotonic() - started,
    )
