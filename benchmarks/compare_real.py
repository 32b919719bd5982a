"""Two checkouts' reports and exports of the real data sets compared (issue 27: "results
identical to today's on the test projects and on PandaLM + Tulu-1").

    python benchmarks/compare_real.py --data DATA --work /tmp/realid \\
        --old OLD/src --new src

imports PandaLM (3 annotators), Tulu-1 (17 evaluators, 5-level preferences and per-completion
thumbs), hh-rlhf harmless (one label a pair) and SQuALITY (rubric grades) into a fresh SQLite
database with ``--new``'s code (invalid source rows skipped, as ``preflab import --skip-invalid``
reports them), then, with each checkout's code in its own process, dumps every project's quality
report (``compare_reports.py dump``) and writes every export below (``--force``: a project under
the agreement floor is written all the same, marked). Reports are compared field by field (floats
to 1e-12), exports file by file by SHA-256; in ``manifest.json`` the run's own fields
(``created_at``, ``out``, the card's digest) and in ``README.md`` its time stamp are left out. Exits 1 if
anything differs; prints one line a comparison.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: project, judgment kinds, source file, import needs --skip-invalid
PROJECTS = (
    ("pandalm", "pairwise", "pandalm-testset-v1.json"),
    ("tulu", "pairwise,unary", "tulu1-human-eval.jsonl"),
    ("hh", "pairwise", "hh-rlhf-harmless-base-test.jsonl.gz"),
    ("squality", "pairwise,unary,rubric", "squality-human-eval.jsonl"),
)

#: (project, format, extra options)
EXPORTS = (
    ("pandalm", "trl-preference", ()),
    ("pandalm", "trl-preference", ("--aggregation", "dawid-skene")),
    ("pandalm", "trl-reward", ()),
    ("pandalm", "openrlhf", ()),
    ("pandalm", "trl-sft", ()),
    ("pandalm", "raw", ()),
    ("pandalm", "verl", ()),
    ("pandalm", "trl-preference", ("--file-format", "parquet")),
    ("tulu", "trl-preference", ()),
    ("tulu", "trl-preference", ("--aggregation", "dawid-skene", "--provenance-columns")),
    ("tulu", "trl-preference", ("--no-length-gate", "--min-raters", "2")),
    ("tulu", "openrlhf", ()),
    ("tulu", "trl-kto", ()),
    ("tulu", "raw", ()),
    ("hh", "trl-preference", ()),
    ("hh", "trl-reward", ()),
    ("squality", "trl-preference", ()),
    ("squality", "raw", ()),
)

#: the CLI of the checkout on PYTHONPATH (``preflab`` has no ``__main__``)
CLI = (
    sys.executable,
    "-c",
    "import sys; from preflab.cli import app; sys.argv[0] = 'preflab'; app()",
)

#: manifest fields that name the run, not the data
RUN_FIELDS = ("created_at", "out")


def _env(src: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(src).resolve())
    return env


def _run(cmd: list[str], src: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, env=_env(src), capture_output=True, text=True)
    if check and done.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return done


def build(data: Path, db: Path, src: str) -> None:
    """The four projects imported with ``src``'s code (skipping the sources' invalid rows)."""
    if db.exists():
        return
    url = f"sqlite:///{db}"
    cli = list(CLI)
    _run([*cli, "init", "--db", url], src)
    for name, kinds, file in PROJECTS:
        _run([*cli, "project", "create", name, "--kinds", kinds, "--db", url], src)
        _run([*cli, "import", name, str(data / file), "--skip-invalid", "--db", url], src)


#: an ISO time as the card writes the export's own
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00")


def _file_digest(path: Path) -> str:
    if path.name == "manifest.json":
        manifest = json.loads(path.read_text())
        for key in RUN_FIELDS:
            manifest.pop(key, None)
        manifest.get("options", {}).pop("out", None)
        # the card's digest covers its time stamp (the card is compared below, stamp left out)
        manifest.get("files", {}).get("README.md", {}).pop("sha256", None)
        body = json.dumps(manifest, sort_keys=True).encode()
    elif path.name == "README.md":
        body = STAMP.sub("TIME", path.read_text()).encode()
    else:
        body = path.read_bytes()
    return hashlib.sha256(body).hexdigest()


def tree_digests(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): _file_digest(p) for p in sorted(out.rglob("*")) if p.is_file()}


def outputs(db: Path, src: str, work: Path) -> dict[str, object]:
    """Every project's report dict and every export's file digests with ``src``'s code."""
    url = f"sqlite:///{db}"
    found: dict[str, object] = {}
    for name, _, _ in PROJECTS:
        dumped = work / f"report-{name}.json"
        _run(
            [sys.executable, str(HERE / "compare_reports.py"), "dump", url, name, str(dumped)], src
        )
        found[f"report {name}"] = json.loads(dumped.read_text())
    for k, (name, fmt, extra) in enumerate(EXPORTS):
        out = work / f"export-{k}"
        cmd = [*CLI, "export", name, "-f", fmt, "-o", str(out)]
        done = _run([*cmd, *extra, "--force", "--db", url], src, check=False)
        label = f"export {name} {fmt} {' '.join(extra)}".rstrip()
        found[label] = (
            tree_digests(out)
            if done.returncode == 0
            else f"exit {done.returncode}: " + done.stderr.strip().splitlines()[-1]
        )
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data",
        type=Path,
        required=True,
        help="a directory of the public source files named in PROJECTS",
    )
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--old", required=True, help="the base checkout's src")
    parser.add_argument("--new", required=True, help="the checkout's src under test")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from compare_reports import differences

    args.work.mkdir(parents=True, exist_ok=True)
    db = args.work / "real.db"
    build(args.data, db, args.new)
    runs = {}
    for side in ("old", "new"):
        side_dir = args.work / side
        subprocess.run(["rm", "-rf", str(side_dir)], check=True)
        side_dir.mkdir()
        runs[side] = outputs(db, getattr(args, side), side_dir)
    failed = 0
    for label, old in runs["old"].items():
        new = runs["new"][label]
        if label.startswith("report"):
            diff = differences(old, new)
            verdict = "identical" if not diff else f"{len(diff)} fields differ: {diff[:3]}"
        elif isinstance(old, str) or isinstance(new, str):
            verdict = "same refusal" if old == new else f"differ: {old!r} / {new!r}"
            diff = [] if old == new else [verdict]
        else:
            diff = [f for f in sorted(set(old) | set(new)) if old.get(f) != new.get(f)]
            files = ", ".join(sorted(old))
            verdict = f"identical ({files})" if not diff else f"files differ: {diff}"
        failed += bool(diff)
        print(f"{label}: {verdict}")
    print(f"{failed} of {len(runs['old'])} comparisons differ")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
