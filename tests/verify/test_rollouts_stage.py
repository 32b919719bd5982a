"""``preflab verify rollouts``: rollouts scored by the real verifiers, pass@k from the verdicts,
guessable tasks flagged and left out (math and SQL tasks: no sandbox needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from preflab.cli import app
from preflab.verify.guess import check_guessability, trivial_answers
from preflab.verify.passk import pass_at_k
from preflab.verify.rollouts import load_tasks_with_meta, read_rollouts, score_rollouts
from preflab.verify.tasks import MathTask, TaskFileError

SHOP = Path(__file__).resolve().parents[2] / "examples" / "verify" / "shop.sqlite"

TASKS = [
    {"task_id": "frac", "kind": "math", "answer": "\\frac{7}{12}", "prompt": "1/3 + 1/4?"},
    {"task_id": "pi", "kind": "math", "answer": "\\pi", "tolerance": 1e-4, "domain": "geometry"},
    {
        "task_id": "mc",
        "kind": "math",
        "answer": "3",
        "prompt": "How many sides has a triangle? (A) 2 (B) 3",
        "choices": ["2", "3"],
    },
    {
        "task_id": "rows",
        "kind": "sql",
        "fixture": str(SHOP),
        "reference_query": "SELECT COUNT(*) FROM customers",
        "prompt": "How many customers?",
    },
]
RIGHT = {"frac": "\\boxed{\\frac{7}{12}}", "pi": "\\boxed{3.14159}", "mc": "\\boxed{3}"}
WRONG = {"frac": "\\boxed{\\frac{2}{7}}", "pi": "\\boxed{3}", "mc": "\\boxed{2}"}
RIGHT["rows"] = "SELECT COUNT(id) FROM customers"
WRONG["rows"] = "SELECT COUNT(*) FROM orders"
PASSES = {"frac": 3, "pi": 0, "mc": 5, "rows": 8}  # of 8 samples each


def write(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def rollouts(n: int = 8):
    for task in TASKS:
        tid = task["task_id"]
        for i in range(n):
            text = RIGHT[tid] if i < PASSES[tid] else WRONG[tid]
            yield {
                "prompt": task.get("prompt", tid),
                "response": text,
                "reward": None,
                "model": "m",
                "domains": ["from-rollout"] if tid == "frac" else [],
                "metadata": {"task_id": tid, "sample_index": i},
            }


@pytest.fixture
def files(tmp_path):
    return write(tmp_path / "tasks.jsonl", TASKS), write(tmp_path / "r.jsonl", rollouts())


def test_pass_at_k_from_verdicts_and_guessable_left_out(files):
    tasks, meta = load_tasks_with_meta(files[0])
    assert meta["mc"].choices == ["2", "3"] and meta["pi"].domain == "geometry"
    result = score_rollouts(tasks, meta, read_rollouts(files[1], tasks), ks=(1, 8), resamples=50)
    report = result.report
    # the multiple-choice task pays its own option B: flagged, out of pass@k
    assert set(report["guessability"]["flagged"]) == {"mc"}
    assert report["guessability"]["flagged"]["mc"] == ["option B (boxed)"]
    assert report["excluded_from_pass_at_k"] == ["mc"]
    assert report["overall"]["tasks"] == 3
    for tid in ("frac", "pi", "rows"):
        entry = report["tasks"][tid]
        assert (entry["n"], entry["c"]) == (8, PASSES[tid])
        assert entry["pass@1"] == pytest.approx(pass_at_k(8, PASSES[tid], 1))
    assert report["tasks"]["mc"]["guessable"] and "pass@1" not in report["tasks"]["mc"]
    # domains: the task's own, else the rollouts', else the kind
    assert report["tasks"]["pi"]["domain"] == "geometry"
    assert report["tasks"]["frac"]["domain"] == "from-rollout"
    assert report["tasks"]["rows"]["domain"] == "sql"
    expected = (pass_at_k(8, 3, 1) + 0 + 1) / 3
    assert report["overall"]["pass@1"]["value"] == pytest.approx(expected)
    # scored rows: the verifier's reward and reason
    rewards = [r["reward"] for r in result.scored if r["metadata"]["task_id"] == "frac"]
    assert rewards == [1.0] * 3 + [0.0] * 5
    assert result.scored[0]["metadata"]["verdict"]["passed"] is True


def test_without_the_check_every_task_counts(files):
    tasks, meta = load_tasks_with_meta(files[0])
    rs = read_rollouts(files[1], tasks)
    report = score_rollouts(tasks, meta, rs, ks=(1,), resamples=10, guess=False).report
    assert report["overall"]["tasks"] == 4 and report["guessability"]["flagged"] == {}


def test_guessability_flags_constants_echoes_and_options(tmp_path):
    tasks = {
        "one": MathTask(task_id="one", kind="math", answer="1"),
        "zero_sql": load_tasks_with_meta(
            write(
                tmp_path / "t.jsonl",
                [
                    {
                        "task_id": "zero_sql",
                        "kind": "sql",
                        "fixture": str(SHOP),
                        "expected_rows": [[0]],
                    }
                ],
            )
        )[0]["zero_sql"],
        "echo": MathTask(task_id="echo", kind="math", answer="42"),
        "hard": MathTask(task_id="hard", kind="math", answer="\\frac{7}{12}"),
        "option": MathTask(task_id="option", kind="math", answer="17"),
    }
    prompts = {"echo": "answer: 42", "hard": "What is 1/3 + 1/4?"}
    choices = {"option": ["12", "17", "19"]}
    report = check_guessability(tasks, prompts, choices)
    assert report.flagged["one"] == ["constant '1' (boxed)"]
    assert "constant '0' (SELECT)" in report.flagged["zero_sql"]
    assert report.flagged["echo"] == ["prompt echoed"]
    assert report.flagged["option"] == ["option B (boxed)"]
    assert "hard" not in report.flagged
    assert report.checked == 5


def test_trivial_answers_are_unique_and_include_each_option():
    task = MathTask(task_id="t", kind="math", answer="2")
    answers = trivial_answers(task, "Pick one", ["x", "y"])
    texts = [a.answer for a in answers]
    assert len(texts) == len(set(texts))
    assert {"", "Pick one", "0", "1", "yes", "no", "x", "y", "A", "B"} <= set(texts)
    assert "\\boxed{y}" in texts


def test_bad_rollouts_are_reported_by_line(tmp_path, files):
    tasks, _ = load_tasks_with_meta(files[0])
    bad = write(
        tmp_path / "bad.jsonl",
        [
            {"prompt": "p", "response": "x", "metadata": {"task_id": "frac"}},
            {"prompt": "p", "response": "x", "metadata": {"task_id": "nope"}},
            {"prompt": "p", "response": 3, "task_id": "frac"},
        ],
    )
    with pytest.raises(TaskFileError) as e:
        read_rollouts(bad, tasks)
    assert f"{bad}:2: metadata.task_id: 'nope'" in str(e.value)
    assert f"{bad}:3: response" in str(e.value)


def test_cli_writes_scored_rollouts_and_the_report(files, tmp_path):
    out, report = tmp_path / "scored.jsonl", tmp_path / "passk.json"
    result = CliRunner().invoke(
        app,
        [
            "verify", "rollouts", str(files[0]), str(files[1]),
            "--out", str(out), "--report", str(report), "--k", "1", "--k", "8", "-w", "1",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "pass@8" in result.output and "overall" in result.output
    assert "guessable, left out of pass@k: mc" in result.output
    data = json.loads(report.read_text())
    assert data["ks"] == [1, 8] and data["rollouts"] == 32
    assert len(out.read_text().splitlines()) == 32


def test_cli_refuses_an_unknown_task(files, tmp_path):
    bad = write(tmp_path / "r.jsonl", [{"prompt": "p", "response": "x", "task_id": "nope"}])
    result = CliRunner().invoke(app, ["verify", "rollouts", str(files[0]), str(bad)])
    assert result.exit_code == 2
    assert "is not a task of the tasks file" in result.output
