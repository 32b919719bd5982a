"""What a ``preflab`` command costs from start to end (issue 27, CLI start-up).

    python benchmarks/bench_cli_startup.py --db COPY.db --project bench --against BASE/src

Runs each command ``--repeat`` times in a fresh process, this checkout's code and (with
``--against``) another's alternately, so both see the same load; records the process's CPU
(user + sys, from ``wait4``) and peak RSS (``ru_maxrss``), and prints the medians and their
ratios; also the cumulative import time of ``preflab.cli`` (``python -X importtime``). The
commands: ``preflab --help``, ``preflab status PROJECT --json`` and, with ``--export``,
``preflab export PROJECT --format trl-preference --force`` (into a temporary directory), and
``import preflab.cli`` alone. (``-X importtime`` reports wall-clock time: it grows with the
machine's load, the CPU figures much less.)
``--json PATH`` writes every run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src"
RUN = "import sys; from preflab.cli import app; sys.argv[0] = 'preflab'; app()"


#: stands for "import the CLI and exit": what every command pays before it starts
IMPORT_ONLY = "<import>"


def run_once(src: Path, args: list[str]) -> dict[str, float]:
    """One fresh ``preflab ARGS`` with ``src`` first on the path: CPU seconds and peak RSS MiB."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    code = ["-c", "import preflab.cli"] if args == [IMPORT_ONLY] else ["-c", RUN, *args]
    proc = subprocess.Popen(
        [sys.executable, *code],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"preflab {' '.join(args)} failed ({proc.returncode}): {err[-2000:]!r}")
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "rss_mib": usage.ru_maxrss / 1024}


def import_time_s(src: Path) -> float:
    """Cumulative import time of ``preflab.cli`` as ``-X importtime`` reports it, seconds."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import preflab.cli"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    line = next(ln for ln in proc.stderr.splitlines() if ln.endswith("| preflab.cli"))
    return int(line.split("|")[1]) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="a copy of a benchmark database")
    parser.add_argument("--project", default="bench")
    parser.add_argument("--against", type=Path, help="another checkout's src (the baseline)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--export", action="store_true", help="also the trl-preference export")
    parser.add_argument("--export-repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    trees = {"this": SRC} | ({"base": args.against} if args.against else {})
    out_dir = Path(tempfile.mkdtemp(prefix="preflab-cli-bench-"))
    commands: dict[str, tuple[list[str], int]] = {
        "import preflab.cli": ([IMPORT_ONLY], args.repeat),
        "--help": (["--help"], args.repeat),
        "status": (["status", args.project, "--db", args.db, "--json"], args.repeat),
    }
    if args.export:
        export = ["export", args.project, "--db", args.db, "--format", "trl-preference"]
        commands["export trl-preference"] = (
            [*export, "--out", str(out_dir / "export"), "--force"],
            args.export_repeat,
        )
    runs: dict[str, dict[str, list[dict[str, float]]]] = {}
    for name, (cmd, repeat) in commands.items():
        runs[name] = {tree: [] for tree in trees}
        for _ in range(repeat):
            for tree, src in reversed(trees.items()):  # the baseline first, then this checkout
                runs[name][tree].append(run_once(src, cmd))
    imports = {
        tree: [import_time_s(src) for _ in range(args.repeat)] for tree, src in trees.items()
    }

    summary: dict[str, Any] = {"load": os.getloadavg(), "commands": {}, "import_s": {}}
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"{'command':<24}{'tree':<6}{'CPU s (median)':>16}{'peak RSS MiB':>14}")
    for name, by_tree in runs.items():
        summary["commands"][name] = {}
        for tree, rs in by_tree.items():
            cpu = statistics.median(r["cpu_s"] for r in rs)
            rss = statistics.median(r["rss_mib"] for r in rs)
            summary["commands"][name][tree] = {"cpu_s": cpu, "rss_mib": rss, "runs": rs}
            print(f"{name:<24}{tree:<6}{cpu:>16.2f}{rss:>14.0f}")
        if "base" in by_tree:
            this, base = summary["commands"][name]["this"], summary["commands"][name]["base"]
            print(
                f"{'':<24}{'ratio':<6}{this['cpu_s'] / base['cpu_s']:>16.2f}"
                f"{this['rss_mib'] / base['rss_mib']:>14.2f}"
            )
    for tree, values in imports.items():
        summary["import_s"][tree] = {"median": statistics.median(values), "runs": values}
        print(f"import preflab.cli  {tree:<6} {statistics.median(values):.2f} s (-X importtime)")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    shutil.rmtree(out_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
