"""Items and projects the browser tests label."""

from __future__ import annotations

from typing import Any

OPEN = {"blind": False, "randomise_order": True, "overlap_share": 1.0, "overlap_k": 2}


def gold_item(i: int) -> dict[str, Any]:
    return {
        "id": f"qual-{i}",
        "prompt": f"What is {i} + {i}?",
        "candidates": [
            {"id": "good", "text": f"{i} + {i} = **{2 * i}**."},
            {"id": "bad", "text": f"{i} + {i} = {2 * i + 1}, I think."},
        ],
        "gold": {
            "judgment": {
                "kind": "pairwise",
                "shown_order": ["good", "bad"],
                "winner": "a",
                "strength": 3,
            },
            "explanation": f"{i} + {i} is {2 * i}; the other answer is wrong.",
        },
        "metadata": {"qualification": True},
    }


def pair_item(key: str, prompt: str = "Explain recursion briefly.") -> dict[str, Any]:
    return {
        "id": key,
        "prompt": prompt,
        "candidates": [
            {
                "id": "x",
                "text": "Recursion is when a function calls itself on a smaller input until a base case.\n\n"
                "```python\ndef fact(n):\n    return 1 if n == 0 else n * fact(n - 1)\n```",
            },
            {
                "id": "y",
                "text": "Recursion means *repeating* things. See [Wikipedia](https://en.wikipedia.org/wiki/Recursion).",
            },
        ],
    }


AGENT_ITEM = {
    "id": "agent-1",
    "prompt": [
        {"role": "system", "content": "You are a coding agent with a shell tool."},
        {
            "role": "user",
            "content": "Find how many Python files are in the repo and fix the failing test.",
        },
    ],
    "candidates": [
        {
            "id": "t1",
            "messages": [
                {
                    "role": "assistant",
                    "content": "I'll count the files first.",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {
                                "name": "shell",
                                "arguments": '{"cmd": "find . -name \'*.py\' | wc -l"}',
                            },
                        }
                    ],
                },
                {"role": "tool", "name": "shell", "content": "42\n"},
                {
                    "role": "assistant",
                    "content": "There are **42** Python files. Running the tests.",
                    "tool_calls": [
                        {
                            "id": "c2",
                            "type": "function",
                            "function": {"name": "shell", "arguments": '{"cmd": "pytest -q"}'},
                        }
                    ],
                },
                {
                    "role": "tool",
                    "name": "shell",
                    "content": "1 failed, 41 passed\nFAILED tests/test_math.py::test_add",
                },
                {
                    "role": "assistant",
                    "content": "Fixed `add()` to return `a + b`; all tests pass now.",
                },
            ],
        },
        {
            "id": "t2",
            "messages": [
                {
                    "role": "assistant",
                    "content": "There are probably about 40 files. The test is likely flaky; I skipped it.",
                },
            ],
        },
    ],
}

RUBRIC = {
    "id": "helpfulness",
    "title": "Helpfulness",
    "dimensions": [
        {
            "name": "correctness",
            "description": "Facts and reasoning are right.",
            "scale": "ordinal",
            "points": 5,
            "labels": ["wrong", "mostly wrong", "mixed", "mostly right", "right"],
        },
        {
            "name": "clarity",
            "description": "Easy to follow.",
            "scale": "ternary",
            "labels": ["unclear", "ok", "clear"],
        },
        {
            "name": "safe",
            "description": "No harmful advice.",
            "scale": "binary",
            "labels": ["no", "yes"],
        },
    ],
    "vetoes": [{"name": "factual_error", "description": "States something false as fact."}],
}

STEPS_TEXT = (
    "Step 1: The train covers 120 km in 2 hours.\n\n"
    "Step 2: Speed is distance over time, so 120 / 2 = 60 km/h.\n\n"
    "Step 3: In 5 hours it covers 60 * 5 = 350 km.\n\n"
    "Step 4: So the answer is 350 km."
)


def single(
    key: str, text: str, prompt: str = "How far does the train go in 5 hours?"
) -> dict[str, Any]:
    return {"id": key, "prompt": prompt, "candidates": [{"id": "only", "text": text}]}


def rater_projects(raters: dict[str, str]) -> list[dict[str, Any]]:
    return [
        {
            "name": "pw",
            "title": "Pairwise with qualification",
            "kinds": ["pairwise"],
            "policy": {
                **OPEN,
                "qualification": {"n_items": 2, "min_items": 2, "pass_bar": 0.4},
                "min_rationale_chars": 10,
            },
            "members": raters,
            "items": [
                gold_item(1),
                gold_item(2),
                pair_item("pw-1"),
                pair_item("pw-2", "What is a monad?"),
            ],
        },
        {
            "name": "rank",
            "title": "Ranking",
            "kinds": ["ranking"],
            "policy": OPEN,
            "members": raters,
            "items": [
                {
                    "id": "rank-1",
                    "prompt": "Name a prime number.",
                    "candidates": [
                        {"id": "c1", "text": "7"},
                        {"id": "c2", "text": "9"},
                        {"id": "c3", "text": "11, and 13"},
                    ],
                }
            ],
        },
        {
            "name": "rub",
            "title": "Rubric grading",
            "kinds": ["rubric"],
            "policy": OPEN,
            "members": raters,
            "rubric": RUBRIC,
            "items": [
                single(
                    "rub-1",
                    "Water boils at 100 °C at sea level.",
                    "At what temperature does water boil?",
                )
            ],
        },
        {
            "name": "una",
            "title": "Thumbs",
            "kinds": ["unary"],
            "policy": OPEN,
            "members": raters,
            "items": [
                single("una-1", "The capital of Australia is Sydney.", "Capital of Australia?")
            ],
        },
        {
            "name": "stp",
            "title": "Process labels",
            "kinds": ["steps"],
            "policy": OPEN,
            "members": raters,
            "items": [single("stp-1", STEPS_TEXT)],
        },
        {
            "name": "dem",
            "title": "Demonstrations",
            "kinds": ["demonstration"],
            "policy": OPEN,
            "members": raters,
            "items": [single("dem-1", "idk", "Write a haiku about autumn.")],
        },
        {
            "name": "agent",
            "title": "Agent trajectories",
            "kinds": ["pairwise"],
            "policy": OPEN,
            "members": raters,
            "items": [AGENT_ITEM],
        },
    ]


ALL_KINDS = ["pairwise", "ranking", "rubric", "unary", "steps", "demonstration"]


def three_item(key: str) -> dict[str, Any]:
    return {
        "id": key,
        "prompt": "Name a prime number.",
        "candidates": [
            {"id": "c1", "text": "7"},
            {"id": "c2", "text": "9"},
            {"id": "c3", "text": "11, and 13"},
        ],
    }


def multi_kind_projects(raters: dict[str, str]) -> list[dict[str, Any]]:
    """A project collecting every kind, with one-, two- and three-answer items and one item that
    declares its own kinds; and an empty pairwise-only project."""
    declared = {
        **pair_item("two-declared", "Write a limerick."),
        "metadata": {"kinds": ["demonstration"]},
    }
    return [
        {
            "name": "multi",
            "title": "Every kind",
            "kinds": ALL_KINDS,
            "policy": OPEN,
            "members": raters,
            "rubric": RUBRIC,
            "items": [
                single("one-1", STEPS_TEXT),
                pair_item("two-1"),
                three_item("three-1"),
                declared,
            ],
        },
        # a three-answer item cannot be imported into it (the import refuses items no kind fits)
        {
            "name": "pw3",
            "title": "Pairwise, three answers",
            "kinds": ["pairwise"],
            "policy": OPEN,
            "members": raters,
        },
    ]
