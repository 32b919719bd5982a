"""A ``labeler`` the admin declared a model is an AI label (issue 12 §1, issue 16 §3): stored as
``source: ai``, never as a human rater. Issue 28 §2: a name is evidence only by a declared exact
name or pattern (people called ``gemma`` or ``claude.dupont`` stay people), a record's own
``source`` always wins, and the import says how many labelers it took for models and why."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from preflab.cli import app
from preflab.io.formats.generic import ai_labeler_rule, is_ai_labeler, model_like
from preflab.io.importer import ImportOptions, import_files, labeler_lines
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


@pytest.mark.parametrize("name", MODELS + PEOPLE)
def test_no_name_is_a_model_by_itself(name):
    # Issue 28 §2: a name is evidence only when the admin declared it (exact name or pattern).
    assert not is_ai_labeler(name)
    assert ai_labeler_rule(name) is None


@pytest.mark.parametrize("name", MODELS + ["gemma", "claude.dupont"])
def test_model_like_names_are_only_a_hint(name):
    assert model_like(name)


def test_declared_names_and_patterns():
    assert ai_labeler_rule("judge-bot", frozenset({"judge-bot"})) == "name"
    assert ai_labeler_rule("Judge-Bot", frozenset({"judge-bot"})) is None, "names are exact"
    assert ai_labeler_rule("GPT-4o", patterns=("gpt-*",)) == "pattern:gpt-*"
    assert ai_labeler_rule("my-gpt-4", patterns=("gpt-*",)) is None, "a glob is the whole name"
    assert ai_labeler_rule("model:rm", patterns=("llm:*", "model:*")) == "pattern:model:*"


def comparison(labeler: str, chosen: str, rejected: str, **extra) -> dict:
    return {
        "id": "q",
        "prompt": "Which planet is largest?",
        "chosen": chosen,
        "rejected": rejected,
        "labeler": labeler,
        **extra,
    }


X = "Jupiter is the largest planet."
Y = "Saturn is the largest planet."


def test_people_named_like_models_keep_their_votes_in_the_export(engine, tmp_path):
    # Issue 28 §2, as reported: gemma and claude.dupont (X > Y) against bob (Y > X) exported
    # Y > X: the two people were taken for models by their names' prefixes and dropped.
    from preflab.io.export import ExportOptions, export_project

    path = jsonl(
        tmp_path / "comparisons.jsonl",
        comparison("gemma", X, Y),
        comparison("claude.dupont", X, Y),
        comparison("bob", Y, X),
    )
    report = import_files(engine, "p", [path])
    assert sources(engine) == {"gemma": "human", "claude.dupont": "human", "bob": "human"}
    assert report.ai_labelers == {}
    assert report.model_like_people == ["claude.dupont", "gemma"]
    out = tmp_path / "out"
    manifest = export_project(
        engine,
        "p",
        ExportOptions(
            format="trl-preference", out=out, length_gate=None, length_unit="words", min_alpha=0
        ),
    )
    rows = [orjson.loads(line) for line in (out / "train.jsonl").read_bytes().splitlines()]
    assert [(r["chosen"], r["rejected"]) for r in rows] == [(X, Y)]
    assert manifest["gates"]["source"]["dropped"] == 0


def test_a_stated_source_always_wins(engine, tmp_path):
    # Before: "source": "human" for a labeler named like a model was an import error.
    path = jsonl(
        tmp_path / "c.jsonl",
        {"prompt": "Q1", "chosen": "A", "rejected": "B", "labeler": "gpt-4", "source": "human"},
        {"prompt": "Q2", "chosen": "A", "rejected": "B", "labeler": "judge-bot", "source": "human"},
        {
            "prompt": "Q3",
            "chosen": "A",
            "rejected": "B",
            "labeler": "claude-3",
            "rationale": "r",
            "source": "ai_assisted",
        },
    )
    report = import_files(engine, "p", [path], ImportOptions(ai_labelers=("judge-bot",)))
    assert sources(engine) == {"gpt-4": "human", "judge-bot": "human", "claude-3": "ai_assisted"}
    assert report.ai_labelers == {
        "judge-bot": {"rule": "exact name given with --ai-labeler", "judgments": {"human": 1}}
    }
    assert labeler_lines(report)[0].startswith("1 labeler(s) classified as AI")
    assert "records that stated their source kept it: 1 human" in labeler_lines(report)[0]


def test_comparisons_jsonl_with_a_declared_model_labeler_is_stored_as_ai(engine, tmp_path):
    records = [
        {"id": f"c{n}", "prompt": f"Q{n}", "chosen": "A", "rejected": "B", "labeler": who}
        for n, who in enumerate(["gpt-4", "claude-3-opus", "alice"])
    ]
    report = import_files(
        engine,
        "p",
        [jsonl(tmp_path / "comparisons.jsonl", *records)],
        ImportOptions(ai_labelers=("gpt-4",), ai_labeler_patterns=("CLAUDE-*",)),
    )
    assert sources(engine) == {"gpt-4": "ai", "claude-3-opus": "ai", "alice": "human"}
    assert report.ai_labelers == {
        "claude-3-opus": {
            "rule": "pattern 'CLAUDE-*' in --ai-labeler-pattern",
            "judgments": {"ai": 1},
        },
        "gpt-4": {"rule": "exact name given with --ai-labeler", "judgments": {"ai": 1}},
    }


def test_declared_models_on_every_route(engine, tmp_path):
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
        {"prompt": "Q7", "chosen": "A", "rejected": "B", "labeler": "qwen-2"},  # not declared
    ]
    options = ImportOptions(
        ai_labelers=("ai",), ai_labeler_patterns=("gemini-*", "model:*", "llama-*", "gpt-*")
    )
    report = import_files(engine, "p", [jsonl(tmp_path / "trl.jsonl", *records)], options)
    assert sources(engine) == {
        "gemini-pro": "ai",
        "model:rm-v2": "ai",
        "llama-3": "ai",
        "ai": "ai",
        "gpt-4o": "ai",
        "bob": "human",
        "qwen-2": "human",
    }
    assert sorted(report.ai_labelers) == ["ai", "gemini-pro", "gpt-4o", "llama-3", "model:rm-v2"]
    assert report.model_like_people == ["qwen-2"]


def test_names_given_with_the_import_option(engine, tmp_path):
    path = jsonl(
        tmp_path / "c.jsonl",
        {"prompt": "Q", "chosen": "A", "rejected": "B", "labeler": "judge-bot"},
    )
    import_files(engine, "p", [path], ImportOptions(ai_labelers=("judge-bot",)))
    assert sources(engine) == {"judge-bot": "ai"}


def test_names_and_patterns_in_the_project_setting(engine, tmp_path):
    policy = Policy.model_validate({"ai_labelers": ["judge-bot"], "ai_labeler_patterns": ["rm-*"]})
    assert policy.ai_labelers == ["judge-bot"] and policy.ai_labeler_patterns == ["rm-*"]
    with pytest.raises(ValueError):
        Policy.model_validate({"ai_labeler_patterns": [""]})
    with transaction(engine) as s:
        repo.create_project(
            s,
            "patterned",
            kinds=["pairwise"],
            settings={"policy": {"ai_labelers": ["judge-bot"], "ai_labeler_patterns": ["rm-*"]}},
        )
    path = jsonl(
        tmp_path / "c.jsonl",
        {"prompt": "Q", "chosen": "A", "rejected": "B", "labeler": "judge-bot"},
        {"prompt": "Q", "chosen": "B", "rejected": "A", "labeler": "alice"},
        {"prompt": "Q", "chosen": "B", "rejected": "A", "labeler": "RM-v7"},
    )
    report = import_files(engine, "patterned", [path])
    assert sources(engine) == {"judge-bot": "ai", "alice": "human", "RM-v7": "ai"}
    assert {k: v["rule"] for k, v in report.ai_labelers.items()} == {
        "RM-v7": "pattern 'rm-*' in policy.ai_labeler_patterns",
        "judge-bot": "exact name in policy.ai_labelers",
    }


def test_ai_assisted_stays_ai_assisted(engine, tmp_path):
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
    import_files(engine, "p", [path], ImportOptions(ai_labelers=("claude-3",)))
    assert sources(engine) == {"alice": "ai_assisted", "claude-3": "ai_assisted"}


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
    assert "2 labeler(s) classified as AI" in result.output
    assert "judge-bot (exact name given with --ai-labeler; 1 judgment(s) stored as AI)" in (
        " ".join(result.output.split())
    )
    engine = db.open_db(f"sqlite:///{dbfile}")
    try:
        assert sources(engine) == {"judge-bot": "ai", "grader-7": "ai"}
    finally:
        engine.dispose()


def test_the_cli_says_how_many_labelers_are_ai_and_why(tmp_path):
    dbfile = str(tmp_path / "cli.db")
    runner = CliRunner()
    for args in (["init", "--db", dbfile], ["project", "create", "c", "--db", dbfile]):
        assert runner.invoke(app, args).exit_code == 0
    path = jsonl(
        tmp_path / "c.jsonl",
        comparison("gemma", X, Y),
        comparison("claude.dupont", X, Y),
        comparison("bob", Y, X),
        comparison("GPT-4o", Y, X),
    )
    args = ["import", "c", str(path), "--ai-labeler-pattern", "gpt-*", "--db", dbfile]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "1 labeler(s) classified as AI" in text
    assert "GPT-4o (pattern 'gpt-*' in --ai-labeler-pattern; 1 judgment(s) stored as AI)" in text
    assert "2 labeler(s) with names like models' kept as the records state" in text
    assert "claude.dupont, gemma" in text
    again = runner.invoke(app, ["import", "c", str(path), "--db", dbfile, "--json"])
    assert again.exit_code == 0 and orjson.loads(again.output)["already_imported"] is True


def test_a_declared_model_is_ai_in_judgment_records_too(engine, tmp_path):
    # Found by the export oracle (tests/io/test_export_oracle.py): the rule applied to TRL rows
    # only, so judge-bot's preflab judgment records (no source stated) were a person's and its
    # vote decided a pair without --include-ai, and the same name was one rater with two sources.
    item = {
        "id": "q",
        "prompt": "Which?",
        "candidates": [{"id": "a", "text": "one"}, {"id": "b", "text": "two"}],
    }

    def vote(rater, winner, **prov):
        return {
            "kind": "pairwise",
            "item_id": "q",
            "shown_order": ["a", "b"],
            "winner": winner,
            "provenance": {"rater_id": rater, **prov},
        }

    path = jsonl(
        tmp_path / "j.jsonl",
        item,
        vote("judge-bot", "a"),
        vote("pattern-bot", "a"),
        vote("carol", "a", source="ai"),
        vote("stated-bot", "a", source="human"),
        vote("alice", "b"),
    )
    options = ImportOptions(ai_labelers=("stated-bot",), ai_labeler_patterns=("pattern-*",))
    report = import_files(engine, "judged", [path], options)
    assert sources(engine) == {
        "judge-bot": "ai",  # policy.ai_labelers
        "pattern-bot": "ai",  # --ai-labeler-pattern
        "carol": "ai",  # stated
        "stated-bot": "human",  # a record's own source always wins
        "alice": "human",
    }
    assert set(report.ai_labelers) == {"judge-bot", "pattern-bot", "stated-bot"}
