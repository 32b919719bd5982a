"""Readers stream records and report bad lines with their line number; they never raise on content."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from preflab.io.readers import ReadProblem, element_lines, read_records

FIXTURES = Path(__file__).resolve().parent.parent / "data"


def _records(path, **kw):
    return list(read_records(path, **kw))


def _write(tmp_path, name, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_jsonl_lines_are_numbered_and_blank_lines_skipped(tmp_path):
    path = _write(tmp_path, "a.jsonl", b'{"a": 1}\n\n{"a": 2}\n')
    assert _records(path) == [(1, {"a": 1}), (3, {"a": 2})]


def test_gzipped_jsonl(tmp_path):
    path = tmp_path / "a.jsonl.gz"
    with gzip.open(path, "wb") as f:
        f.write(b'{"a": 1}\n{"a": 2}')
    assert _records(path) == [(1, {"a": 1}), (2, {"a": 2})]


def test_bom_is_dropped(tmp_path):
    path = _write(tmp_path, "a.jsonl", b'\xef\xbb\xbf{"a": 1}\n')
    assert _records(path) == [(1, {"a": 1})]


def test_invalid_json_and_non_objects_are_problems_and_reading_goes_on(tmp_path):
    path = _write(tmp_path, "a.jsonl", b'{"a": 1}\n{"a": \n[1, 2]\n"x"\n{"a": 4}\n')
    out = _records(path)
    assert out[0] == (1, {"a": 1})
    assert out[1][0] == 2 and "invalid JSON" in out[1][1].reason
    assert out[2][0] == 3 and "got an array" in out[2][1].reason
    assert out[3][0] == 4 and "got a string" in out[3][1].reason
    assert out[4] == (5, {"a": 4})


def test_non_utf8_reports_line_and_byte_offset(tmp_path):
    path = _write(tmp_path, "a.jsonl", b'{"a": 1}\n{"a": "caf\xe9"}\n')
    [(_, ok), (line, problem)] = _records(path)
    assert line == 2
    assert "not valid UTF-8" in problem.reason and "0xe9" in problem.reason
    assert "byte offset 19" in problem.reason  # 9 bytes of line 1 + 10 into line 2
    assert "column 11" in problem.reason


def test_utf16_file_is_reported(tmp_path):
    path = _write(tmp_path, "a.jsonl", '{"a": 1}\n'.encode("utf-16"))
    [(line, problem)] = _records(path)
    assert "UTF-16" in problem.reason


@pytest.mark.parametrize("name", ["empty.jsonl", "empty.json", "blank.jsonl"])
def test_empty_files_are_a_problem(tmp_path, name):
    path = _write(tmp_path, name, b"\n\n" if name.startswith("blank") else b"")
    [(line, problem)] = _records(path)
    assert line is None and "empty file" in problem.reason


def test_a_20_mb_line_is_read(tmp_path):
    big = "x" * (20 * 2**20)
    path = _write(tmp_path, "big.jsonl", orjson.dumps({"text": big}) + b'\n{"a": 2}\n')
    out = _records(path)
    assert out[0][1]["text"] == big and out[1] == (2, {"a": 2})


def test_a_line_over_the_limit_is_skipped_and_reported(tmp_path):
    path = _write(
        tmp_path, "big.jsonl", b'{"a": 1}\n' + orjson.dumps({"t": "x" * 5000}) + b'\n{"a": 3}\n'
    )
    out = _records(path, max_line_bytes=1000)
    assert out[0] == (1, {"a": 1})
    assert out[1][0] == 2 and "over the limit of 1,000" in out[1][1].reason
    assert out[2] == (3, {"a": 3})


def test_json_array_reports_the_line_each_element_starts_on():
    records = _records(FIXTURES / "pandalm-60.json")
    assert len(records) == 60
    text = (FIXTURES / "pandalm-60.json").read_text().splitlines()
    for line, record in records[:5]:
        assert text[line - 1].strip() == "{"
        assert f'"idx": {record["idx"]},' in text[line]


def test_element_lines_handles_strings_with_brackets_and_scalars():
    data = b'[\n {"a": "[,]{"},\n 1,\n\n "s\\",", [2, 3],\n {}\n]'
    assert element_lines(data) == [2, 3, 5, 5, 6]


def test_invalid_json_array_is_one_problem_where_it_breaks(tmp_path):
    # streamed (issue 31): the elements before the break come first, then one problem, then
    # nothing (the structure after invalid JSON cannot be trusted)
    path = _write(tmp_path, "a.json", b'[\n{"a": 1},\n{"a": },\n{"a": 3}\n]')
    [(first_line, first), (line, problem)] = _records(path)
    assert (first_line, first) == (2, {"a": 1})
    assert line == 3 and "invalid JSON" in problem.reason and "line 3" in problem.reason


def test_json_array_is_streamed_across_blocks(tmp_path, monkeypatch):
    """Elements split over many read blocks (a string holding brackets and commas too) come out
    whole with their lines; a scalar element is a problem and reading goes on; an array that
    never ends, or data after it, is one problem."""
    from preflab.io import readers

    monkeypatch.setattr(readers, "_ARRAY_BLOCK", 7)
    rows = [{"i": i, "s": 'a [b], {c}, \\"d\\"' * (i % 3)} for i in range(40)]
    body = b"[\n" + b",\n".join(orjson.dumps(r) for r in rows[:20]) + b",\n  5,\n"
    body += b",\n".join(orjson.dumps(r) for r in rows[20:]) + b"\n]\n"
    out = _records(_write(tmp_path, "big.json", body))
    values = [v for _, v in out if isinstance(v, dict)]
    assert values == rows
    assert [line for line, _ in out][:3] == [2, 3, 4]
    assert "expected a JSON object, got a number" in out[20][1].reason and out[20][0] == 22
    gz = tmp_path / "big.json.gz"
    gz.write_bytes(gzip.compress(body))
    assert _records(gz) == out
    [*_, (_, open_end)] = _records(_write(tmp_path, "open.json", b'[\n{"a": 1},\n{"a": 2}\n'))
    assert "does not end" in open_end.reason
    [_, (_, after)] = _records(_write(tmp_path, "after.json", b'[{"a": 1}]\n{"b": 2}\n'))
    assert "after the array" in after.reason
    assert _records(_write(tmp_path, "empty.json", b"[ \n ]")) == [
        (None, _records(_write(tmp_path, "e2.json", b""))[0][1])
    ]


def test_json_named_file_with_one_object_per_line_is_read_as_jsonl(tmp_path):
    path = _write(tmp_path, "a.json", b'{"a": 1}\n{"a": 2}\n')
    assert _records(path) == [(1, {"a": 1}), (2, {"a": 2})]


def test_parquet_in_batches_and_gzipped(tmp_path):
    table = pa.table({"prompt": [f"p{i}" for i in range(5000)], "n": list(range(5000))})
    path = tmp_path / "a.parquet"
    pq.write_table(table, path, row_group_size=1000)
    out = _records(path)
    assert len(out) == 5000 and out[0] == (1, {"prompt": "p0", "n": 0}) and out[-1][0] == 5000
    gz = tmp_path / "b.parquet.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert _records(gz) == out


def test_progress_adds_up_to_the_file_size(tmp_path):
    path = tmp_path / "a.jsonl.gz"
    with gzip.open(path, "wb") as f:
        for i in range(50_000):
            f.write(orjson.dumps({"i": i, "pad": "y" * (i % 97)}) + b"\n")
    seen = []
    assert len(_records(path, progress=seen.append)) == 50_000
    assert sum(seen) == path.stat().st_size and all(d >= 0 for d in seen)


def test_problem_type():
    assert ReadProblem(1, "(line)", "x") == ReadProblem(1, "(line)", "x")
