"""Two quality reports of one project compared field by field (issue 27: a change that must not
move a number).

    PYTHONPATH=OLD/src python benchmarks/compare_reports.py dump sqlite:///p.db PROJECT old.json
    PYTHONPATH=src python benchmarks/compare_reports.py dump sqlite:///p.db PROJECT new.json
    python benchmarks/compare_reports.py diff old.json new.json

``dump`` writes ``report_from_store``'s dict (NaN kept) and prints its CPU time; ``diff`` prints
every field that differs (floats beyond 1e-12, relative to the larger of 1 and the values) and
exits 1 if any does.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
import time
from typing import Any


def dump(db: str, project: str, out: str) -> None:
    from preflab.io.quality_source import report_from_store

    start = time.process_time()
    report = report_from_store(db, project)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"report: {time.process_time() - start:.2f} s CPU, peak RSS {peak} MB")
    with open(out, "w") as fh:
        json.dump(report, fh, sort_keys=True)


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    out: list[str] = []
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in {'the second' if k not in a else 'the first'}")
            else:
                out += differences(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} entries != {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            out += differences(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        both_nan = math.isnan(a) and math.isnan(b)
        if not both_nan and not abs(a - b) <= 1e-12 * max(1.0, abs(a), abs(b)):
            out.append(f"{path}: {a!r} != {b!r}")
    elif a != b or type(a) is not type(b):
        out.append(f"{path}: {a!r} != {b!r}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("db")
    d.add_argument("project")
    d.add_argument("out")
    c = sub.add_parser("diff")
    c.add_argument("first")
    c.add_argument("second")
    args = parser.parse_args()
    if args.command == "dump":
        dump(args.db, args.project, args.out)
        return 0
    with open(args.first) as fa, open(args.second) as fb:
        found = differences(json.load(fa), json.load(fb))
    print(f"{len(found)} fields differ")
    for line in found[:100]:
        print(" ", line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
