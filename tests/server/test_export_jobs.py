"""Issue 27 item 3: exports from the web app are background jobs, in a process of their own, with
progress, cancel, files to download, the CLI's options, and a restart rule: a job survives a
server restart or is reported failed, never silently lost.

Each test runs on SQLite and PostgreSQL (``db_url``). The app runs in-process (``TestClient``,
its lifespan included: the restart rule runs there); the job processes are real. A test that
must act while a job is in a given step runs the real job process with that step held
(``export_job_stub.py``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from typer.testing import CliRunner

from preflab.server import export_jobs, export_runner
from preflab.server.export_jobs import FINAL
from preflab.server.export_runner import RESTART_REASON, Runner

from .conftest import SRC, Seeded, seed
from .test_routes import _check_answer

STUB = Path(__file__).resolve().parent / "export_job_stub.py"
#: three raters on every item
POLICY = {"overlap_share": 1.0, "overlap_k": 3, "min_alpha": 0.9}
#: words (no tokenizer to load), no length gate (the fixture's answers differ in length)
BASE = {"format": "trl-preference", "length_gate": None, "length_unit": "words"}
CLI_BASE = ["--format", "trl-preference", "--no-length-gate", "--length-unit", "words"]
JOBS = "/api/v1/projects/demo/export-jobs"
N_ITEMS = 4


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _label(c: TestClient, token: str, prefer: str) -> None:
    while True:
        r = c.post("/api/v1/projects/demo/assignments/next", headers=_as(token))
        assert r.status_code in (200, 201), r.text
        task = r.json()["task"]
        if task is None:
            return
        winner = "a" if task["shown_order"][0] == prefer else "b"
        body = {
            "assignment_id": task["assignment_id"],
            "judgment": {"kind": "pairwise", "winner": winner, "strength": 2, "rationale": "r"},
        }
        assert (
            c.post("/api/v1/projects/demo/judgments", json=body, headers=_as(token)).status_code
            == 201
        )


def _project(db_url: str, app_for, dissent: str) -> tuple[TestClient, Seeded]:
    seeded = seed(db_url, n_items=N_ITEMS, raters=3, policy=POLICY)
    c = app_for(db_url)
    for rater, prefer in (("rater000", "a"), ("rater001", dissent), ("rater002", "a")):
        _label(c, seeded.tokens[rater], prefer)
    return c, seeded


@pytest.fixture
def labelled(db_url, app_for):
    """``(client, seeded)``: 4 items, each judged alike by 3 raters."""
    return _project(db_url, app_for, "a")


@pytest.fixture
def disputed(db_url, app_for):
    """The same, rater001 against the others: agreement below the project's floor."""
    return _project(db_url, app_for, "b")


def _poll(c: TestClient, token: str, job_id: int, ready, timeout: float = 90) -> dict:
    """The job once ``ready(job)`` (or as it is after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        r = c.get(f"{JOBS}/{job_id}", headers=_as(token))
        assert r.status_code == 200, r.text
        job = r.json()
        if ready(job) or time.monotonic() > deadline:
            return job
        time.sleep(0.1)


def _wait(c: TestClient, token: str, job_id: int, until=FINAL) -> dict:
    return _poll(c, token, job_id, lambda job: job["status"] in until)


def _start(c: TestClient, token: str, **body) -> dict:
    r = c.post(JOBS, json={**BASE, **body}, headers=_as(token))
    assert r.status_code == 202, r.text
    return r.json()


def _cli_export(db_url: str, out: Path, *args: str) -> dict:
    from preflab.cli import app

    result = CliRunner().invoke(
        app, ["export", "demo", *CLI_BASE, *args, "-o", str(out), "--db", db_url, "--json"]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _leftovers(exports: Path, job_id: int) -> list[Path]:
    """The job's directory and any temporary directory of its export."""
    project = exports / "demo"
    if not project.is_dir():
        return []
    return [p for p in project.iterdir() if p.name.startswith((f"job-{job_id}", f".job-{job_id}."))]


def _audit(c: TestClient, token: str, action: str) -> list[dict]:
    r = c.get("/api/v1/audit", params={"action": action}, headers=_as(token))
    assert r.status_code == 200, r.text
    return r.json()["events"]


