"""The reward-hack corpus of issue 13: each hack ends with reward 0 (or the correct reward),
never a false pass. Every hack is built on the *wrong* solution (``add`` returns 0), so a pass
would be a false one; where the hack cannot change the outcome, the correct solution shows the
reward stays right.

Each hack runs against every layer on its own (the ``add_task`` fixture's three modes):
``function`` (the candidate in a process of its own: the default), ``repo`` (the tests import
the candidate, behind the static screen) and ``repo-unscreened`` (the same with every screen
rule waived, so the in-process checks — nonce, integrity, digests — are shown to hold alone;
the reason a hack scores 0 is asserted there)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from preflab.verify.code import verify_code
from preflab.verify.sandbox import SANDBOX_UID_BASE, SANDBOX_UID_SPAN
from preflab.verify.screen import RULES

from .conftest import CORRECT, WRONG

# code verification runs sandboxed; fork bombs and resource exhaustion take seconds: `make test`
pytestmark = [pytest.mark.usefixtures("sandbox"), pytest.mark.slow]

MODES = {
    "function": {"mode": "function"},
    "repo": {"mode": "repo"},
    "repo-unscreened": {"mode": "repo", "screen_allow": sorted(RULES)},
}


@pytest.fixture(params=list(MODES))
def add_task(request, add_task):
    return add_task.model_copy(update=MODES[request.param])


def assert_no_false_pass(verdict, why: str = "", task=None):
    """Reward 0; with ``task`` in ``repo-unscreened`` mode, for the reason ``why``."""
    assert verdict.reward == 0.0, f"false pass: {verdict}"
    assert verdict.f2p_exit == 1 or verdict.harness_sha256_verified is False, verdict
    if why and task is not None and task.mode == "repo" and task.screen_allow:
        assert why in verdict.reason, verdict.reason


def screened(task) -> bool:
    return task.mode == "repo" and not task.screen_allow


def test_the_correct_solution_passes_and_the_wrong_one_fails(add_task):
    good, bad = verify_code(add_task, CORRECT), verify_code(add_task, WRONG)
    assert (good.reward, good.f2p_exit, good.p2p_exit, good.harness_sha256_verified) == (
        1.0,
        0,
        0,
        True,
    )
    assert (bad.reward, bad.f2p_exit, bad.p2p_exit, bad.harness_sha256_verified) == (
        0.0,
        1,
        0,
        True,
    )
    assert bad.tests["tests/test_add.py::test_add"] == "failed"


def test_os_exit_zero_at_import(add_task):
    verdict = verify_code(add_task, "import os\nos._exit(0)\n" + WRONG)
    assert_no_false_pass(verdict, "no result document", add_task)
    assert verdict.harness_sha256_verified is (None if screened(add_task) else False)


def test_printing_passed_to_stdout(add_task):
    hack = (
        "import sys\nprint('===== 5 passed in 0.01s =====')\n"
        'print(\'<testcase classname="tests.test_add" name="test_add"/>\')\n'
        "sys.stdout.flush()\nimport os\nos._exit(0)\n"
    )
    assert_no_false_pass(verify_code(add_task, hack + WRONG))


def test_forged_junit_document_on_the_result_pipe(add_task):
    """The candidate finds the inherited pipe and writes a passing document before exiting."""
    forged = (
        '<testsuites><testsuite><testcase classname="tests.test_add" name="test_add"/>'
        '<testcase classname="tests.test_add" name="test_add_negative"/>'
        '<testcase classname="tests.test_add" name="test_zero"/></testsuite></testsuites>'
    )
    hack = (
        "import os\nfor fd in range(3, 64):\n    try:\n"
        f"        os.write(fd, {forged!r}.encode())\n    except OSError:\n        pass\n"
        "os._exit(0)\n"
    )
    assert_no_false_pass(verify_code(add_task, hack + WRONG), "nonce", add_task)


CONFTEST_PASS_ALL = """import pytest
@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    return True
def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.skip)
"""


def test_writing_a_conftest_that_skips_or_passes_everything(add_task):
    hack = (
        "import os\n"
        f"for d in ('..', '../tests', '.', '/tmp'):\n"
        "    try:\n"
        f"        open(os.path.join(d, 'conftest.py'), 'w').write({CONFTEST_PASS_ALL!r})\n"
        "    except OSError:\n        pass\n"
    )
    assert_no_false_pass(verify_code(add_task, hack + WRONG))
    # also shipped as a file beside the solution from the start
    verdict = verify_code(add_task, {"solution.py": WRONG, "conftest.py": CONFTEST_PASS_ALL})
    assert_no_false_pass(verdict)


def test_rewriting_or_deleting_the_test_file(add_task):
    hack = (
        "import os, shutil\nfor action in (\n"
        "    lambda: open('../tests/test_add.py', 'w').write('def test_add(): pass\\n'),\n"
        "    lambda: os.remove('../tests/test_add.py'),\n"
        "    lambda: os.rename('../tests', '../gone'),\n"
        "    lambda: shutil.rmtree('../tests'),\n"
        "    lambda: os.chmod('../tests/test_add.py', 0o777)):\n"
        "    try:\n        action()\n    except OSError:\n        pass\n"
    )
    assert_no_false_pass(verify_code(add_task, hack + WRONG))


def test_shadowing_pytest_and_sitecustomize_in_its_directory(add_task):
    fake_pytest = "import sys\nprint('5 passed')\nsys.exit(0)\n"
    solution = {
        "solution.py": WRONG,
        "pytest.py": fake_pytest,
        "_pytest.py": fake_pytest,
        "sitecustomize.py": "import os\nos._exit(0)\n",
        "usercustomize.py": "import os\nos._exit(0)\n",
        "unittest.py": fake_pytest,
    }
    verdict = verify_code(add_task, solution)
    assert_no_false_pass(verdict)
    if not screened(add_task):  # the screen refuses such files before anything runs
        assert verdict.harness_sha256_verified is True  # the shadows were never imported
        assert verdict.tests["tests/test_add.py::test_add"] == "failed"


def test_monkey_patching_unittest_assertions(add_task):
    hack = (
        "import unittest\nunittest.TestCase.assertEqual = lambda self, *a, **k: None\n"
        "unittest.TestCase.fail = lambda self, *a, **k: None\n"
    )
    assert_no_false_pass(verify_code(add_task, hack + WRONG), "TestCase.assertEqual", add_task)


def test_monkey_patching_pytest_internals_and_builtins(add_task):
    hacks = [
        "import _pytest.python\n_pytest.python.pytest_pyfunc_call = lambda pyfuncitem: True\n",
        "import _pytest.reports\n_pytest.reports.TestReport.outcome = 'passed'\n",
        "import builtins\nbuiltins.AssertionError = type('Quiet', (Exception,), {})\n",
        "import sys, types\nsys.modules['pytest'] = types.ModuleType('pytest')\n",
    ]
    for hack in hacks:
        verdict = verify_code(add_task, hack + WRONG)
        assert_no_false_pass(verdict)


def test_reading_a_hidden_expected_output_file(add_task, tmp_path: Path):
    """The grader's own files (here: a private directory of the host user) are unreadable."""
    secret_dir = tmp_path / "grader"
    secret_dir.mkdir(mode=0o700)
    (secret_dir / "expected.txt").write_text("5")
    solution = (
        f"def add(a, b):\n    return int(open({str(secret_dir / 'expected.txt')!r}).read())\n"
    )
    verdict = verify_code(add_task, solution)
    assert_no_false_pass(verdict)
    assert verdict.harness_sha256_verified is True


