"""An import's SQLite page cache is bounded (issue 27 §4): a large import spills its dirty pages
into the WAL before the commit instead of holding them, and writes the same rows, and a failed
one still changes nothing.

The page cache was the import's memory that grew with the project: allocated as it fills, 160 MiB
at the default filled at 1M judgments (the writer's peak RSS 389 MB against 195 MB with a 2 MiB
cache); the default is now :data:`CACHE_KIB_MAX` at most (``docs/benchmarks.md``, "Import
memory")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from preflab.io.importer import ImportFailed, import_files
from preflab.io.importer import loader as importer_loader
from preflab.settings import Settings
from preflab.store import db, repo, transaction
from preflab.store.models import ItemRow

from .test_import_repeats import EXPECTED, digest, imports, plain, small_chunks, write

__all__ = ["small_chunks"]  # the fixture, used by name

#: The largest default page cache that keeps an import's peak RSS flat (KiB).
CACHE_KIB_MAX = 32 * 1024


def test_the_default_import_page_cache_is_bounded():
    """Raising it back fills the cache with the import: +128 MB of peak RSS at 1M judgments."""
    assert Settings.model_fields["import_cache_kib"].default <= CACHE_KIB_MAX


@pytest.fixture
def spills(monkeypatch, tmp_path):
    """Each import's WAL growth while its transaction is open (bytes): what the page cache
    spilled before the commit (a cache that holds the import's pages spills nothing)."""
    grown: list[int] = []
    init, close = importer_loader.Loader.__init__, importer_loader.Loader.close

    def wal() -> int:
        return sum(p.stat().st_size for p in tmp_path.glob("*.db-wal"))

    def opened(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self._wal_before = wal()

    def closed(self: Any) -> None:
        close(self)
        grown.append(wal() - self._wal_before)

    monkeypatch.setattr(importer_loader.Loader, "__init__", opened)
    monkeypatch.setattr(importer_loader.Loader, "close", closed)
    return grown


@pytest.mark.slow
@pytest.mark.parametrize("worker", ["0", "1"], ids=["in-process", "converting-process"])
def test_an_import_spilling_its_page_cache_writes_todays_rows(
    tmp_path, monkeypatch, small_chunks, spills, worker
):
    """Repeats within and across chunks, aliases, exact repeats, a re-import: the rows of
    ``test_import_repeats`` (the digest computed before either change), with a page cache of a
    few pages."""
    monkeypatch.setenv("PREFLAB_IMPORT_WORKER", worker)
    monkeypatch.setenv("PREFLAB_IMPORT_CACHE_KIB", "64")
    url = f"sqlite:///{tmp_path / 'c.db'}"
    counts = imports(url, tmp_path)
    assert counts[2][4] and counts[3][:2] == (0, 0)
    assert spills[0] > 0  # pages went to the WAL before the commit: the test spilled
    assert digest(url) == EXPECTED


@pytest.mark.slow
def test_a_large_cache_spills_nothing(tmp_path, monkeypatch, small_chunks, spills):
    """The other side of :func:`spills`: it measures the spill, not the WAL's other writes."""
    monkeypatch.setenv("PREFLAB_IMPORT_WORKER", "0")
    monkeypatch.setenv("PREFLAB_IMPORT_CACHE_KIB", str(64 * 1024))
    url = f"sqlite:///{tmp_path / 'c.db'}"
    imports(url, tmp_path)
    assert spills[0] == 0
    assert digest(url) == EXPECTED


@pytest.mark.slow
@pytest.mark.parametrize("worker", ["0", "1"], ids=["in-process", "converting-process"])
def test_a_failed_import_that_spilled_changes_nothing(
    tmp_path, monkeypatch, small_chunks, spills, worker
):
    """Pages spilled into the WAL by a transaction that then fails are not the database's: a
    project with rows keeps exactly those rows, and the next import writes."""
    monkeypatch.setenv("PREFLAB_IMPORT_WORKER", worker)
    monkeypatch.setenv("PREFLAB_IMPORT_CACHE_KIB", "64")
    url = f"sqlite:///{tmp_path / 'f.db'}"
    engine = db.open_db(url)
    with transaction(engine) as s:
        repo.create_project(s, "p", kinds=["pairwise"])
    import_files(engine, "p", [write(tmp_path / "a.jsonl", [plain(i, i % 7) for i in range(600)])])
    before = digest(url)
    recs: list[Any] = [plain(i, 3 + i % 5) for i in range(300, 3000)]  # repeats, then new items
    recs.append({"prompt": "q5", "chosen": "good 5", "rejected": "good 5", "labeler": "r9"})
    bad = write(tmp_path / "b.jsonl", recs)
    with pytest.raises(ImportFailed) as failed:
        import_files(engine, "p", [bad])
    assert failed.value.total == 1
    assert spills[-1] > 0
    assert digest(url) == before
    with engine.connect() as conn:
        assert len(conn.execute(select(ItemRow.pk)).all()) == 600
    report = import_files(engine, "p", [write(tmp_path / "c.jsonl", recs[:-1])])
    assert report.items_added == 2400
    assert report.judgments_added + report.judgments_existing == 2700
    engine.dispose()


def test_cache_setting_is_applied_and_restored(tmp_path, monkeypatch):
    """The import's connection runs with the setting's cache and leaves with its own."""
    from sqlalchemy import text

    from preflab.io.importer import api as importer

    monkeypatch.setenv("PREFLAB_IMPORT_CACHE_KIB", "512")
    engine = db.make_engine(f"sqlite:///{Path(tmp_path) / 'r.db'}")
    with engine.connect() as conn:
        own = conn.execute(text("PRAGMA cache_size")).scalar()
        with importer._import_cache(conn):
            assert conn.execute(text("PRAGMA cache_size")).scalar() == -512
        assert conn.execute(text("PRAGMA cache_size")).scalar() == own
    engine.dispose()
