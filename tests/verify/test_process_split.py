"""The parts of issue 26's design one at a time: the wire codec, stdin/stdout tasks, the static
screen of repo-level tasks, and the runner's reason when pytest cannot be imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from preflab.verify import _wire as wire
from preflab.verify import verify
from preflab.verify.code import RUNNER, ResultDocumentError, read_results
from preflab.verify.screen import RULES, screen_files
from preflab.verify.tasks import parse_task

# -- the wire ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -(10**30),
        1.5,
        float("inf"),
        "é\x00",
        b"\x00\xff",
        [1, [2, (3, frozenset({4}))]],
        {1: "a", (2, 3): {"x": None}, "s": {1, 2}},
    ],
)
def test_plain_values_cross_unchanged(value):
    back = wire.decode(json.loads(json.dumps(wire.encode(value))))
    assert back == value and type(back) is type(value)


class Liar(int):
    def __eq__(self, other):
        return True

    __hash__ = int.__hash__


@pytest.mark.parametrize(
    "value",
    [Liar(0), [Liar(1)], {"k": object()}, (x for x in ()), type("Any", (), {})(), True.__class__],
)
def test_anything_else_is_refused(value):
    with pytest.raises(wire.Refused, match="cannot cross"):
        wire.encode(value)


@pytest.mark.parametrize(
    "tree",
    [{"t": [1], "x": 2}, {"z": [1]}, {"d": [[1]]}, {"s": [[1]]}, {"b": "zz"}, {"t": "ab"}],
)
def test_the_decoder_builds_nothing_from_a_malformed_tree(tree):
    with pytest.raises(wire.Refused):
        wire.decode(tree)


def test_depth_and_frame_size_are_bounded():
    deep: list = []
    for _ in range(wire.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(wire.Refused, match="deeper"):
        wire.decode(deep)
    r, w = os.pipe()
    os.write(w, (wire.MAX_FRAME + 1).to_bytes(4, "big"))
    with pytest.raises(wire.Refused, match="over the"):
        wire.receive(r)
    os.close(r)
    os.close(w)


# -- stdin/stdout tasks ---------------------------------------------------------------------

SUM = {
    "task_id": "sum",
    "kind": "stdio",
    "timeout_s": 5,
    "cases": [{"input": "2 3\n", "output": "5\n"}, {"input": "-4 4\n", "output": "0\n"}],
}
HONEST = "a, b = map(int, input().split())\nprint(a + b)\n"


@pytest.mark.usefixtures("sandbox")
def test_an_honest_program_passes_and_a_wrong_one_fails():
    task = parse_task(SUM)
    assert verify(task, f"```python\n{HONEST}```").reward == 1.0
    wrong = verify(task, "print(5)\n")
    assert wrong.reward == 0.0 and wrong.tests == {"case 0": "passed", "case 1": "failed"}


@pytest.mark.usefixtures("sandbox")
def test_a_stdio_program_cannot_find_its_expected_output(tmp_path):
    """The expected output lives in a tasks file on the host; the program looks for it
    everywhere it might be and prints what it finds."""
    tasks = Path("/var/tmp") / f"preflab-stdio-{os.getpid()}.jsonl"
    tasks.write_text(json.dumps(SUM) + "\n")
    tasks.chmod(0o644)
    hack = textwrap.dedent(
        f"""
        import json, os, sys
        given = sys.stdin.read()
        for path in ({str(tasks)!r}, {str(Path.cwd() / "examples" / "verify" / "tasks.jsonl")!r}):
            try:
                for line in open(path):
                    for case in json.loads(line).get("cases", []):
                        if case["input"] == given:
                            print(case["output"], end="")
                            sys.exit(0)
            except OSError:
                pass
        print("nothing")
        """
    )
    try:
        verdict = verify(parse_task(SUM), hack)
    finally:
        tasks.unlink()
    assert verdict.reward == 0.0 and verdict.tests["case 0"] == "failed", verdict


@pytest.mark.usefixtures("sandbox")
def test_a_looping_or_flooding_program_costs_at_most_its_limit():
    task = parse_task({**SUM, "timeout_s": 2})
    started = time.monotonic()
    looping = verify(task, "while True:\n    pass\n")
    assert looping.reward == 0.0 and "timed out" in looping.reason
    flooding = verify(task, "import sys\nwhile True:\n    sys.stdout.write('5' * 65536)\n")
    assert flooding.reward == 0.0
    assert time.monotonic() - started < 20


# -- the static screen of repo-level tasks ---------------------------------------------------

SCREENED = {
    "frames": "import sys\nf = sys._getframe(1)\n",
    "gc": "import gc\n",
    "tracing": "import sys\nsys.settrace(None)\n",
    "ctypes": "from ctypes import pythonapi\n",
    "code_objects": "def f(): pass\nf.__code__ = (lambda: 1).__code__\n",
    "runner_internals": "from _pytest import python\n",
    "module_table": "import sys\nsys.modules['json'] = None\n",
    "interpreter_paths": "open('/x/site-packages/a.pth', 'w')\n",
    "dynamic_code": "name = 'sys'\nmodule = __import__(name)\n",
    "result_channel": "import os\nos.write(4, b'<testsuites/>')\n",
    "lying_values": "class Yes(int):\n    def __eq__(self, other):\n        return True\n",
}
EVASIONS = [
    "import sys as s\ns.settrace(None)\n",
    "import sys\ngetattr(sys, 'sett' + 'race')(None)\n",
    "import sys\nfn = vars(sys)['settrace']\n",
    "import importlib\nm = importlib.import_module('g' + 'c')\n",
    "exec('import gc')\n",
    "import sys\nsys.__dict__['_getframe']\n",
    "# -*- coding: utf-8 -*-\nimport inspect\ninspect.stack()\n",
    "import os\nos.execv('/bin/true', ['true'])\n",
    "x = getattr(__builtins__, 'eval')\n",
    "import importlib\nm = importlib.import_module('ctypes')\n",
    "from importlib import import_module as im\nm = im('g' + 'c')\n",
    "import sys\nalias = sys\nname = 'settrace'\ngetattr(alias, name)(None)\n",
    "def f(): pass\nsetattr(f, '__co' + 'de__', None)\n",
    "def f(): pass\nobject.__setattr__(f, 'x', 1)\n",
    "import traceback\nfor frame, line in traceback.walk_stack(None):\n    pass\n",
    "import importlib.util\nspec = importlib.util.spec_from_file_location('m', 'm.py')\n",
    "try:\n    1 / 0\nexcept Exception as e:\n    e.__traceback__.tb_frame\n",
]


@pytest.mark.parametrize("rule", sorted(RULES))
def test_each_rule_fires_and_an_allow_list_waives_only_it(rule):
    files = {"pkg/mod.py": SCREENED[rule]}
    found = screen_files(files)
    assert any(f.startswith(f"[{rule}]") for f in found), found
    assert not any(f.startswith(f"[{rule}]") for f in screen_files(files, allow=[rule]))


@pytest.mark.parametrize("source", EVASIONS)
def test_evasions_are_caught(source):
    assert screen_files({"mod.py": source}), source


def test_an_ordinary_patch_passes_the_screen():
    patch = textwrap.dedent(
        """
        import functools, json, os, re, subprocess
        from dataclasses import dataclass

        @dataclass
        class Point:
            x: int
            y: int

            def __eq__(self, other):
                return isinstance(other, Point) and (self.x, self.y) == (other.x, other.y)

        @functools.lru_cache
        def parse(text: str) -> dict:
            return json.loads(re.sub(r"//.*", "", text))

        def run(args):
            return subprocess.run(args, capture_output=True, env=dict(os.environ)).returncode

        def attr(obj, name):
            return getattr(obj, name)
        """
    )
    assert screen_files({"lib/point.py": patch, "README.md": "import gc"}) == []


def test_conftest_and_pth_files_are_screened_by_name():
    found = screen_files({"conftest.py": "", "x.pth": "import os", "sitecustomize.py": ""})
    assert len(found) == 3


def test_an_unknown_allow_rule_is_a_task_error():
    with pytest.raises(ValueError, match="unknown screen rules"):
        parse_task({"task_id": "t", "kind": "code", "f2p": ["t.py::t"], "screen_allow": ["nope"]})


# -- a clear reason when pytest cannot be imported ------------------------------------------


def test_a_runner_that_cannot_import_pytest_says_so():
    """The interpreter started without its site-packages (``-S``), as when the sandbox hides
    them: the runner writes why to the result channel and the verdict's reason says it."""
    nonce_r, nonce_w = os.pipe()
    os.write(nonce_w, b"n")
    os.close(nonce_w)
    channel_r, channel_w = os.pipe()
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(RUNNER), "/nowhere", "--import", "/nowhere", "t.py"],
        close_fds=False,  # dup2 makes 3 and 4 inheritable; the test's other fds are not
        preexec_fn=lambda: (os.dup2(nonce_r, 3), os.dup2(channel_w, 4)),
        capture_output=True,
    )
    os.close(channel_w)
    document = os.read(channel_r, 65536)
    assert done.returncode == 3, done.stderr
    with pytest.raises(ResultDocumentError, match="cannot import pytest.*No module named"):
        read_results(document, "n")


