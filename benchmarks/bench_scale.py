"""How every read step scales with the project (issue 27): ``python benchmarks/bench_scale.py``.

    python benchmarks/bench_scale.py --sizes 100k 1m                  # SQLite
    scripts/with-postgres.sh python benchmarks/bench_scale.py --db sqlite postgres --sizes 100k
    python benchmarks/bench_scale.py --judgments 5000 --steps import report page:dashboard

Generates (seeded, deterministic) a project of N pairwise judgments: items content-identified
(prompt + two answers of a few hundred characters, of varied length so the length gate and the
tokenizer do real work), each judged by ``--raters-per-item`` raters (default 3) out of
``--raters`` (default 100) of varied reliability, with strengths, some rationales and submission
times over two weeks. Two thirds of the items come as comparison rows (``prompt, chosen,
rejected, labeler, strength``: the rows of one pair by several raters join one item); one third
as items with candidate ids followed by ``judgment`` records carrying the order the rater was
shown (``shown_order``). The records are split into ``--batches`` import files (batches).
``--kind unary`` generates production thumbs instead (the KTO path): items of one answer, each
judged up or down by ``--raters-per-item`` raters (cached apart, ``...-unary``); measure it with
``report``, ``snapshot``, ``status``, the pages and ``export:trl-kto``.

``10m`` is not generated (about two hours of generation and import here): it is the 1m
database tiled ten times in SQL by ``bench_tile.py`` (each tile's prompts marked, every key and
content hash recomputed as the importer does; a test holds the result equal to the import of the
tiled files). ``--tile-from SIZE`` tiles every larger size from that one (``nN`` for
``--judgments N``), ``--tile-from none`` generates and imports 10m too. On PostgreSQL a tiled size
is the tiled SQLite project copied in with ``COPY`` by ``bench_tile_pg.py`` (the same rows; a
test holds it equal to the PostgreSQL import of the tiled files).

Each step runs in a fresh subprocess (CPU user+sys from ``wait4``, wall time, peak RSS of the
process tree sampled from ``/proc``, the main process's own ``VmHWM`` included):

- ``import``: ``preflab init``, ``project create`` and one ``preflab import`` per batch file
  (CPU and wall summed, peak the largest);
- ``report``: ``preflab quality report --json --out report.html``;
- ``snapshot``: ``preflab quality snapshot --force``, the dashboard's statistics as the server
  computes them in its background process (the quality report streamed, plus per-rater activity
  and the near-duplicate rationales);
- ``export:FORMAT``: ``preflab export`` for every format that reads a pairwise project
  (:data:`EXPORTS`; ``--force``: the figures are the work, not the agreement gate);
  ``export:trl-preference:dawid-skene`` with ``--aggregation dawid-skene``;
  ``export:trl-preference:hf`` with ``--file-format hf`` (a ``datasets`` directory),
  ``export:trl-preference:parquet`` with ``--file-format parquet``;
- ``status``: ``preflab status --json``;
- ``page:dashboard``, ``page:data-first``, ``page:data-middle``, ``page:data-last`` (the data
  browser's pages as its links reach them: ``after=`` the previous page's last item),
  ``page:data-offset`` (the last page by ``offset=``, as older links and API clients ask: SQL
  ``OFFSET``, O(offset)), ``page:review`` (the review queues): a real ``preflab serve`` (one worker) on the same database,
  an admin logged in over HTTP; per request the server's wall time, CPU (``/proc/PID/stat``) and
  peak RSS during that request (the peak is reset by writing 5 to ``/proc/PID/clear_refs`` before
  it, ``VmHWM`` read after); ``--repeat N`` requests each page N times in a row (the pages in the
  order above, the review queues last) and records the medians, every run kept under ``runs``;
- ``baseline``: a bare streaming read of the judgments table (the columns the readers use,
  ``fetchmany``, every JSON column parsed with orjson) through sqlite3 / psycopg: what reading
  the project once costs, to which each step is compared.

A step that runs past ``--timeout`` is killed and recorded as ``timeout``, a failing one as
``failed`` with the end of its stderr. Generated files and imported databases are cached under
``--work`` keyed by size and seed (``--fresh`` regenerates and reimports); a cached import keeps
the figures it was measured with. Prints a table per database (figures, ratio to the baseline's
CPU and RSS, load average at the step) and the RSS growth between sizes (the criterion: peak RSS
does not grow with the project); ``--json PATH`` writes every figure. ``--against OTHER/src``
runs ``status``, the report and the exports with another checkout's code too (e.g. main's, the
baseline of a change), each just before this checkout's on the same database and under the same
load, recorded as ``STEP@base`` (the pages: a server of each checkout, the other's first).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import suppress
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
SRC = HERE.parent / "src"
PROJECT = "bench"
ADMIN, ADMIN_PASSWORD = "scale-admin", "scale-bench-password-1"
SIZES = {
    "20k": 20_000,
    "100k": 100_000,
    "300k": 300_000,
    "1m": 1_000_000,
    "3m": 3_000_000,
    "10m": 10_000_000,
}
#: sizes built by tiling a smaller one in the database (``bench_tile.py``) unless ``--tile-from``
#: says otherwise: generating and importing 10M judgments takes about two hours
TILED_FROM = {"3m": "1m", "10m": "1m"}
#: every export format that reads a project of pairwise judgments
EXPORTS = (
    "trl-preference",
    "trl-reward",
    "openrlhf",
    "raw",
    "trl-kto",
    "verl",
    "rollouts",
    "to-label",
    # these read every item and judgment too, and write no row from comparisons alone
    "trl-sft",
    "trl-stepwise",
    "trl-sft-agent",
    "rlhf-2026.11",
)
#: the file formats a step may name (export:FORMAT:FILE-FORMAT)
FILE_FORMATS = ("jsonl", "parquet", "hf")
PAGES = ("dashboard", "data-first", "data-middle", "data-last", "data-offset", "review")
#: the order steps run in: what the issue's criterion names first, the cheap ones early
STEPS = (
    "baseline",
    "import",
    "status",
    "report",
    "snapshot",
    "export:trl-preference",
    *(f"page:{p}" for p in PAGES),
    *(f"export:{f}" for f in EXPORTS if f != "trl-preference"),
    # FORMAT:AGGREGATION: the model aggregator, fitted on every vote of the project
    "export:trl-preference:dawid-skene",
    # FORMAT:FILE-FORMAT: a Hugging Face `datasets` directory (`--file-format hf`), Parquet
    "export:trl-preference:hf",
    "export:trl-preference:parquet",
)

# -- generation ---------------------------------------------------------------------------------

WORDS = (
    "the a of to and in is it that for on with as this be are by or from at an not which can "
    "function value list string number error file input output memory process thread request "
    "server client database table index query result cache key record batch step loop branch "
    "tree graph node edge path sort search merge split parse format check test case example "
    "because therefore however instead although first second then finally also only each every "
    "returns computes stores reads writes builds sends keeps drops counts compares measures "
    "quickly carefully safely correctly slowly exactly roughly twice once always never often "
    "simple complex small large empty full valid invalid stable recent local remote shared "
    "Python Rust SQL JSON HTTP Unicode naïve café résumé über 東京 數據 ключ данные"
).split()
TOPICS = (
    "sorting a list of records by two keys",
    "reading a large CSV file in constant memory",
    "retrying a failed HTTP request with backoff",
    "choosing an index for a slow SQL query",
    "explaining what a race condition is",
    "summarising a paragraph about photosynthesis",
    "translating a short sentence into French",
    "finding the median of a stream of numbers",
    "writing a polite reply to a customer complaint",
    "checking whether a string is a palindrome",
)
T0 = datetime(2026, 11, 1, 8, 0, tzinfo=UTC)


def _text(rng: random.Random, n_words: int) -> str:
    words = rng.choices(WORDS, k=n_words)
    out, at = [], 0
    while at < n_words:
        n = rng.randint(6, 14)
        out.append(" ".join(words[at : at + n]).capitalize() + rng.choice(".;.!?."))
        at += n
    return " ".join(out)


#: submission times spread over two weeks
SPAN = 14 * 24 * 3600


def _items(judgments: int, seed: int, raters: int, per_item: int):
    """Each item's ``(rng, reliability, index, raters judging it, prompt)``, in order: the
    generators' common head, one seeded stream (the raters' reliabilities drawn first)."""
    rng = random.Random(seed)
    reliability = [rng.uniform(0.72, 0.98) for _ in range(raters)]
    made = 0
    for i in range(-(-judgments // per_item)):
        k = min(per_item, judgments - made)
        prompt = f"[{seed}:{i}] {rng.choice(TOPICS).capitalize()}: " + _text(
            rng, rng.randint(8, 40)
        )
        yield rng, reliability, i, k, prompt
        made += k


def records(judgments: int, seed: int, raters: int = 100, per_item: int = 3):
    """The project's import records, in order (deterministic for ``seed``)."""
    for rng, reliability, i, k, prompt in _items(judgments, seed, raters, per_item):
        # answers from ~25 to ~180 words (a few hundred to ~1,200 characters); lengths vary within
        # a pair so that the length gate keeps some pairs and drops others
        base = rng.randint(25, 120)
        good = _text(rng, base)
        bad = _text(rng, max(5, int(base * rng.uniform(0.6, 1.5))))
        who = rng.sample(range(raters), k)
        when = sorted(rng.randrange(SPAN) for _ in range(k))
        explicit = i % 3 == 2  # a third: items with candidate ids, then judgments with shown_order
        if explicit:
            item_id = f"s{seed}-item-{i}"
            yield {
                "id": item_id,
                "prompt": prompt,
                "candidates": [{"id": "good", "text": good}, {"id": "bad", "text": bad}],
            }
        for r, t in zip(who, when, strict=True):
            right = rng.random() < reliability[r]
            strength = rng.choice((1, 1, 2, 2, 2, 3))
            # free text: a few stock phrases repeated by thousands of raters make the report's
            # near-duplicate search quadratic (measured; docs/benchmarks.md, "Scale")
            rationale = _text(rng, rng.randint(5, 25)) if rng.random() < 0.2 else None
            if explicit:
                shown = ["good", "bad"] if rng.random() < 0.5 else ["bad", "good"]
                winner = "a" if (shown[0] == "good") == right else "b"
                rec: dict[str, Any] = {
                    "kind": "pairwise",
                    "item_id": item_id,
                    "shown_order": shown,
                    "winner": winner,
                    "strength": strength,
                    "provenance": {
                        "rater_id": f"rater-{r:03d}",
                        "submitted_at": (T0 + timedelta(seconds=t)).isoformat(),
                    },
                }
            else:
                chosen, rejected = (good, bad) if right else (bad, good)
                rec = {
                    "prompt": prompt,
                    "chosen": chosen,
                    "rejected": rejected,
                    "labeler": f"rater-{r:03d}",
                    "strength": strength,
                }
            if rationale:
                rec["rationale"] = rationale
            yield rec


