"""Math: final-answer extraction and sympy equivalence (via math-verify), never ``eval``."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

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


# Hostile answers: each is a real attempt on the task below (the answer is 7/12) that fails only
# because of a defence; each scores 0 with a reason that names it.
SEVEN_TWELFTHS = r"\frac{7}{12}"
SLACK_S = 2.5  # a killed worker's reply and a loaded machine; the limits themselves are 1 s


def seven_twelfths(timeout_s: float = 5.0) -> MathTask:
    return MathTask(task_id="sum", kind="math", answer=SEVEN_TWELFTHS, timeout_s=timeout_s)


@pytest.mark.parametrize(
    "completion",
    [
        r"first \boxed{1}, then \boxed{\frac{7}{12}}",  # the last box used to win
        r"\boxed{\frac{7}{12}} or maybe \boxed{1}",
        r"\fbox{1} and \boxed{\frac{7}{12}}",
        r"\boxed {1} then \boxed{\frac{7}{12}}",  # a space before the brace
        r"\boxed 1 then \boxed{\frac{7}{12}}",  # a one-token argument
        r"\boxed{1 \text{ or } \boxed{\frac{7}{12}}}",  # a box inside the box
        r"$\text{we get \boxed{1}}$, so \boxed{\frac{7}{12}}",  # a box inside \text
        "Answer: 1\nAnswer: 7/12",
        "Final answer: 1.\nChecking again... answer: 7/12",
    ],
)
def test_several_different_final_answers_score_zero(completion):
    verdict = verify(seven_twelfths(), completion)
    assert verdict.reward == 0.0
    assert "different final answers" in verdict.reason and "exactly one" in verdict.reason


@pytest.mark.parametrize(
    "completion",
    [  # math-verify, handed the answer as text, searches it and takes the last answer it reads
        r"\boxed{1$ $\frac{7}{12}}",
        r"\boxed{1 \text{ final answer is } \frac{7}{12}}",
        r"\boxed{1 \text{ answer: } \frac{7}{12}}",
        r"\boxed{1 \text{ $\frac{7}{12}$ }}",
        "Answer: 1 $ $ 7/12",
    ],
)
def test_one_box_holding_several_answers_is_read_whole(completion):
    verdict = verify(seven_twelfths(), completion)
    assert verdict.reward == 0.0 and "not equivalent" in verdict.reason


@pytest.mark.parametrize(
    "completion",
    [
        r"\boxed{\frac{7}{12}} and so, again, \boxed{ \frac{7}{12} }",  # whitespace only
        r"\boxed{\boxed{\frac{7}{12}}}",  # a box around the box
        "Answer: 7/12\nFinal answer: 7/12.",
    ],
)
def test_the_same_answer_twice_is_one_answer(completion):
    assert verify(seven_twelfths(), completion).reward == 1.0


@pytest.mark.parametrize(
    "answer",
    [
        r"\frac12 = \frac{7}{12}",  # paid: math-verify compares the right side
        r"x = 1 = \frac{7}{12}",  # paid: a chain reads as its ends
        r"1 \equiv \frac{7}{12}",  # paid: \equiv reads as =
        r"\frac{7}{12} \approx 1",  # paid: \approx reads as its left side
        r"\frac{x}{x} = \frac{7}{12}",
        r"1 < \frac{7}{12}",
        r"\frac{7}{12} \le 1",
        r"1 \neq \frac{7}{12}",
        r"x > \frac{7}{12}",
        r"(1, 2 = \frac{7}{12})",
        r"1 = \sout{x} = \frac{7}{12}",  # paid: unreadable whole, read as its last part
    ],
)
def test_a_relation_where_a_value_is_expected_scores_zero(answer):
    verdict = verify(seven_twelfths(), rf"\boxed{{{answer}}}")
    assert verdict.reward == 0.0
    assert "relation" in verdict.reason or "approximation" in verdict.reason


@pytest.mark.parametrize(
    "gold, answer",
    [
        (SEVEN_TWELFTHS, r"x = \frac{7}{12}"),  # naming the value
        (SEVEN_TWELFTHS, r"x \in \left\{\frac{7}{12}\right\}"),
        ("1, 2", "x = 1, x = 2"),
        ("(-2, 3]", r"x \in (-2, 3]"),
        ("(-2, 3]", "(-2,3]"),
        (SEVEN_TWELFTHS, r"\frac13 + \frac14 = \frac{7}{12}"),  # every side is the value
        ("(1, 2)", "(x, y) = (1, 2)"),
        ("30", r"\angle ABC = 30^\circ"),
        ("x > 3", "3 < x"),  # the task expects a relation
        ("y = 2x + 1", "y = 2x+1"),
    ],
)
def test_a_named_value_and_expected_relations_still_pay(gold, answer):
    assert verify(MathTask(task_id="t", kind="math", answer=gold), rf"\boxed{{{answer}}}").reward


COSTLY = {
    "power tower 9": r"9^{9^{9^{9}}}",
    "power tower 10": r"10^{10^{10^{10}}}",
    "float power tower": r"1.0000001^{10^{10^{10}}}",
    "factorial of a power": r"(10^{10})!",
    "nested factorials": r"((9!)!)!",
    "huge binomial": r"\binom{10^{12}}{10^{6}}",
    "2 GiB integer": r"2^{2^{34}}",
    "nested fractions": r"\frac{1}{" * 45 + "2" + "}" * 45,
    "nested parentheses": "(" * 240 + "1" + ")" * 240,
}


def peak_rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.parametrize("answer", COSTLY.values(), ids=COSTLY.keys())
def test_a_costly_answer_costs_at_most_the_limit_and_no_memory_here(answer):
    verify(seven_twelfths(), r"\boxed{1}")  # a ready worker: its start is not the answer's cost
    rss = peak_rss_mb()
    started = time.monotonic()
    verdict = verify(seven_twelfths(timeout_s=1), rf"\boxed{{{answer}}}")
    assert time.monotonic() - started < 1 + SLACK_S
    assert verdict.reward == 0.0 and "timed out after 1 s" in verdict.reason
    assert peak_rss_mb() - rss < 200  # the worker's memory, capped, not this process's


@pytest.mark.parametrize(
    "completion, reason",
    [
        ("answer" + " " * 1_000_000 + "7/12", "no final answer"),  # was quadratic in the regex
        ("Answer:" + " " * 1_000_000 + r"\frac{7}{12}", "equivalent"),  # honest, only padded
        (r"\boxed{" + "1+" * 500_000 + "1}", "longer than 500"),
        (r"\boxed{" * 200_000, "longer than 500"),
        (r"\boxed{1}" * 100_000 + r"\boxed{\frac{7}{12}}", "different final answers"),
    ],
)
def test_million_character_completions_take_one_pass(completion, reason):
    started = time.monotonic()
    verdict = verify(seven_twelfths(), completion)
    assert time.monotonic() - started < 2 + SLACK_S
    assert reason in verdict.reason


def test_the_judge_recovers_after_a_kill_and_threads_do_not_queue_behind_it():
    def fraction(k: int) -> str:
        return rf"\boxed{{\frac{{{7 * k}}}{{{12 * k}}}}}"

    hostile = seven_twelfths(timeout_s=3)
    with ThreadPoolExecutor(max_workers=4) as executor:
        warm = executor.map(lambda k: verify(seven_twelfths(), fraction(k)).reward, range(4, 8))
        assert list(warm) == [1.0] * 4  # four callers at once: four workers, all kept
        stuck = executor.submit(verify, hostile, r"\boxed{9^{9^{9^{9}}}}")
        started = time.monotonic()
        honest = [executor.submit(verify, seven_twelfths(), fraction(k)) for k in (1, 2, 3)]
        assert [f.result().reward for f in honest] == [1.0, 1.0, 1.0]
        assert time.monotonic() - started < 2.5  # not after the hostile one's 3 s
        assert "timed out" in stuck.result().reason
    assert verify(seven_twelfths(), r"\boxed{\frac{14}{24}}").reward == 1.0  # a fresh worker
