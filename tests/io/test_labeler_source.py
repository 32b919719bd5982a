"""A ``labeler`` that names a model is an AI label (issue 12 section 1, issue 16 section 3):
stored as ``source: ai``, never as a human rater."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from preflab.cli import app
from preflab.io.formats.generic import is_ai_labeler
from preflab.io.importer import ImportFailed, ImportOptions, import_files
from preflab.server.policy import Policy
from preflab.store import db, repo, transaction
from preflab.store.models import JudgmentRow, Rater

MODELS = [
    "gpt-4",
    "GPT-4o-mini",
    "gpt4",
    "claude-3-opus",
    "ai",
    "model:my-rm",
    "gemini-1.5-pro",
    "llama-3-70b",
    "Llama2",
    "mistral-large",
    "qwen2-72b",
    "deepseek-v3",
    "o1-preview",
    "chatgpt",
]
PEOPLE = ["alice", "bob", "aisha", "gianni", "modeler", "r1", "hh-rlhf:crowd", "claudia"]


@pytest.fixture
def engine(db_url):
    engine = db.open_db(db_url)
    with transaction(engine) as s:
        repo.create_project(s, "p", kinds=["pairwise", "unary"])
        repo.create_project(
            s, "judged", kinds=["pairwise"], settings={"policy": {"ai_labelers": ["judge-bot"]}}
        )
    yield engine
    engine.dispose()


def jsonl(path: Path, *records) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def sources(engine) -> dict[str, str]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(Rater.rater_key, JudgmentRow.source).join(
                Rater, Rater.pk == JudgmentRow.rater_pk
            )
        )
        return dict(rows.all())


@pytest.mark.parametrize("name", MODELS)
def test_model_names_are_ai(name):
    assert is_ai_labeler(name)


@pytest.mark.parametrize("name", PEOPLE)
def test_people_are_not(name):
    assert not is_ai_labeler(name)


def test_comparisons_jsonl_with_a_model_labeler_is_stored_as_ai(engine, tmp_path):
    # comparisons.jsonl: {"id", "prompt", "chosen", "rejected", "labeler"}; before: every labeler was human
    records = [
        {"id": f"c{n}", "prompt": f"Q{n}", "chosen": "A", "rejected": "B", "labeler": who}
        for n, who in enumerate(["gpt-4", "claude-3-opus", "alice"])
    ]
    import_files(engine, "p", [jsonl(tmp_path / "comparisons.jsonl", *records)])
    assert sources(engine) == {"gpt-4": "ai", "claude-3-opus": "ai", "alice": "human"}


def test_trl_rows_on_every_route(engine, tmp_path):
    records = [
        {"prompt": "Q1", "chosen": "A", "rejected": "B", "labeler": "gemini-pro"},  # the lean path
        {
            "prompt": "Q2",
            "chosen": "A",
            "rejected": "B",
            "labeler": "model:rm-v2",
            "rationale": "r",
        },  # general
        {
            "prompt": [{"role": "user", "content": "Q3"}],
            "chosen": [{"role": "assistant", "content": "A"}],
            "rejected": [{"role": "assistant", "content": "B"}],
            "labeler": "llama-3",
        },  # conversational
        {"prompt": "Q4", "completion": "A", "label": True, "labeler": "ai"},  # unpaired
        {
            "chosen": "\n\nHuman: Q5\n\nAssistant: A",
            "rejected": "\n\nHuman: Q5\n\nAssistant: B",
            "labeler": "gpt-4o",
        },  # hh-rlhf
        {"prompt": "Q6", "chosen": "A", "rejected": "B", "labeler": "bob"},
    ]
    import_files(engine, "p", [jsonl(tmp_path / "trl.jsonl", *records)])
    assert sources(engine) == {
        "gemini-pro": "ai",
        "model:rm-v2": "ai",
        "llama-3": "ai",
        "ai": "ai",
        "gpt-4o": "ai",
        "bob": "human",
    }


def test_names_given_with_the_import_option(engine, tmp_path):
    path = jsonl(
        tmp_path / "c.jsonl",
        {"prompt": "Q", "chosen": "A", "rejected": "B", "labeler": "judge-bot"},
    )
    import_files(engine, "p", [path], ImportOptions(ai_labelers=("judge-bot",)))
    assert sources(engine) == {"judge-bot": "ai"}


def test_names_in_the_project_setting(engine, tmp_path):
    assert Policy.model_validate({"ai_labelers": ["judge-bot"]}).ai_labelers == ["judge-bot"]
    path = jsonl(
        tmp_path / "c.jsonl",
        {"prompt": "Q", "chosen": "A", "rejected": "B", "labeler": "judge-bot"},
        {"prompt": "Q", "chosen": "B", "rejected": "A", "labeler": "alice"},
    )
    import_files(engine, "judged", [path])
    assert sources(engine) == {"judge-bot": "ai", "alice": "human"}


def test_a_model_stated_as_human_is_an_error(engine, tmp_path):
    path = jsonl(
        tmp_path / "c.jsonl",
        {"prompt": "Q", "chosen": "A", "rejected": "B", "labeler": "gpt-4", "source": "human"},
    )
    with pytest.raises(
        ImportFailed, match=r"c.jsonl:1: source: 'human', but labeler 'gpt-4' names a model"
    ):
        import_files(engine, "p", [path])


def test_ai_assisted_stays_ai_assisted_unless_the_labeler_is_a_model(engine, tmp_path):
    path = jsonl(
        tmp_path / "c.jsonl",
        {
            "prompt": "Q",
            "chosen": "A",
            "rejected": "B",
            "labeler": "alice",
            "source": "ai_assisted",
        },
        {
            "prompt": "Q",
            "chosen": "A",
            "rejected": "B",
            "labeler": "claude-3",
            "source": "ai_assisted",
        },
    )
    import_files(engine, "p", [path])
    assert sources(engine) == {"alice": "ai_assisted", "claude-3": "ai"}


def test_the_cli_option(tmp_path):
    dbfile = str(tmp_path / "cli.db")
    runner = CliRunner()
    for args in (["init", "--db", dbfile], ["project", "create", "c", "--db", dbfile]):
        assert runner.invoke(app, args).exit_code == 0
    path = jsonl(
        tmp_path / "c.jsonl",
        {"prompt": "Q", "chosen": "A", "rejected": "B", "labeler": "judge-bot"},
        {"prompt": "Q", "chosen": "A", "rejected": "B", "labeler": "grader-7"},
    )
    result = runner.invoke(
        app,
        [
            "import",
            "c",
            str(path),
            "--ai-labeler",
            "judge-bot",
            "--ai-labeler",
            "grader-7",
            "--db",
            dbfile,
        ],
    )
    assert result.exit_code == 0, result.output
    engine = db.open_db(f"sqlite:///{dbfile}")
    try:
        assert sources(engine) == {"judge-bot": "ai", "grader-7": "ai"}
    finally:
        engine.dispose()