def _sandbox_processes() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                uid = entry.stat().st_uid
            except FileNotFoundError:
                continue
            if SANDBOX_UID_BASE <= uid < SANDBOX_UID_BASE + SANDBOX_UID_SPAN:
                found.append(int(entry.name))
    return found


def test_a_background_process_does_not_outlive_the_run(add_task, tmp_path: Path):
    hack = (
        "import os, subprocess, sys\n"
        "subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
        "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
        "        import time\n        time.sleep(600)\n    os._exit(0)\n"
    )
    started = time.monotonic()
    verdict = verify_code(add_task, hack + CORRECT)
    assert time.monotonic() - started < 15  # nothing held the result pipe open
    if screened(add_task):  # os._exit: the screen's result_channel rule
        assert verdict.reason.startswith("static screen"), verdict
    else:
        assert verdict.reward == 1.0, verdict  # the hack does not change a correct answer
    assert _sandbox_processes() == []


def test_fork_bomb(add_task):
    add_task = add_task.model_copy(update={"timeout_s": 5})
    hack = (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    )
    started = time.monotonic()
    verdict = verify_code(add_task, hack + CORRECT)
    assert time.monotonic() - started < 20
    assert_no_false_pass(verdict)
    assert "timed out" in verdict.reason
    assert _sandbox_processes() == []


def test_allocating_ten_gigabytes(add_task):
    verdict = verify_code(add_task, "block = bytearray(10 * 1024**3)\n" + CORRECT)
    assert_no_false_pass(verdict)
    assert verdict.tests["tests/test_add.py::test_add"] == "failed"  # MemoryError at import


def test_infinite_loop(add_task):
    add_task = add_task.model_copy(update={"timeout_s": 3})
    started = time.monotonic()
    verdict = verify_code(add_task, "while True:\n    pass\n" + CORRECT)
    assert time.monotonic() - started < 10
    assert_no_false_pass(verdict)
    assert "timed out after 3s" in verdict.reason


