"""``preflab serve``'s own checks before uvicorn starts."""

from __future__ import annotations

import uvicorn
from typer.testing import CliRunner

from preflab.cli import app
from preflab.server import cli as server_cli


def test_more_workers_than_cores_are_warned_about(tmp_path, monkeypatch) -> None:
    """Workers beyond the cores add CPU a request and no throughput (measured: docs/server.md):
    serve says so, names the count that fits, and still starts what was asked for."""
    db = tmp_path / "p.db"
    assert CliRunner().invoke(app, ["init", "--db", str(db)]).exit_code == 0
    started = []
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: started.append(kw["workers"]))
    monkeypatch.setattr(server_cli, "usable_cores", lambda: 2)
    for workers, warned in ((2, False), (4, True)):
        result = CliRunner().invoke(app, ["serve", "--db", str(db), "--workers", str(workers)])
        assert result.exit_code == 0, result.output
        assert ("4 workers on 2 usable core(s)" in result.stderr) is warned
        assert ("--workers 2" in result.stderr) is warned
    assert started == [2, 4]


def test_the_warning_is_only_for_more_workers_than_cores() -> None:
    assert server_cli.workers_warning(1, 1) is None
    assert server_cli.workers_warning(8, 8) is None
    assert "consider --workers 3" in (server_cli.workers_warning(5, 3) or "")
