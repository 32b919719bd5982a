"""The web app's export as a background job against the synchronous route, on one project:

    python benchmarks/bench_export_jobs.py --pairs 10000

A SQLite project of ``--pairs`` items with 3 raters' pairwise labels each (``bench_export``'s
fill), the app in-process (``TestClient``). Timed: ``POST .../export-jobs`` (the answer), the
job to ``done`` (polled every 0.1 s), then ``POST .../exports`` (the exporter inside the
request); the server process's peak RSS (``VmHWM``) before and after each. The job's and the
synchronous export's data files are compared (the same bytes).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _hwm_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=10_000)
    parser.add_argument("--fill", type=Path, help=argparse.SUPPRESS)  # the child's work
    args = parser.parse_args(argv)
    if args.fill:  # in a process of its own: the server's peak RSS must not include it
        from bench_export import bench_end_to_end

        print(json.dumps(bench_end_to_end(args.pairs, args.fill)))
        return {}
    import subprocess

    from fastapi.testclient import TestClient

    from preflab.server.app import ServerConfig, create_app
    from preflab.server.auth import create_api_token, create_user
    from preflab.server.database import Database

    work = Path(tempfile.mkdtemp(prefix="bench-export-jobs-"))
    child = [sys.executable, __file__, "--pairs", str(args.pairs), "--fill", str(work)]
    fill = json.loads(subprocess.run(child, check=True, capture_output=True, text=True).stdout)
    url = f"sqlite:///{work / 'bench.db'}"
    database = Database(url, pool_size=2, max_overflow=2)
    with database.writing() as s:
        admin, _ = create_user(s, "root", is_admin=True)
        token, _ = create_api_token(s, admin, name="bench")
    database.dispose()
    h = {"Authorization": f"Bearer {token}"}
    body = {"format": "trl-reward", "file_format": "parquet", "force": True}
    config = ServerConfig(db_url=url, exports_dir=work / "exports", pool_size=2)
    out: dict = {"pairs": args.pairs, "judgments": fill["judgments"]}
    with TestClient(create_app(config=config)) as c:
        hwm0 = _hwm_mib()
        t = time.perf_counter()
        r = c.post(
            "/api/v1/projects/bench/export-jobs", json={**body, "force_reason": "bench"}, headers=h
        )
        out["job_answer_s"] = round(time.perf_counter() - t, 3)
        job = r.json()
        while job["status"] not in ("done", "failed", "cancelled"):
            time.sleep(0.1)
            job = c.get(f"/api/v1/projects/bench/export-jobs/{job['id']}", headers=h).json()
        out["job_done_s"] = round(time.perf_counter() - t, 2)
        out["job_status"] = job["status"]
        out["server_peak_rss_mib_before"] = round(hwm0, 1)
        out["server_peak_rss_mib_after_job"] = round(_hwm_mib(), 1)
        t = time.perf_counter()
        r = c.post("/api/v1/projects/bench/exports", json=body, headers=h)
        out["sync_answer_s"] = round(time.perf_counter() - t, 2)
        out["server_peak_rss_mib_after_sync"] = round(_hwm_mib(), 1)
        sync_files = r.json()["manifest"]["files"]
        job_files = {f["name"]: f["sha256"] for f in job["files"]}
        out["same_data_files"] = all(
            job_files[n] == f["sha256"] for n, f in sync_files.items() if n != "README.md"
        )
    print(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