def test_opening_a_network_connection(add_task):
    solution = (
        "import socket\n"
        "def add(a, b):\n"
        "    socket.create_connection(('1.1.1.1', 80), timeout=3).close()\n"
        "    return a + b\n"
    )
    verdict = verify_code(add_task, solution)
    assert_no_false_pass(verdict)
    assert verdict.tests["tests/test_add.py::test_add"] == "failed"


def test_writing_outside_its_directory(add_task, tmp_path: Path):
    outside = tmp_path / "host-owned.txt"
    import preflab

    targets = [
        str(outside),
        str(Path(preflab.__file__).parent / "pwned.py"),
        str(Path(os.__file__).parent / "pwned.py"),
        "../pwned.txt",
        "../tests/pwned.py",
        "/etc/pwned",
    ]
    hack = (
        f"for path in {targets!r}:\n    try:\n        open(path, 'w').write('x')\n"
        "    except OSError:\n        pass\n"
    )
    verdict = verify_code(add_task, hack + WRONG)
    assert_no_false_pass(verdict)
    assert verdict.harness_sha256_verified is True
    for target in targets[:3] + ["/etc/pwned"]:
        assert not Path(target).exists(), target


def test_skipping_every_test_from_the_solution(add_task):
    hack = "import pytest\npytest.skip('nothing to see', allow_module_level=True)\n"
    verdict = verify_code(add_task, hack + WRONG)
    assert_no_false_pass(verdict, "did not run", add_task)
    if add_task.mode == "repo" and add_task.screen_allow:
        assert verdict.harness_sha256_verified is False


def test_a_fixture_database_in_the_harness_is_read_only_and_digested(tmp_path):
    """A harness directory with a SQLite fixture: the candidate's attempt to rewrite the fixture
    (to make a count test pass) fails, and the fixture's digest still matches afterwards."""
    import sqlite3

    from preflab.verify.tasks import CodeTask

    harness = tmp_path / "harness"
    (harness / "tests").mkdir(parents=True)
    with sqlite3.connect(harness / "tests" / "shop.sqlite") as db:
        db.executescript(
            "CREATE TABLE orders (id INTEGER); INSERT INTO orders VALUES (1), (2), (3);"
        )
    (harness / "tests" / "test_count.py").write_text(
        "import pathlib\nfrom solution import count_orders\n\n"
        "DB = pathlib.Path(__file__).with_name('shop.sqlite')\n\n"
        "def test_count():\n    assert count_orders(str(DB)) == 1\n"
    )
    task = CodeTask(
        task_id="count",
        kind="code",
        harness_dir=str(harness),
        f2p=["tests/test_count.py::test_count"],
    )
    hack = (
        "import sqlite3\n\ndef count_orders(path):\n"
        "    try:\n        with sqlite3.connect(path) as db:\n"
        "            db.execute('DELETE FROM orders WHERE id > 1')\n    except sqlite3.Error:\n        pass\n"
        "    return sqlite3.connect(path).execute('SELECT COUNT(*) FROM orders').fetchone()[0]\n"
    )
    verdict = verify_code(task, hack)
    assert_no_false_pass(verdict)
    assert (
        verdict.harness_sha256_verified is True
        and verdict.tests["tests/test_count.py::test_count"] == "failed"
    )
    honest = "import sqlite3\n\ndef count_orders(path):\n    return 1\n"
    assert verify_code(task, honest).reward == 1.0


def test_filling_the_disk_stays_inside_private_size_limited_scratch(add_task, tmp_path):
    """Writes to its own directory and to /tmp, /var/tmp, /dev/shm land on private tmpfs of
    64 MiB each (no host disk, gone after the run); the answer is still judged correctly."""
    marker = f"preflab-fill-{os.getpid()}"
    hack = (
        "import os\n"
        f"for d in ('.', '/tmp', '/var/tmp', '/dev/shm'):\n"
        "    for k in range(20):\n"
        "        try:\n"
        f"            with open(os.path.join(d, '{marker}-%d' % k), 'wb') as f:\n"
        "                f.write(b'x' * (10 << 20))\n"
        "        except OSError:\n"
        "            break\n"
    )
    verdict = verify_code(add_task, hack + CORRECT)
    assert verdict.reward == 1.0, verdict
    for directory in ("/tmp", "/var/tmp", "/dev/shm"):
        assert not list(Path(directory).glob(f"{marker}-*")), directory


def test_a_harness_setting_plain_attributes_is_not_taken_for_tampering():
    """``unittest.TestCase.maxDiff = None`` in a harness is common; only behaviour is watched."""
    from preflab.verify.tasks import CodeTask

    tests = (
        "import unittest\nfrom solution import add\n\nunittest.TestCase.maxDiff = None\n\n"
        "class TestAdd(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
    )
    task = CodeTask(
        task_id="t",
        kind="code",
        files={"tests/test_u.py": tests},
        f2p=["tests/test_u.py::TestAdd::test_add"],
    )
    verdict = verify_code(task, CORRECT)
    assert (verdict.reward, verdict.harness_sha256_verified) == (1.0, True), verdict
