"""Math: final-answer extraction and sympy equivalence (via math-verify), never ``eval``."""

from __future__ import annotations

import pytest

from preflab.verify import MathTask, verify
from preflab.verify.math_answer import equivalent, extract_final_answer


@pytest.mark.parametrize(
    "text, answer",
    [
        (r"so the total is \boxed{\frac{3}{4}}.", r"\frac{3}{4}"),
        (r"first \boxed{1}, corrected: \boxed{\sqrt{2}}", None),  # two different answers
        (r"\boxed{\sqrt{2}}, that is \boxed{ \sqrt{2} }", r"\sqrt{2}"),  # the same one twice
        (r"\boxed{\{1, \{2\}\}}", r"\{1, \{2\}\}"),  # nested braces
        ("Reasoning...\nAnswer: 3/4.", "3/4"),
        ("The final answer is: $x^2 - 1$", "x^2 - 1"),
        ("no conclusion here", None),
    ],
)
def test_extracts_the_final_answer(text, answer):
    assert extract_final_answer(text) == answer


@pytest.mark.parametrize(
    "gold, predicted",
    [
        (r"\frac{3}{4}", "0.75"),  # fraction vs decimal
        (r"\frac{3}{4}", "3/4"),
        (r"\frac{\sqrt{2}}{2}", r"\frac{1}{\sqrt{2}}"),  # surds
        (r"2\sqrt{2}", r"\sqrt{8}"),
        (r"[1, 3)", r"[1,3)"),  # intervals
        (r"(-\infty, 2] \cup (3, \infty)", r"(-\infty,2]\cup(3,\infty)"),
        (r"\pi/2", r"\frac{\pi}{2}"),
        ("(x-1)(x+1)", "x^2-1"),
    ],
)
def test_equivalent_answers(gold, predicted):
    assert equivalent(gold, predicted)


@pytest.mark.parametrize(
    "gold, predicted",
    [
        ("5", "6"),
        (r"[1, 3)", r"(1, 3]"),
        (r"\frac{1}{3}", "0.33"),
        (r"\sqrt{2}", "1.41"),
    ],
)
def test_different_answers(gold, predicted):
    assert not equivalent(gold, predicted)


def test_decimal_tolerance_is_relative_and_opt_in():
    assert not equivalent(r"\frac{1}{3}", "0.3333")
    assert equivalent(r"\frac{1}{3}", "0.3333", tolerance=1e-3)
    assert not equivalent(r"\frac{1}{3}", "0.33", tolerance=1e-3)


def test_candidate_text_is_never_evaluated(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    payloads = [
        f"__import__('os').system('touch {marker}')",
        f"().__class__.__base__.__subclasses__() or open('{marker}','w')",
    ]
    task = MathTask(task_id="m", kind="math", answer="0")
    for payload in payloads:
        verdict = verify(task, f"Answer: {payload}")
        assert verdict.reward == 0.0
    assert not marker.exists()


def test_a_completion_gets_reward_one_only_when_equivalent():
    task = MathTask(task_id="half", kind="math", answer=r"\frac{1}{2}")
    assert verify(task, r"Halve it: \boxed{0.5}").reward == 1.0
    wrong = verify(task, r"\boxed{0.25}")
    assert wrong.reward == 0.0 and "not equivalent" in wrong.reason
    assert "no final answer" in verify(task, "it is one half").reason
