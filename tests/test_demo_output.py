"""Issue 11, the demo: the CLI demo names every file it wrote (the export's manifest too), its
web project has the same name and title, and the demo passwords are kept in a file only the
owner can read, whose path is printed."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

from typer.testing import CliRunner

SRC = Path(__file__).resolve().parents[1] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))


def test_the_demo_names_every_file_it_wrote(tmp_path):
    from preflab.cli import app

    out_dir = tmp_path / "demo-output"
    result = CliRunner().invoke(app, ["demo", "--dir", str(out_dir)], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    written = {
        p.resolve()
        for p in out_dir.rglob("*")
        if p.is_file() and not p.name.endswith(("-wal", "-shm"))
    }
    printed = {
        Path(line.strip()).resolve()
        for line in result.output.split("files written:")[1].splitlines()
        if line.strip().startswith("/")
    }
    assert written == printed
    assert any(p.name == "manifest.json" for p in printed)


def test_the_web_demo_uses_the_same_project_and_keeps_passwords_private(tmp_path):
    from preflab.demo import DEMO_PROJECT, DEMO_TITLE
    from preflab.server.webdemo import build_demo, write_passwords

    demo = build_demo(f"sqlite:///{tmp_path / 'demo.db'}", n_items=4, n_qualification=2)
    assert demo["project"] == DEMO_PROJECT
    from preflab.server.database import Database
    from preflab.store import repo

    db = Database(f"sqlite:///{tmp_path / 'demo.db'}", pool_size=1, max_overflow=0)
    with db.reading() as s:
        assert repo.get_project(s, DEMO_PROJECT).title == DEMO_TITLE
    db.dispose()
    path = write_passwords(tmp_path / "demo-passwords.txt", demo["passwords"])
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().splitlines()[0] == f"admin {demo['passwords']['admin']}"


def test_a_second_demo_keeps_the_web_apps_labels_and_its_banner_counts_the_project(tmp_path):
    """Issue 31: `make demo` run twice wiped the web app's database (projects, users, labels),
    and its banner counted records (45 items / 5 qualification) where the project held 42 / 3."""
    from preflab.cli import app
    from preflab.server.webdemo import build_demo, demo_counts, read_passwords, write_passwords

    out_dir = tmp_path / "demo-output"
    server = out_dir / "server"
    server.mkdir(parents=True)
    url = f"sqlite:///{(server / 'demo.db').resolve()}"
    demo = build_demo(url, n_items=10, n_qualification=3)
    write_passwords(server / "demo-passwords.txt", demo["passwords"])
    stored = demo_counts(url)
    assert (demo["items"], demo["qualification"]) == (stored["items"], stored["qualification"])
    assert stored["items"] > 0 and stored["qualification"] > 0

    result = CliRunner().invoke(app, ["demo", "--dir", str(out_dir)], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    assert (server / "demo.db").is_file(), "the CLI demo left the web app's database alone"
    assert demo_counts(url) == stored
    assert read_passwords(server / "demo-passwords.txt") == demo["passwords"]
    assert (out_dir / "preflab.db").is_file()
