"""The scale benchmark on PostgreSQL (issue 27): a tiled size is the tiled SQLite project copied in
(``bench_tile_pg.py``), cached like every size; ``--hold-snapshot-claim`` holds the snapshot's
claim before the pages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.io.test_bench_tile import load


@pytest.mark.slow
@pytest.mark.postgres
def test_a_tiled_size_on_postgresql_is_the_tiled_sqlite_project_copied_in(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg
    from sqlalchemy import create_engine, text

    admin = pg_url.rsplit("/", 1)[0] + "/postgres"
    monkeypatch.setenv("PREFLAB_TEST_PG_URL", admin)
    bench = load("bench_scale")
    out = tmp_path / "scale.json"
    argv = ["--judgments", "300", "--judgments", "900", "--tile-from", "n300", "--db", "postgres"]
    argv += ["--work", str(tmp_path), "--json", str(out), "--quiet"]
    argv += ["--steps", "status", "page:dashboard", "--hold-snapshot-claim"]
    names = [f"preflab_scale_n{n}_s0_r100_p3_b4" for n in (300, 900)]
    try:
        bench.main(argv)
        small, large = json.loads(out.read_text())["cases"]
        assert "copied_from" not in small["steps"]["import"]
        built = large["steps"]["import"]
        assert built["status"] == "ok", built
        assert (built["tiled_from"], built["tiles"], built["copied_from"]) == ("n300", 3, "sqlite")
        assert large["steps"]["status"]["status"] == "ok"
        assert large["steps"]["page:dashboard"]["status"] == "ok"
        url = f"{pg_url.rsplit('/', 1)[0]}/{names[1]}"
        with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://")) as con:
            counts = [
                con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("judgments", "items", "import_batches")
            ]
            assert counts == [900, 300, 4]
            # the pages found the snapshot's refresh claimed: no request started one
            running = con.execute("SELECT running_since FROM quality_snapshots").fetchall()
            assert len(running) == 1 and running[0][0] is not None
        # cached: a second run copies nothing
        bench.main(argv)
        again = json.loads(out.read_text())["cases"][1]["steps"]["import"]
        assert again["cached"] is True and again["copied_from"] == "sqlite"
    finally:
        engine = create_engine(admin, isolation_level="AUTOCOMMIT")
        with engine.connect() as conn:
            for name in names:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()