def unary_records(judgments: int, seed: int, raters: int = 100, per_item: int = 3):
    """A project of thumbs (production feedback, the KTO path), in order: items of one answer
    each (``candidates`` with one id), each judged up or down by ``per_item`` raters; an
    answer is good or not (60 % good) and a rater says so with their reliability."""
    for rng, reliability, i, k, prompt in _items(judgments, seed, raters, per_item):
        good = rng.random() < 0.6
        answer = _text(rng, rng.randint(25, 120) if good else rng.randint(5, 180))
        item_id = f"s{seed}-thumb-{i}"
        yield {"id": item_id, "prompt": prompt, "candidates": [{"id": "answer", "text": answer}]}
        who = rng.sample(range(raters), k)
        when = sorted(rng.randrange(SPAN) for _ in range(k))
        for r, t in zip(who, when, strict=True):
            right = rng.random() < reliability[r]
            rec: dict[str, Any] = {
                "kind": "unary",
                "item_id": item_id,
                "candidate_id": "answer",
                "label": good == right,
                "provenance": {
                    "rater_id": f"rater-{r:03d}",
                    "submitted_at": (T0 + timedelta(seconds=t)).isoformat(),
                },
            }
            if rng.random() < 0.2:
                rec["rationale"] = _text(rng, rng.randint(5, 25))
            yield rec


