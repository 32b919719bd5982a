"""Candidate text statistics stored at write time (issue 27): the stored values are the
functions' own, every write path fills them, the backfill is idempotent and resumable, and the
export's files and the report's dict are the same with all, some and none of them stored (and
with counts of another tokenizer, which the export must not take)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import orjson
import pytest
from sqlalchemy import delete, func, select, update

from preflab.io import text_stats
from preflab.io.export import token_cache
from preflab.io.importer import ImportOptions, import_files
from preflab.quality import accumulate
from preflab.quality.bias import FEATURE_NAMES, default_token_length, text_features, word_length
from preflab.quality.text_stats import MEMO
from preflab.store import db, repo, transaction
from preflab.store.models import CandidateRow, CandidateTextStats, TextStatsVersion

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def _module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_streaming = _module("export_streaming_helpers_text_stats", HERE / "test_export_streaming.py")
_files = _streaming._files
differences = _module(
    "compare_reports_text_stats", ROOT / "benchmarks" / "compare_reports.py"
).differences

#: texts of every shape the features and counts look at
TEXTS = [
    "",
    " ",
    "plain words only",
    "Great question! You're absolutely right, I apologise.",
    "You are correct, and happy to help",
    "# Title\n\n## Sub\n- one\n- two\n1. first\n2) second\n**bold** and __also__",
    "   ### indented header\n* star bullet\n+ plus bullet",
    "- a bullet without a newline",
    "Naïve café — ünïcödé, 中文字符 and emoji 🎉🎉 İstanbul ıi ſ",
    "GREAT QUESTION İ what a wonderful idea",
    "tabs\tand\nnewlines\r\nand  double  spaces",
    "Certainly! Here is the answer.",
    "word " * 3000 + "**long** # not a header",
    "\u200bzero\u200bwidth and \x00 control \x7f chars",
]


def test_the_stored_values_are_the_functions():
    batch, fingerprint = text_stats.token_length()
    assert batch is not None and fingerprint  # the default tokenizer is installed here
    count = default_token_length()
    for t, v in zip(TEXTS, text_stats.compute(TEXTS, batch), strict=True):
        feats = text_features(t)
        assert v == (count(t), word_length(t), *(feats[n] for n in FEATURE_NAMES)), t
    # and without a tokenizer: no counts, the rest the same
    for t, v in zip(TEXTS, text_stats.compute(TEXTS, None), strict=True):
        assert v[0] is None and v[1] == word_length(t)


def _project(engine, tmp_path: Path, name: str = "ts") -> None:
    """Pairwise labels by three raters on items whose answers are :data:`TEXTS` (some twice:
    a text shared by items), with strengths (the verbosity penalty measures too)."""
    answers = [t.replace("\x00", "") for t in TEXTS if t.strip()]  # PostgreSQL: no NUL
    rows = [
        {
            "prompt": f"Question {n}?",
            "chosen": answers[n % len(answers)] + (" more" * (n % 4)),
            "rejected": answers[(n * 7 + 3) % len(answers)],
            "labeler": rater,
            "strength": 1 + (n + k) % 3,
        }
        for n in range(24)
        for k, rater in enumerate(("ann", "bob", "cyd"))
    ]
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(b"\n".join(orjson.dumps(r) for r in rows) + b"\n")
    with transaction(engine) as s:
        repo.create_project(s, name, kinds=["pairwise"])
    import_files(engine, name, [path], ImportOptions())


@pytest.fixture
def engine(db_url, tmp_path):
    engine = db.open_db(db_url)
    _project(engine, tmp_path)
    MEMO.clear()
    yield engine
    MEMO.clear()
    engine.dispose()


def _stored(engine) -> dict[int, tuple]:
    s = CandidateTextStats.__table__.c
    with transaction(engine) as session:
        return {
            r[0]: tuple(r[1:])
            for r in session.execute(
                select(s.candidate_pk, s.tokens, s.words, s.headers, s.bullets, s.bold,
                       s.sycophancy, s.opening_validation)
            )
        }  # fmt: skip


def _texts(engine) -> dict[int, str]:
    with transaction(engine) as session:
        return dict(session.execute(select(CandidateRow.pk, CandidateRow.text)).all())


def test_the_import_stores_every_candidates_statistics(engine):
    texts, stored = _texts(engine), _stored(engine)
    assert set(stored) == set(texts) and len(texts) > 20
    for pk, text in texts.items():
        assert stored[pk] == text_stats.compute([text], text_stats.token_length()[0])[0]


def test_the_backfill_is_idempotent_and_resumable(engine):
    full = _stored(engine)
    with transaction(engine) as s:
        s.execute(delete(CandidateTextStats))
    stop = RuntimeError("stopped")

    def interrupt(done: int) -> None:
        if done >= 10:
            raise stop

    with db.session_factory(engine)() as session, pytest.raises(RuntimeError):
        text_stats.fill(session, batch=5, commit=True, progress=interrupt)
    assert len(_stored(engine)) == 10  # the committed batches stay
    with db.session_factory(engine)() as session:
        assert text_stats.fill(session, batch=7, commit=True) == len(full) - 10
        assert text_stats.fill(session, batch=7, commit=True) == 0  # nothing the second time
    assert _stored(engine) == full
    # rows of another version (another tokenizer) are replaced
    with transaction(engine) as s:
        s.add(TextStatsVersion(features_version=1, tokenizer="another"))
        s.flush()
        other = s.scalar(select(TextStatsVersion.pk).where(TextStatsVersion.tokenizer == "another"))
        s.execute(update(CandidateTextStats).values(version_pk=other, tokens=1))
    with db.session_factory(engine)() as session:
        assert text_stats.fill(session, commit=True) == len(full)
    assert _stored(engine) == full


def test_the_cli_backfills(engine, db_url):
    from typer.testing import CliRunner

    from preflab.cli import app

    with transaction(engine) as s:
        s.execute(delete(CandidateTextStats).where(CandidateTextStats.candidate_pk % 2 == 0))
    n = len(_texts(engine))
    result = CliRunner().invoke(app, ["db", "text-stats", "--db", db_url, "--batch", "4"])
    assert result.exit_code == 0, result.output
    assert (
        f"for {n // 2} candidate" in result.output or f"for {n - n // 2} candidate" in result.output
    )
    assert len(_stored(engine)) == n
    again = CliRunner().invoke(app, ["db", "text-stats", "--db", db_url])
    assert "for 0 candidate" in again.output


def _partly(engine) -> None:
    """Every third candidate without its row."""
    with transaction(engine) as s:
        s.execute(delete(CandidateTextStats).where(CandidateTextStats.candidate_pk % 3 == 0))


def _none(engine) -> None:
    with transaction(engine) as s:
        s.execute(delete(CandidateTextStats))


def _other_tokenizer(engine) -> None:
    """Every row's counts of another tokenizer (wrong counts: taken, they would change files)."""
    with transaction(engine) as s:
        s.add(TextStatsVersion(features_version=1, tokenizer="another tokenizer"))
        s.flush()
        other = s.scalar(select(func.max(TextStatsVersion.pk)))
        s.execute(
            update(CandidateTextStats).values(
                version_pk=other, tokens=CandidateTextStats.tokens * 5 + 1
            )
        )