# -- the minimal root -------------------------------------------------------------------------


@pytest.mark.usefixtures("sandbox")
def test_the_minimal_root_holds_the_kept_trees_read_only_and_hides_what_it_must():
    """A kept tree (as site-packages would be) is readable; a directory to hide inside it (as
    preflab's own package would be there) is empty; the host's other directories are absent."""
    from preflab.verify.code import candidate_trees
    from preflab.verify.sandbox import (
        Limits,
        claim_uid,
        minimal_root_script,
        spawn_sandboxed,
        stop,
        wrap_minimal,
    )

    base = Path("/tmp") / f"preflab-root-test-{os.getpid()}"
    site, home, root = base / "site", base / "home", base / "root"
    for d in (site / "preflab", site / "other", home, root):
        d.mkdir(parents=True, exist_ok=True)
    (site / "preflab" / "tasks.jsonl").write_text("secret")
    (site / "other" / "mod.py").write_text("x = 1")
    for path in [base, *base.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    probe = (
        "import json, os\n"
        f"seen = {{'hidden': os.listdir({str(site / 'preflab')!r}),\n"
        f"        'kept': os.listdir({str(site / 'other')!r}),\n"
        f"        'this_test': os.path.exists({__file__!r}),\n"
        f"        'tasks': os.path.exists({str(Path.cwd() / 'examples' / 'verify' / 'tasks.jsonl')!r}),\n"
        "        'passwd_shadow': os.path.exists('/etc/shadow') and os.access('/etc/shadow', os.R_OK)}\n"
        f"try:\n    open({str(site / 'other' / 'x')!r}, 'w')\n    seen['write'] = 'ok'\n"
        "except OSError as e:\n    seen['write'] = e.strerror\n"
        "os.write(4, json.dumps(seen).encode())\n"
    )
    (home / "probe.py").write_text(probe)
    r, w = os.pipe()
    uid_context = claim_uid() if os.geteuid() == 0 else None
    uid = uid_context.__enter__() if uid_context else None
    try:
        if uid is not None:
            os.chown(home, uid, uid)
        script = minimal_root_script(
            root, home, [*candidate_trees(), site], uid, 1 << 20, hide=[site / "preflab"]
        )
        proc = spawn_sandboxed(
            wrap_minimal(script, [sys.executable, "-I", "-B", str(home / "probe.py")]),
            cwd=base,
            limits=Limits(wall_s=20),
            env={"PATH": "/usr/bin:/bin"},
            fds={4: w},
            log=base / "log",
        )
        os.close(w)
        proc.wait(timeout=20)
        stop(proc, uid)
        seen = json.loads(os.read(r, 65536) or b"{}")
        log = (base / "log").read_text()
    finally:
        os.close(r)
        if uid_context:
            uid_context.__exit__(None, None, None)
        import shutil

        shutil.rmtree(base, ignore_errors=True)
    assert seen == {
        "hidden": [],
        "kept": ["mod.py"],
        "this_test": False,
        "tasks": False,
        "passwd_shadow": os.geteuid() != 0 and os.access("/etc/shadow", os.R_OK),
        "write": "Read-only file system",
    }, log