#: what a generated project's judgments are (``--kind``)
KINDS = {"pairwise": records, "unary": unary_records}


def generate(
    directory: Path,
    judgments: int,
    seed: int,
    raters: int,
    per_item: int,
    batches: int,
    kind: str = "pairwise",
) -> list[Path]:
    """Write the records into ``batches`` JSONL files of about equal size; their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    per_file = -(-judgments // batches)
    paths = [directory / f"batch-{b:02d}.jsonl" for b in range(batches)]
    files = [open(p, "wb") for p in paths]
    try:
        seen = 0
        for rec in KINDS[kind](judgments, seed, raters, per_item):
            # an item's records stay in the file its first judgment falls in
            b = min(seen // per_file, batches - 1)
            files[b].write(orjson.dumps(rec) + b"\n")
            if "candidates" not in rec:
                seen += 1
    finally:
        for f in files:
            f.close()
    return paths


# -- measuring a subprocess ---------------------------------------------------------------------


def _status_kib(pid: int, field: str) -> int:
    with suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants alive now."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        with suppress(OSError):
            for t in os.listdir(f"/proc/{p}/task"):
                with suppress(OSError):
                    todo += [
                        int(c) for c in Path(f"/proc/{p}/task/{t}/children").read_text().split()
                    ]
    return out


def _cpu_of(pid: int) -> float:
    """utime + stime of ``pid`` (seconds; its threads, not its children)."""
    with suppress(OSError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def measure(
    cmd: list[str], timeout: float, env: dict[str, str], stdout_path: Path | None = None
) -> dict[str, Any]:
    """Run ``cmd``; its wall time, CPU (user+sys of it and its children), peak RSS."""
    load = _load()
    out = open(stdout_path, "wb") if stdout_path else subprocess.DEVNULL
    err = tempfile.TemporaryFile()
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, start_new_session=True)
    peak_tree_kib = main_hwm_kib = 0
    status, rusage, rc = "ok", None, None
    while True:
        pid, st, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            rusage, rc = ru, os.waitstatus_to_exitcode(st)
            proc.returncode = rc
            break
        tree = _tree(proc.pid)
        peak_tree_kib = max(peak_tree_kib, sum(_status_kib(p, "VmRSS") for p in tree))
        main_hwm_kib = max(main_hwm_kib, _status_kib(proc.pid, "VmHWM"))
        if time.perf_counter() - start > timeout:
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            _, st, ru = os.wait4(proc.pid, 0)
            rusage, rc, status = ru, None, "timeout"
            break
        time.sleep(0.05 if time.perf_counter() - start < 5 else 0.5)
    wall = time.perf_counter() - start
    if out is not subprocess.DEVNULL:
        out.close()
    result: dict[str, Any] = {
        "status": status,
        "wall_s": round(wall, 2),
        "cpu_s": round(rusage.ru_utime + rusage.ru_stime, 2),
        "peak_rss_mb": round(max(peak_tree_kib, main_hwm_kib) / 1024, 1),
        "load": load,
    }
    if status == "ok" and rc != 0:
        err.seek(0)
        result.update(status="failed", rc=rc, stderr=err.read()[-2000:].decode(errors="replace"))
    err.close()
    return result


# -- the databases ------------------------------------------------------------------------------


def _env(src: Path = SRC) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")])),
        "PREFLAB_LOG_LEVEL": "warning",
    }


def _preflab(*args: str) -> list[str]:
    return [
        sys.executable,
        "-c",
        "import sys; from preflab.cli import app; sys.argv[0] = 'preflab'; app()",
        *args,
    ]


def _pg_admin() -> Any:
    from sqlalchemy import create_engine

    url = os.environ.get("PREFLAB_TEST_PG_URL")
    if not url:
        raise SystemExit(
            "--db postgres needs PREFLAB_TEST_PG_URL (run under scripts/with-postgres.sh)"
        )
    return url, create_engine(url, isolation_level="AUTOCOMMIT")


def database(kind: str, case: Path, tag: str, fresh: bool) -> tuple[str, bool]:
    """The database URL of this case and whether it holds the imported project already."""
    marker = case / f"imported-{kind}.json"
    if kind == "sqlite":
        path = case / "preflab.db"
        if fresh or not marker.exists():
            for p in case.glob("preflab.db*"):
                p.unlink()
            marker.unlink(missing_ok=True)
        return f"sqlite:///{path}", marker.exists()
    from sqlalchemy import text

    url, engine = _pg_admin()
    name = f"preflab_scale_{tag}".replace("-", "_")
    with engine.connect() as conn:
        exists = conn.execute(
            text("SELECT 1 FROM pg_database WHERE datname = :n"), {"n": name}
        ).first()
        # a marker from another server (a throwaway cluster) says nothing of this one
        if exists and marker.exists() and json.loads(marker.read_text()).get("server") == url:
            engine.dispose()
            return f"{url.rsplit('/', 1)[0]}/{name}", True
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    marker.unlink(missing_ok=True)
    return f"{url.rsplit('/', 1)[0]}/{name}", False


def step_import(
    url: str, files: list[Path], timeout: float, env: dict[str, str], kind: str = "pairwise"
) -> dict[str, Any]:
    setup = [
        _preflab("init", "--db", url),
        _preflab("project", "create", PROJECT, "--kinds", kind, "--db", url),
    ]
    for cmd in setup:
        r = measure(cmd, timeout, env)
        if r["status"] != "ok":
            return r
    parts = []
    for f in files:
        r = measure(_preflab("import", PROJECT, str(f), "--db", url, "--json"), timeout, env)
        parts.append(r)
        if r["status"] != "ok":
            return {**r, "batches": parts}
    return {
        "status": "ok",
        "wall_s": round(sum(p["wall_s"] for p in parts), 2),
        "cpu_s": round(sum(p["cpu_s"] for p in parts), 2),
        "peak_rss_mb": max(p["peak_rss_mb"] for p in parts),
        "load": parts[0]["load"],
        "batches": parts,
    }


def child_baseline(url: str) -> None:
    """A bare streaming read of the judgments with their JSON parsed (run as a child)."""
    cols = (
        "pk, item_pk, rater_pk, kind, body, rationale, pair_lo, pair_hi, score, shown_order, "
        "source, submitted_at, batch_pk, excluded, created_at"
    )
    sql = f"SELECT {cols} FROM judgments ORDER BY pk"
    n = 0
    if url.startswith("sqlite"):
        import sqlite3

        conn: Any = sqlite3.connect(url.split("///", 1)[1])
        cur = conn.execute(sql)
    else:
        import psycopg

        conn = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"))
        cur = conn.cursor(name="baseline")  # server-side: streamed, not fetched whole
        cur.execute(
            sql.replace("body,", "body::text,").replace("shown_order,", "shown_order::text,")
        )
    while rows := cur.fetchmany(10_000):
        for row in rows:
            orjson.loads(row[4])
            if row[9] is not None:
                orjson.loads(row[9])
            n += 1
    conn.close()
    print(n)


# -- the web pages ------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _count_items(url: str) -> int:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as conn:
        n = conn.execute(
            text(
                "SELECT count(*) FROM items i JOIN projects p ON p.pk = i.project_pk WHERE p.name = :p"
            ),
            {"p": PROJECT},
        ).scalar_one()
    engine.dispose()
    return int(n)


def _item_pk_before(url: str, offset: int) -> int:
    """The pk of the item just before the ``offset``-th (0: none), the ``after`` of a keyset link
    to the page that starts there."""
    if offset <= 0:
        return 0
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as conn:
        pk = conn.execute(
            text(
                "SELECT i.pk FROM items i JOIN projects p ON p.pk = i.project_pk WHERE p.name = :p "
                "ORDER BY i.pk LIMIT 1 OFFSET :o"
            ),
            {"p": PROJECT, "o": offset - 1},
        ).scalar_one()
    engine.dispose()
    return int(pk)


def hold_snapshot_claim(url: str, env: dict[str, str]) -> None:
    """Claim the project's next snapshot refresh (``snapshot.claim``, held for an hour) so that
    no page request starts the background process, whose CPU and memory would count in the
    server's process tree; the pages then show the stored snapshot, or "computing"."""
    code = (
        "import sys; from preflab.server.database import Database; "
        "from preflab.server import snapshot; from preflab.store import repo\n"
        "db = Database(sys.argv[1], pool_size=1, max_overflow=0)\n"
        "with db.writing() as s:\n"
        "    snapshot.claim(s, repo.get_project(s, sys.argv[2]).pk, force=True)\n"
        "db.dispose()"
    )
    subprocess.run([sys.executable, "-c", code, url, PROJECT], check=True, env=env)