def _export(engine, out: Path) -> dict[str, bytes]:
    from preflab.io.export import ExportOptions, export_project

    MEMO.clear()
    export_project(engine, "ts", ExportOptions(out=out, format="trl-preference", force=True))
    return _files(out)


@pytest.fixture
def hashed(monkeypatch):
    """How many texts the export's length cache and the report's text cache digested (a text
    with stored statistics is not)."""
    seen = {"export": 0, "report": 0}
    real_key, real_report_key = token_cache._key, accumulate.TextFeatures.key

    def key(text):
        seen["export"] += 1
        return real_key(text)

    def report_key(text):
        seen["report"] += 1
        return real_report_key(text)

    monkeypatch.setattr(token_cache, "_key", key)
    monkeypatch.setattr(accumulate.TextFeatures, "key", staticmethod(report_key))
    return seen


def test_the_export_is_the_same_with_all_some_and_no_stored_counts(
    engine, frozen_clock, small_chunks, hashed, tmp_path
):
    full = _export(engine, tmp_path / "out")
    assert hashed["export"] == 0  # every length stored: nothing digested, nothing tokenized
    assert any(name.endswith(".jsonl") for name in full)
    for change in (_partly, _other_tokenizer, _none):
        change(engine)
        hashed["export"] = 0
        assert _export(engine, tmp_path / "out") == full, change.__name__
        assert hashed["export"] > 0, change.__name__  # the texts without counts were measured


def test_stored_counts_are_read(engine, frozen_clock, small_chunks, tmp_path):
    """The check above is not vacuous: counts changed in the table change the export."""
    full = _export(engine, tmp_path / "out")
    with transaction(engine) as s:
        s.execute(update(CandidateTextStats).values(tokens=CandidateTextStats.tokens * 5 + 1))
    assert _export(engine, tmp_path / "out") != full


def _report(engine) -> dict:
    from preflab.io.quality_source import report_from_store

    MEMO.clear()
    with transaction(engine) as s:
        return report_from_store(s, "ts", n_boot=20)


def test_the_report_is_the_same_with_all_some_and_no_stored_features(engine, hashed):
    full = _report(engine)
    assert hashed["report"] == 0  # every text's features stored
    for change in (_partly, _none):
        change(engine)
        hashed["report"] = 0
        assert differences(_report(engine), full) == [], change.__name__
        assert hashed["report"] > 0, change.__name__
    # and changed stored features change the report: they are read
    with transaction(engine) as s:
        s.execute(delete(CandidateTextStats))
    with db.session_factory(engine)() as session:
        text_stats.fill(session, commit=True)
    with transaction(engine) as s:
        s.execute(update(CandidateTextStats).values(bold=CandidateTextStats.bold + 1, words=0))
    assert differences(_report(engine), full) != []