def _stub(db_url: str, mode: str, job_id: int) -> subprocess.Popen:
    env = {**os.environ, "PREFLAB_DB": db_url, "PYTHONPATH": str(SRC)}
    return subprocess.Popen(
        [sys.executable, str(STUB), export_runner.WORKER_MODULE, mode, str(job_id)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


@pytest.fixture
def no_spawn(monkeypatch):
    """Apps started now start no job process (the test runs one, or none)."""
    monkeypatch.setattr(Runner, "start", lambda self, pk: None)


def test_a_job_reports_progress_and_its_files_equal_the_cli_export(labelled, db_url, tmp_path):
    c, seeded = labelled
    token = seeded.tokens["padmin"]
    created = _start(c, token)
    assert created["status"] == "queued" and created["requested_by"] == "padmin"
    _check_answer(c.app, "post", JOBS, created)
    job = _wait(c, token, created["id"])
    assert job["status"] == "done", job["error"]
    assert (job["phase"], job["done"], job["total"]) == ("done", N_ITEMS, N_ITEMS)
    assert job["started_at"] and job["finished_at"] and job["heartbeat_at"] and not job["error"]
    _check_answer(c.app, "get", f"{JOBS}/{job['id']}", job)
    names = {f["name"] for f in job["files"]}
    assert names == {"train.jsonl", "pair_metadata.jsonl", "README.md", "manifest.json"}
    cli = _cli_export(db_url, tmp_path / "cli")
    downloaded = {}
    for f in job["files"]:
        r = c.get(f["url"], headers=_as(token))
        assert r.status_code == 200
        assert r.headers["content-disposition"].startswith("attachment")
        downloaded[f["name"]] = r.content
    for data in ("train.jsonl", "pair_metadata.jsonl"):
        assert downloaded[data] == (tmp_path / "cli" / data).read_bytes(), data
    assert downloaded["train.jsonl"].count(b"\n") == N_ITEMS == cli["counts"]["rows_out"]
    manifest = json.loads(downloaded["manifest.json"])
    for key in ("counts", "gates", "filter", "agreement", "aggregation"):
        assert manifest[key] == cli[key], key
    for data in ("train.jsonl", "pair_metadata.jsonl"):
        assert manifest["files"][data] == cli["files"][data], "the same SHA-256"
    assert job["summary"][0] == f"{N_ITEMS} rows from 12 judgments on {N_ITEMS} items"
    # the export is one of the project's exports, and audited as the user's
    assert job["export_id"] is not None
    (event,) = [
        e for e in _audit(c, seeded.admin_token, "project.exported") if "job_id" in e["details"]
    ]
    assert event["actor"] == "padmin" and event["details"]["job_id"] == job["id"]
    assert event["details"]["export_id"] == job["export_id"]
    listed = c.get(JOBS, headers=_as(token)).json()
    assert [j["id"] for j in listed["jobs"]] == [job["id"]] and listed["next_before"] is None
    _check_answer(c.app, "get", JOBS, listed)


def test_the_progress_callback_follows_the_phases(labelled, db_url, tmp_path, monkeypatch):
    from preflab.io.export import ExportOptions, export_project, stream
    from preflab.store import make_engine

    monkeypatch.setattr(stream, "PROGRESS_EVERY", 1)
    calls: list[tuple[str, int, int]] = []
    engine = make_engine(db_url)
    options = ExportOptions(
        format="trl-preference",
        out=tmp_path / "o",
        length_gate=None,
        length_unit="words",
        force=True,
    )
    export_project(engine, "demo", options, progress=lambda *call: calls.append(call))
    engine.dispose()
    n = N_ITEMS
    # the streaming pipeline (two passes over the project): "read" item by item, then "write"
    phases = [phase for phase, _, _ in calls]
    assert phases[0] == "read" and phases[-1] == "write", calls
    assert all(total == n for _, _, total in calls), calls
    reads = [done for phase, done, _ in calls if phase == "read"]
    assert reads == sorted(reads) and reads[-1] == n, calls
    writes = [done for phase, done, _ in calls if phase == "write"]
    assert writes == sorted(writes) and writes[-1] == n, calls


def test_jobs_page_back_newest_first(labelled, no_spawn):
    c, seeded = labelled
    ids = [_start(c, seeded.admin_token)["id"] for _ in range(3)]
    first = c.get(JOBS, params={"limit": 2}, headers=_as(seeded.admin_token)).json()
    assert [j["id"] for j in first["jobs"]] == ids[:0:-1] and first["next_before"] == ids[1]
    rest = c.get(JOBS, params={"limit": 2, "before": ids[1]}, headers=_as(seeded.admin_token))
    assert [j["id"] for j in rest.json()["jobs"]] == ids[:1]
    assert rest.json()["next_before"] is None


def test_force_needs_a_reason_kept_in_the_job_the_audit_log_and_the_manifest(
    disputed, db_url, tmp_path
):
    c, seeded = disputed
    token = seeded.admin_token
    # below the floor without force: the job fails with the exporter's words
    refused = _wait(c, token, _start(c, token)["id"])
    assert refused["status"] == "failed" and "agreement below policy.min_alpha" in refused["error"]
    assert refused["files"] == [] and not _leftovers(tmp_path / "exports", refused["id"])
    no_reason = c.post(JOBS, json={**BASE, "force": True}, headers=_as(token))
    assert no_reason.status_code == 422 and no_reason.json()["errors"][0]["loc"] == [
        "body",
        "force_reason",
    ]
    blank = c.post(JOBS, json={**BASE, "force": True, "force_reason": "  "}, headers=_as(token))
    assert blank.status_code == 422
    unforced = c.post(JOBS, json={**BASE, "force_reason": "why not"}, headers=_as(token))
    assert unforced.status_code == 422 and "only for a forced export" in unforced.text
    why = "pilot batch: the rubric changed mid-way, adjudication comes next week"
    job = _wait(c, token, _start(c, token, force=True, force_reason=why)["id"])
    assert job["status"] == "done", job["error"]
    assert job["options"]["force"] is True and job["options"]["force_reason"] == why
    manifest = c.get(f"{JOBS}/{job['id']}/files/manifest.json", headers=_as(token)).json()
    card = c.get(f"{JOBS}/{job['id']}/files/README.md", headers=_as(token)).text
    cli = _cli_export(db_url, tmp_path / "cli", "--force")
    assert manifest["agreement"] == cli["agreement"] and manifest["agreement"]["forced"] is True
    assert "exported with --force" in card
    (created,) = [
        e for e in _audit(c, token, "export_job.created") if e["details"]["job_id"] == job["id"]
    ]
    assert created["details"]["force"] is True and created["details"]["force_reason"] == why
    (exported,) = [
        e for e in _audit(c, token, "project.exported") if e["details"].get("job_id") == job["id"]
    ]
    assert exported["details"]["force_reason"] == why


def test_bad_options_are_refused_before_any_job(labelled):
    c, seeded = labelled
    token = seeded.admin_token
    for body, words in (
        ({"format": "nope"}, "unknown export format 'nope'"),
        ({"length_gate": [0.9, 0.95]}, "length_gate [0.9, 0.95]: need 0 < min <= 1 <= max"),
        ({"aggregation": "vote"}, "aggregation 'vote': choose from"),
        ({"split": "../x"}, "split '../x'"),
        ({"data_source": "probe"}, "data_source"),
        ({"file_format": "csv"}, "file_format"),
        ({"min_raters": 0}, "min_raters"),
    ):
        r = c.post(JOBS, json={**BASE, **body}, headers=_as(token))
        assert r.status_code == 422 and words in r.text, (body, r.text)
    assert c.get(JOBS, headers=_as(token)).json()["jobs"] == []


def test_a_queued_job_is_cancelled_at_once(labelled, no_spawn, tmp_path):
    c, seeded = labelled
    token = seeded.tokens["padmin"]
    job = _start(c, token)
    r = c.post(f"{JOBS}/{job['id']}/cancel", headers=_as(token))
    assert r.status_code == 202 and r.json()["status"] == "cancelled"
    _check_answer(c.app, "post", f"{JOBS}/{job['id']}/cancel", r.json())
    again = c.post(f"{JOBS}/{job['id']}/cancel", headers=_as(token))
    assert again.status_code == 409 and "cancelled" in again.json()["detail"]
    assert not _leftovers(tmp_path / "exports", job["id"])
    (event,) = _audit(c, seeded.admin_token, "export_job.cancelled")
    assert event["details"] == {"job_id": job["id"], "was": "queued"}


def test_cancel_stops_a_running_job_at_its_next_progress_call(labelled, db_url, no_spawn, tmp_path):
    c, seeded = labelled
    token = seeded.admin_token
    job = _start(c, token)
    proc = _stub(db_url, "read", job["id"])
    try:
        running = _poll(c, token, job["id"], lambda j: j["phase"] == "read" or j["status"] in FINAL)
        assert (running["status"], running["phase"]) == ("running", "read"), running
        r = c.post(f"{JOBS}/{job['id']}/cancel", headers=_as(token))
        assert r.status_code == 202 and r.json()["cancel_requested"] is True
        done = _wait(c, token, job["id"])
        assert done["status"] == "cancelled" and done["files"] == [], done
        assert proc.wait(timeout=30) == 0, "the process stopped by itself"
    finally:
        proc.kill()
    assert not _leftovers(tmp_path / "exports", job["id"])


def test_cancel_ends_a_process_that_does_not_stop(
    labelled, db_url, no_spawn, tmp_path, monkeypatch
):
    monkeypatch.setattr(export_runner, "CANCEL_GRACE_S", 0.5)
    c, seeded = labelled
    token = seeded.admin_token
    job = _start(c, token)
    proc = _stub(db_url, "write", job["id"])
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "written"
        partial = _leftovers(tmp_path / "exports", job["id"])
        assert partial and all(p.name.startswith(f".job-{job['id']}.tmp-") for p in partial)
        # beside the output, pass 1's spill directory (the pair formats' row cache)
        output = [p for p in partial if ".tmp-spill-" not in p.name]
        assert len(output) == 1, partial
        assert (output[0] / "train.jsonl").is_file(), "the export's files are being written"
        r = c.post(f"{JOBS}/{job['id']}/cancel", headers=_as(token))
        assert r.status_code == 202
        done = _wait(c, token, job["id"])
        assert done["status"] == "cancelled", done
        assert proc.wait(timeout=30) is not None
    finally:
        proc.kill()
    assert not _leftovers(tmp_path / "exports", job["id"]), "no directory left behind"


def test_a_job_whose_process_died_with_the_server_is_failed_at_restart(
    labelled, db_url, no_spawn, app_for, tmp_path
):
    c, seeded = labelled
    token = seeded.admin_token
    job = _start(c, token)
    proc = _stub(db_url, "write", job["id"])
    assert proc.stdout is not None and proc.stdout.readline().strip() == "written"
    assert _wait(c, token, job["id"], until=("running",))["status"] == "running"
    c.__exit__(None, None, None)  # the server stops (its shutdown leaves job processes alone)
    assert proc.poll() is None, "the job's process outlives the server"
    os.killpg(proc.pid, signal.SIGKILL)  # and then dies (the machine went down)
    proc.wait(timeout=30)
    assert _leftovers(tmp_path / "exports", job["id"]), "it died with its files half written"
    restarted = app_for(db_url)
    failed = restarted.get(f"{JOBS}/{job['id']}", headers=_as(token)).json()
    assert failed["status"] == "failed" and failed["error"] == RESTART_REASON, failed
    assert not _leftovers(tmp_path / "exports", job["id"]), "the half-written files are gone"


def test_a_queued_job_starts_when_the_server_starts(labelled, db_url, app_for, monkeypatch):
    c, seeded = labelled
    token = seeded.admin_token
    with monkeypatch.context() as m:
        m.setattr(Runner, "start", lambda self, pk: None)
        job = _start(c, token)
        c.__exit__(None, None, None)
    assert job["status"] == "queued"
    restarted = app_for(db_url)
    done = _wait(restarted, token, job["id"])
    assert done["status"] == "done" and {f["name"] for f in done["files"]} >= {"train.jsonl"}


def test_a_running_job_without_a_heartbeat_fails(labelled, db_url, no_spawn):
    """A job another host runs whose heartbeat stopped (for STALE_S), or whose process on this
    host is gone: failed; another host's job that beats goes on."""
    from preflab.server.database import Database
    from preflab.store.models import utcnow
    from preflab.store.server_models import ExportJob

    c, seeded = labelled
    token = seeded.admin_token
    silent, fresh, dead = (_start(c, token)["id"] for _ in range(3))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid of this host that is no process any more
    db = Database(db_url, pool_size=1, max_overflow=1)
    old = utcnow() - export_runner.timedelta(seconds=export_runner.STALE_S + 5)
    with db.writing() as s:
        for pk, pid, host, beat in (
            (silent, 1, "elsewhere", old),
            (fresh, 1, "elsewhere", utcnow()),
            (dead, gone.pid, export_jobs.this_host(), utcnow()),
        ):
            s.execute(
                update(ExportJob)
                .where(ExportJob.pk == pk)
                .values(status="running", worker_pid=pid, worker_host=host, heartbeat_at=beat)
            )
    assert export_runner.fail_lost(db, export_runner.LOST_REASON) == [silent, dead]
    with db.reading() as s:
        states = dict(s.execute(select(ExportJob.pk, ExportJob.status)).all())
    db.dispose()
    assert states == {silent: "failed", fresh: "running", dead: "failed"}


def test_only_project_admins_start_read_cancel_or_download_jobs(labelled):
    c, seeded = labelled
    job = _wait(c, seeded.admin_token, _start(c, seeded.tokens["padmin"])["id"])
    assert job["status"] == "done"
    file_url = next(f["url"] for f in job["files"] if f["name"] == "train.jsonl")
    for who in ("rater000", "reviewer", "outsider"):
        h = _as(seeded.tokens[who])
        for method, url, body in (
            ("post", JOBS, BASE),
            ("get", JOBS, None),
            ("get", f"{JOBS}/{job['id']}", None),
            ("post", f"{JOBS}/{job['id']}/cancel", None),
            ("get", file_url, None),
        ):
            r = c.request(method, url, json=body, headers=h)
            assert r.status_code in (403, 404) and r.headers.get("x-preflab-denied") == "1", (
                who,
                method,
                url,
                r.status_code,
            )
            assert b'"chosen"' not in r.content
    assert c.get(file_url, headers=_as(seeded.tokens["padmin"])).status_code == 200


def test_only_the_listed_files_of_a_finished_job_are_served(labelled, tmp_path):
    c, seeded = labelled
    token = seeded.admin_token
    done = _wait(c, token, _start(c, token)["id"])
    assert done["status"] == "done"
    (tmp_path / "exports" / "demo" / f"job-{done['id']}" / "extra.txt").write_text("not listed")
    for name in ("extra.txt", "..%2F..%2F..%2Fpreflab.db", "%2Fetc%2Fpasswd", "train.jsonl%00"):
        r = c.get(f"{JOBS}/{done['id']}/files/{name}", headers=_as(token))
        assert r.status_code in (404, 422) and b"not listed" not in r.content, name
    from preflab.server.database import Database
    from preflab.store.repo import NotFound

    db = Database(seeded.url, pool_size=1, max_overflow=1)
    with db.reading() as s:
        job = export_jobs.get_job(s, 1, done["id"])
        s.expunge(job)
    db.dispose()
    assert export_jobs.job_file(job, "train.jsonl").is_file()
    for name in ("extra.txt", "../../preflab.db", "/etc/passwd", "../job-1/train.jsonl"):
        with pytest.raises(NotFound):
            export_jobs.job_file(job, name)
    job.status = "running"  # a job not done serves nothing
    with pytest.raises(NotFound):
        export_jobs.job_file(job, "train.jsonl")


def test_state_changes_from_a_browser_session_need_the_csrf_token(db_url, app_for):
    from preflab.server.auth import create_user, set_membership
    from preflab.server.database import Database
    from preflab.store import repo

    seed(db_url, n_items=2, raters=1)
    db = Database(db_url, pool_size=1, max_overflow=1)
    with db.writing() as s:
        boss, _ = create_user(s, "boss", password="a long enough password")
        set_membership(s, repo.get_project(s, "demo"), boss, "admin")
    db.dispose()
    c = app_for(db_url)
    login = c.post(
        "/api/v1/auth/login", json={"username": "boss", "password": "a long enough password"}
    )
    csrf = login.json()["csrf_token"]
    body = {"format": "raw"}
    assert c.post(JOBS, json=body).status_code == 403
    made = c.post(JOBS, json=body, headers={"X-CSRF-Token": csrf})
    assert made.status_code == 202
    cancel = f"{JOBS}/{made.json()['id']}/cancel"
    assert c.post(cancel).status_code == 403
    assert c.post(cancel, headers={"X-CSRF-Token": csrf}).status_code in (202, 409)


def test_of_two_processes_started_for_one_job_one_runs_it(labelled, db_url, no_spawn):
    """Several server workers may each start a process for a queued job (at start-up): the
    claim lets one run it; the export is written and recorded once."""
    from preflab.server.database import Database
    from preflab.store.models import ExportLog

    c, seeded = labelled
    token = seeded.admin_token
    job = _start(c, token)
    env = {**os.environ, "PREFLAB_DB": db_url, "PYTHONPATH": str(SRC)}
    argv = [sys.executable, "-m", export_runner.WORKER_MODULE, str(job["id"])]
    procs = [subprocess.Popen(argv, env=env) for _ in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    done = _wait(c, token, job["id"])
    assert done["status"] == "done", done["error"]
    db = Database(db_url, pool_size=1, max_overflow=1)
    with db.reading() as s:
        logs = s.scalars(select(ExportLog.pk).where(ExportLog.path.like(f"%job-{job['id']}"))).all()
    db.dispose()
    assert logs == [done["export_id"]]
    exported = [e for e in _audit(c, token, "project.exported") if e["details"].get("job_id")]
    assert len(exported) == 1


def test_a_running_job_survives_a_server_restart(labelled, db_url, no_spawn, app_for):
    c, seeded = labelled
    token = seeded.admin_token
    job = _start(c, token)
    proc = _stub(db_url, "read", job["id"])
    try:
        running = _poll(c, token, job["id"], lambda j: j["phase"] == "read" or j["status"] in FINAL)
        assert running["status"] == "running", running
        c.__exit__(None, None, None)
        restarted = app_for(db_url)
        after = restarted.get(f"{JOBS}/{job['id']}", headers=_as(token)).json()
        assert after["status"] == "running", "its process is alive: the new server keeps it"
        beat = after["heartbeat_at"]
        later = _poll(restarted, token, job["id"], lambda j: j["heartbeat_at"] != beat, timeout=30)
        assert later["heartbeat_at"] != beat and later["status"] == "running", "it still beats"
        restarted.post(f"{JOBS}/{job['id']}/cancel", headers=_as(token))
        assert _wait(restarted, token, job["id"])["status"] == "cancelled"
    finally:
        proc.kill()


def test_no_export_thread_outlives_the_app(labelled, db_url, tmp_path, monkeypatch):
    """The watcher of a job's process and the cancel being enforced stop when the app shuts
    down (the process goes on): no thread is left to use a database that may be gone."""
    from preflab.server.app import ServerConfig, create_app

    _, seeded = labelled
    token = seeded.admin_token
    real_popen = subprocess.Popen
    started: list[subprocess.Popen] = []

    def held(argv: list[str], **kw) -> subprocess.Popen:
        """The job's real process, held once its files are written (it does not stop)."""
        stub = [sys.executable, str(STUB), export_runner.WORKER_MODULE, "write", argv[-1]]
        proc = real_popen(stub, stdout=subprocess.PIPE, text=True, **kw)
        started.append(proc)
        return proc

    def export_threads() -> set[str]:
        return {t.name for t in threading.enumerate() if t.name.startswith("export-")}

    before = export_threads()  # the labelled fixture's own app: its sweep
    config = ServerConfig(db_url=db_url, exports_dir=tmp_path / "exports", pool_size=2)
    try:
        with TestClient(create_app(config=config)) as c:
            with monkeypatch.context() as m:
                m.setattr(export_runner.subprocess, "Popen", held)
                job = _start(c, token)
            (proc,) = started
            assert proc.stdout is not None and proc.stdout.readline().strip() == "written"
            r = c.post(f"{JOBS}/{job['id']}/cancel", headers=_as(token))
            assert r.status_code == 202 and r.json()["cancel_requested"] is True
            mine = {f"export-job-{job['id']}", f"export-cancel-{job['id']}"}
            assert mine <= export_threads(), "a watcher and the cancel's enforcer run"
        assert export_threads() == before, "every thread of the app's export jobs stopped"
        assert proc.poll() is None, "the job's process goes on after the server"
    finally:
        for p in started:
            export_runner.signal_group(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