def step_pages(
    url: str,
    pages: list[str],
    timeout: float,
    env: dict[str, str],
    tmp: Path,
    repeat: int = 1,
    hold_claim: bool = False,
) -> dict[str, dict[str, Any]]:
    """Start ``preflab serve`` on ``url``, log in as an admin, request each page ``repeat``
    times; per page the medians of wall time, CPU and peak RSS (:func:`_median_of`).
    ``hold_claim``: :func:`hold_snapshot_claim` first."""
    import httpx

    if hold_claim:
        hold_snapshot_claim(url, env)

    # (already there from an earlier run on this cached database: the same password)
    create = subprocess.run(
        _preflab("user", "create", ADMIN, "--admin", "--password-stdin", "--db", url),
        input=ADMIN_PASSWORD.encode(),
        capture_output=True,
        env=env,
    )
    if create.returncode != 0 and b"exist" not in create.stderr + create.stdout:
        failed = {"status": "failed", "stderr": create.stderr[-2000:].decode(errors="replace")}
        return {p: failed for p in pages}
    port = _free_port()
    log = open(tmp / "server.log", "wb")
    server = subprocess.Popen(
        _preflab(
            "serve",
            "--db",
            url,
            "--port",
            str(port),
            "--workers",
            "1",
            "--exports-dir",
            str(tmp / "exports"),
        ),
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    results: dict[str, dict[str, Any]] = {}
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=timeout) as client:
            for _ in range(600):
                if server.poll() is not None:
                    raise RuntimeError(f"server exited: {(tmp / 'server.log').read_text()[-2000:]}")
                with suppress(httpx.HTTPError):
                    if client.get("/api/v1/health").status_code == 200:
                        break
                time.sleep(0.2)
            r = client.post(
                "/api/v1/auth/login", json={"username": ADMIN, "password": ADMIN_PASSWORD}
            )
            r.raise_for_status()
            idle_mb = sum(_status_kib(p, "VmRSS") for p in _tree(server.pid)) / 1024
            n_items = _count_items(url) if any(p.startswith("data") for p in pages) else 0
            last = max(0, (n_items - 1) // 50 * 50)
            middle = last // 2 // 50 * 50
            # the middle and last pages as the page's own links reach them (keyset: after the
            # previous page's last item); data-offset: the last page by `offset=` (older links)
            after = {
                o: _item_pk_before(url, o)
                for o in {middle, last}
                if any(p in ("data-middle", "data-last") for p in pages)
            }
            paths = {
                "dashboard": f"/admin/p/{PROJECT}/dashboard",
                "data-first": f"/admin/p/{PROJECT}/data",
                "data-middle": f"/admin/p/{PROJECT}/data?after={after.get(middle, 0)}",
                "data-last": f"/admin/p/{PROJECT}/data?after={after.get(last, 0)}",
                "data-offset": f"/admin/p/{PROJECT}/data?offset={last}",
                "review": f"/p/{PROJECT}/review",
            }
            # a page's requests one after the other (a page that leaves the process larger, as
            # the review queues do, then weighs on no other page's peak but the later ones')
            for page in pages:
                runs = [
                    _request(client, server.pid, paths[page], timeout, idle_mb)
                    for _ in range(max(1, repeat))
                ]
                results[page] = _median_of(runs)
    except (httpx.HTTPError, RuntimeError) as exc:
        for page in pages:
            results.setdefault(page, {"status": "failed", "stderr": str(exc)[-2000:]})
    finally:
        with suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()
    return results


def _median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One run as is; several: the first's fields with the medians of wall time, CPU and peak
    RSS over the runs that succeeded (every run under ``runs``), a failure when none did."""
    if len(runs) == 1:
        return runs[0]
    ok = [r for r in runs if r["status"] == "ok"]
    if not ok:
        return {**runs[0], "runs": runs}
    import statistics

    out = dict(ok[0])
    for field in ("wall_s", "cpu_s", "peak_rss_mb"):
        out[field] = round(statistics.median(r[field] for r in ok), 3)
    out["load"] = max(r["load"] for r in runs)
    return {**out, "repeat": len(runs), "failed_runs": len(runs) - len(ok), "runs": runs}


def _request(
    client: Any, server_pid: int, path: str, timeout: float, idle_mb: float
) -> dict[str, Any]:
    import httpx

    tree = _tree(server_pid)
    for p in tree:  # reset the peak: VmHWM starts again from the current RSS
        with suppress(OSError):
            Path(f"/proc/{p}/clear_refs").write_text("5")
    cpu = sum(_cpu_of(p) for p in tree)
    load = _load()
    start = time.perf_counter()
    status = "ok"
    try:
        r = client.get(path, timeout=timeout)
        if r.status_code != 200:
            status = f"failed: HTTP {r.status_code}"
        size = len(r.content)
    except httpx.TimeoutException:
        status, size = "timeout", 0
    wall = time.perf_counter() - start
    tree = _tree(server_pid)
    return {
        "status": "ok" if status == "ok" else status.split(":")[0],
        **({"stderr": status} if status.startswith("failed") else {}),
        "wall_s": round(wall, 3),
        "cpu_s": round(sum(_cpu_of(p) for p in tree) - cpu, 3),
        "peak_rss_mb": round(sum(_status_kib(p, "VmHWM") for p in tree) / 1024, 1),
        "server_idle_rss_mb": round(idle_mb, 1),
        "bytes": size,
        "path": path,
        "load": load,
    }


# -- one case: a size on a database -------------------------------------------------------------


def _tag(args: argparse.Namespace, name: str) -> str:
    tag = f"{name}-s{args.seed}-r{args.raters}-p{args.raters_per_item}-b{args.batches}"
    return tag if args.kind == "pairwise" else f"{tag}-{args.kind}"


def tile_source(args: argparse.Namespace, name: str, n: int) -> tuple[str, int] | None:
    """The smaller size this one is tiled from (``--tile-from``; ``3m`` and ``10m`` from ``1m`` unless
    ``--tile-from none``), or ``None``: generated and imported."""
    source = args.tile_from or TILED_FROM.get(name)
    if source in (None, "none"):
        return None
    source_n = SIZES.get(source) or int(source[1:])
    if source_n >= n:
        return None
    if n % source_n:
        raise SystemExit(f"{name} is not a whole number of {source} tiles")
    return source, source_n


def prepare(
    args: argparse.Namespace, name: str, n: int, kind: str, say
) -> tuple[str, dict[str, Any], float | None]:
    """The database URL of a size holding its project (generated and imported, or tiled from a
    smaller size's, unless cached), the import's figures and the generation's seconds."""
    env = _env(args.src)
    tag = _tag(args, name)
    case = args.work / tag
    marker = case / f"imported-{kind}.json"
    tiled = tile_source(args, name, n)
    if tiled is not None and kind == "postgres":
        # the tiled SQLite project of this size (made unless cached), copied in with COPY
        case.mkdir(parents=True, exist_ok=True)
        url, imported = database(kind, case, tag, args.fresh)
        if imported:
            return url, {**json.loads(marker.read_text())["import"], "cached": True}, None
        sqlite_url, sqlite_import, _ = prepare(args, name, n, "sqlite", say)
        if sqlite_import["status"] != "ok":
            return url, {**sqlite_import, "tiled_from": tiled[0]}, None
        say(f"[{name}] copying the tiled SQLite project into PostgreSQL ...")
        r = measure(
            [sys.executable, str(HERE / "bench_tile_pg.py"), sqlite_url.split("///", 1)[1], url],
            args.timeout * 4,
            _env(),
        )
        r.update(tiled_from=tiled[0], tiles=n // tiled[1], copied_from="sqlite")
        if r["status"] == "ok":
            marker.write_text(
                json.dumps({"import": r, "server": os.environ.get("PREFLAB_TEST_PG_URL")})
            )
        return url, r, None
    if tiled is not None:
        source, source_n = tiled
        case.mkdir(parents=True, exist_ok=True)
        url, imported = database(kind, case, tag, args.fresh)
        if imported:  # the source is not needed then (nor made)
            return url, {**json.loads(marker.read_text())["import"], "cached": True}, None
        source_url, source_import, _ = prepare(args, source, source_n, kind, say)
        if source_import["status"] != "ok":
            return source_url, {**source_import, "tiled_from": source}, None
        say(f"[{name}] tiling {source} x{n // source_n} ...")
        r = measure(
            [
                sys.executable,
                str(HERE / "bench_tile.py"),
                source_url.split("///", 1)[1],
                url.split("///", 1)[1],
                str(n // source_n),
            ],
            args.timeout * 4,
            _env(),  # this checkout's hashing rules, whatever --src measures
        )
        r.update(tiled_from=source, tiles=n // source_n)
        if r["status"] == "ok":
            marker.write_text(json.dumps({"import": r, "server": None}))
        return url, r, None
    data_dir = case / "data"
    done = data_dir / "complete"
    if args.fresh and data_dir.exists():
        shutil.rmtree(data_dir)
    if not done.exists():
        t = time.perf_counter()
        files = generate(
            data_dir, n, args.seed, args.raters, args.raters_per_item, args.batches, args.kind
        )
        done.write_text(json.dumps({"seconds": round(time.perf_counter() - t, 1)}))
        say(
            f"[{name}] generated {n:,} judgments in {time.perf_counter() - t:.0f}s ({sum(f.stat().st_size for f in files) / 2**20:.0f} MiB)"
        )
    files = sorted(data_dir.glob("batch-*.jsonl"))
    generation_s = json.loads(done.read_text())["seconds"]
    url, imported = database(kind, case, tag, args.fresh)
    if imported:
        return url, {**json.loads(marker.read_text())["import"], "cached": True}, generation_s
    r = step_import(url, files, args.timeout, env, args.kind)
    if r["status"] == "ok":
        marker.write_text(
            json.dumps({"import": r, "server": os.environ.get("PREFLAB_TEST_PG_URL")})
        )
    return url, r, generation_s


def run_case(
    args: argparse.Namespace, name: str, n: int, kind: str, steps: list[str], say
) -> dict[str, Any]:
    env = _env(args.src)
    url, imported, generation_s = prepare(args, name, n, kind, say)
    out: dict[str, Any] = {
        "size": name,
        "judgments": n,
        "db": kind,
        "generation_s": generation_s,
        "steps": {},
    }
    results = out["steps"]

    def record(step: str, r: dict[str, Any]) -> None:
        results[step] = r
        say(f"[{name} {kind}] {step:<24} {_fmt(r)}")
        if args.json:  # every figure as it comes: a long run stopped halfway keeps what it had
            _write_json(args, out)

    record("import", imported)
    if imported["status"] != "ok":
        return out
    with tempfile.TemporaryDirectory(prefix="preflab-scale-", dir=args.work) as tmp_s:
        tmp = Path(tmp_s)
        pages = [s.split(":", 1)[1] for s in steps if s.startswith("page:")]

        def one(step: str, env: dict[str, str], suffix: str = "") -> dict[str, Any] | None:
            if step == "baseline":
                r = measure([sys.executable, __file__, "--child-baseline", url], args.timeout, env)
            elif step == "status":
                r = measure(
                    _preflab("status", PROJECT, "--db", url, "--json"),
                    args.timeout,
                    env,
                    tmp / "status.json",
                )
            elif step == "report":
                r = measure(
                    _preflab(
                        "quality",
                        "report",
                        PROJECT,
                        "--db",
                        url,
                        "--json",
                        "--out",
                        str(tmp / "report.html"),
                    ),
                    args.timeout,
                    env,
                    tmp / "report.json",
                )
            elif step == "snapshot":
                r = measure(
                    _preflab("quality", "snapshot", PROJECT, "--db", url, "--force"),
                    args.timeout,
                    env,
                )
            elif step.startswith("export:"):
                fmt, _, variant = step.split(":", 1)[1].partition(":")
                # FORMAT:AGGREGATION or FORMAT:FILE-FORMAT
                file_format = variant if variant in FILE_FORMATS else ""
                aggregation = "" if file_format else variant
                target = tmp / f"export-{fmt}"
                r = measure(
                    _preflab(
                        "export",
                        PROJECT,
                        "--format",
                        fmt,
                        "--out",
                        str(target),
                        "--force",
                        *(["--aggregation", aggregation] if aggregation else []),
                        *(["--file-format", file_format] if file_format else []),
                        "--db",
                        url,
                        "--json",
                    ),
                    args.timeout,
                    env,
                    tmp / f"export-{fmt}{'-' + variant if variant else ''}.json",
                )
                r["bytes"] = (
                    sum(f.stat().st_size for f in target.rglob("*") if f.is_file())
                    if target.exists()
                    else 0
                )
                shutil.rmtree(target, ignore_errors=True)
            elif step.startswith("page:"):
                if step.split(":", 1)[1] == pages[0]:  # one server for all the pages
                    for page, pr in step_pages(
                        url, pages, args.timeout, env, tmp, args.repeat, args.hold_snapshot_claim
                    ).items():
                        record(f"page:{page}{suffix}", pr)
                return None
            else:
                raise SystemExit(f"unknown step {step!r}")
            return r

        for step in steps:
            if step == "import":
                continue
            if args.against and (
                step in ("status", "report", "snapshot")
                or step.startswith("export:")
                or step == f"page:{pages[0] if pages else ''}"
            ):
                # the other checkout's code on the same database, just before: the same load
                base = one(step, {**env, "PYTHONPATH": str(args.against)}, "@base")
                if base is not None:
                    record(f"{step}@base", base)
            r = one(step, env)
            if r is not None:
                record(step, r)
    return out


def _fmt(r: dict[str, Any]) -> str:
    if r.get("status") not in ("ok", None):
        return f"{r['status'].upper()} after {r.get('wall_s', '?')} s {r.get('stderr', '')[-300:]}"
    cached = " (cached import)" if r.get("cached") else ""
    return f"CPU {r['cpu_s']:>8.2f} s  wall {r['wall_s']:>8.2f} s  peak RSS {r['peak_rss_mb']:>8.1f} MB  load {r['load']}{cached}"


def _write_json(args: argparse.Namespace, current: dict[str, Any] | None = None) -> None:
    cases = list(args.results)
    if current is not None and current not in cases:
        cases.append(current)
    doc = {
        "seed": args.seed,
        "raters": args.raters,
        "raters_per_item": args.raters_per_item,
        "batches": args.batches,
        "cpus": os.cpu_count(),
        "cases": cases,
        "growth": growth(cases),
    }
    Path(args.json).write_text(json.dumps(doc, indent=1))


def growth(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Peak RSS at each larger size / at the next smaller, per database and step."""
    out = []
    for kind in sorted({c["db"] for c in cases}):
        mine = sorted((c for c in cases if c["db"] == kind), key=lambda c: c["judgments"])
        for small, large in zip(mine, mine[1:], strict=False):
            for step, r in large["steps"].items():
                s = small["steps"].get(step)
                if s and s.get("status") == r.get("status") == "ok" and s["peak_rss_mb"] > 0:
                    out.append(
                        {
                            "db": kind,
                            "step": step,
                            "from": small["size"],
                            "to": large["size"],
                            "rss_growth": round(r["peak_rss_mb"] / s["peak_rss_mb"], 2),
                            "cpu_growth": round(r["cpu_s"] / s["cpu_s"], 2) if s["cpu_s"] else None,
                            "size_growth": round(large["judgments"] / small["judgments"], 2),
                        }
                    )
    return out


def print_tables(cases: list[dict[str, Any]]) -> None:
    for case in cases:
        steps = case["steps"]
        base = steps.get("baseline") if steps.get("baseline", {}).get("status") == "ok" else None
        print(f"\n{case['size']} ({case['judgments']:,} judgments), {case['db']}")
        print(
            f"{'step':<24} {'CPU s':>9} {'wall s':>9} {'peak MB':>9} {'xCPU':>7} {'xRSS':>6}  load"
        )
        for step, r in steps.items():
            if r.get("status") != "ok":
                print(f"{step:<24} {r['status'].upper():>9}  {r.get('wall_s', '')}")
                continue
            x_cpu = f"{r['cpu_s'] / base['cpu_s']:.1f}" if base and base["cpu_s"] else "-"
            x_rss = f"{r['peak_rss_mb'] / base['peak_rss_mb']:.1f}" if base else "-"
            print(
                f"{step:<24} {r['cpu_s']:>9.2f} {r['wall_s']:>9.2f} {r['peak_rss_mb']:>9.1f} {x_cpu:>7} {x_rss:>6}  {r['load']}"
            )
    rows = growth(cases)
    if rows:
        print("\npeak RSS growth (larger size / smaller; 1.0 = does not grow with the project)")
        for g in rows:
            print(
                f"{g['db']:<9} {g['step']:<24} {g['from']}->{g['to']} (x{g['size_growth']:g} judgments): RSS x{g['rss_growth']}, CPU x{g['cpu_growth']}"
            )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=["100k"], choices=list(SIZES))
    parser.add_argument(
        "--judgments", type=int, action="append", help="a size by number (repeatable)"
    )
    parser.add_argument(
        "--db",
        nargs="+",
        default=["sqlite", "postgres"] if os.environ.get("PREFLAB_TEST_PG_URL") else ["sqlite"],
        choices=["sqlite", "postgres"],
        help="default: sqlite, and postgres when PREFLAB_TEST_PG_URL is set",
    )
    parser.add_argument(
        "--steps", nargs="+", default=list(STEPS), help=f"default: all ({' '.join(STEPS)})"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--raters", type=int, default=100)
    parser.add_argument("--raters-per-item", type=int, default=3)
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument(
        "--kind",
        choices=list(KINDS),
        default="pairwise",
        help="the generated judgments: pairwise comparisons (default), or unary thumbs on one "
        "answer an item (production feedback; measure it with report, snapshot, status, the "
        "pages and export:trl-kto)",
    )
    parser.add_argument(
        "--work", type=Path, default=Path(tempfile.gettempdir()) / "preflab-bench-scale"
    )
    parser.add_argument("--fresh", action="store_true", help="regenerate and reimport")
    parser.add_argument(
        "--tile-from",
        help="build every larger size by tiling this size's database (bench_tile.py; SQLite): "
        f"one of {' '.join(SIZES)}, nN (--judgments N); default: 3m and 10m from 1m; none: generate "
        "and import every size",
    )
    parser.add_argument(
        "--src",
        type=Path,
        default=SRC,
        help="the preflab source tree whose steps are measured (default: this checkout's src; "
        "a before/after comparison runs twice, e.g. with an exported older commit)",
    )
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per step")
    parser.add_argument("--json", help="write every figure here")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument(
        "--against",
        type=Path,
        help="another checkout's src (e.g. main's): status, report and exports run with it too, "
        "each just before this checkout's, recorded as STEP@base",
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="requests of each page (the medians are recorded)"
    )
    parser.add_argument(
        "--hold-snapshot-claim",
        action="store_true",
        help="before the pages, claim the project's snapshot refresh so that no request starts "
        "the background snapshot process (counted in the server's tree otherwise)",
    )
    parser.add_argument("--child-baseline", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child_baseline:
        child_baseline(args.child_baseline)
        return {}
    if args.tile_from not in (None, "none", *SIZES) and not re.fullmatch(
        r"n[1-9][0-9]*", args.tile_from
    ):
        parser.error(f"--tile-from {args.tile_from}: a size ({' '.join(SIZES)}), nN or none")
    unknown = [s for s in args.steps if s not in STEPS]
    if unknown:
        parser.error(f"unknown steps {unknown}; choose from {' '.join(STEPS)}")
    steps = [s for s in STEPS if s in args.steps]  # always in this order; import always runs
    if "import" not in steps:
        steps.insert(0, "import")
    sizes = [(s, SIZES[s]) for s in args.sizes] if not args.judgments else []
    sizes += [(f"n{n}", n) for n in args.judgments or []]
    args.work.mkdir(parents=True, exist_ok=True)
    args.results = []
    say = (lambda *a: None) if args.quiet else (lambda *a: print(*a, flush=True))
    for kind in args.db:
        for name, n in sorted(sizes, key=lambda s: s[1]):
            args.results.append(run_case(args, name, n, kind, steps, say))
            if args.json:
                _write_json(args)
    if not args.quiet:
        print_tables(args.results)
    doc = {"cases": args.results, "growth": growth(args.results)}
    if args.json:
        _write_json(args)
    return doc


if __name__ == "__main__":
    main()
