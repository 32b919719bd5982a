"""The repository's own machinery: one version, the PostgreSQL helper script."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tomllib
from pathlib import Path

import pytest

import preflab

REPO = Path(__file__).resolve().parents[1]


def test_the_version_is_defined_once():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    source = REPO / project["tool"]["hatch"]["version"]["path"]
    assert source.resolve() == Path(preflab.__file__).resolve()
    assert f"## [{preflab.__version__}]" in (REPO / "CHANGELOG.md").read_text()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_with_postgres_listens_on_the_port_it_is_given_and_prints_no_noise(tmp_path):
    have_initdb = shutil.which("initdb") or list(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not have_initdb:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL's initdb is required in CI but missing")
        pytest.skip("PostgreSQL's initdb not available")
    port = _free_port()
    # run from a directory the postgres user cannot enter (as root, the cluster runs as postgres)
    cwd = tmp_path / "private"
    cwd.mkdir(mode=0o700)
    result = subprocess.run(
        [str(REPO / "scripts" / "with-postgres.sh"), "sh", "-c", 'echo "$PREFLAB_TEST_PG_URL"'],
        cwd=cwd,
        env={**os.environ, "PREFLAB_PG_PORT": str(port)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    assert (
        len(result.stderr.splitlines()) == 1
    )  # only "with-postgres: PostgreSQL 15 on 127.0.0.1:PORT"
    assert (
        f"127.0.0.1:{port}" in result.stderr and "could not change directory" not in result.stderr
    )


def test_with_postgres_refuses_a_port_that_is_not_a_number():
    result = subprocess.run(
        [str(REPO / "scripts" / "with-postgres.sh"), "true"],
        capture_output=True,
        text=True,
        env={**os.environ, "PREFLAB_PG_PORT": "54x"},
        timeout=60,
    )
    if "initdb not found" in result.stderr:
        pytest.skip("PostgreSQL's initdb not available")
    assert result.returncode == 2 and "PREFLAB_PG_PORT=54x is not a port number" in result.stderr
