"""Shared tasks for the verifier tests: a tiny ``add`` task with f2p and p2p tests."""

from __future__ import annotations

import os

import pytest

from preflab.verify.sandbox import SandboxUnavailable, check_available
from preflab.verify.tasks import CodeTask

ADD_TESTS = """from solution import add


def test_add():
    assert add(2, 3) == 5


def test_add_negative():
    assert add(-2, -3) == -5


def test_zero():
    assert add(0, 0) == 0
"""

ADD_UNITTEST = """import unittest

from solution import add


class TestAdd(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)
"""

CORRECT = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return 0\n"


@pytest.fixture(scope="session")
def sandbox():
    """Code verification needs namespaces: skipped on a laptop without them, a failure in CI."""
    try:
        check_available()
    except SandboxUnavailable as e:
        if os.environ.get("CI"):
            pytest.fail(f"the verifier sandbox is required in CI but cannot run: {e}")
        pytest.skip(f"the verifier sandbox cannot run here: {e}")


@pytest.fixture
def add_task(sandbox) -> CodeTask:
    return CodeTask(
        task_id="add",
        kind="code",
        timeout_s=20,
        files={"tests/test_add.py": ADD_TESTS, "tests/test_add_unittest.py": ADD_UNITTEST},
        f2p=[
            "tests/test_add.py::test_add",
            "tests/test_add.py::test_add_negative",
            "tests/test_add_unittest.py::TestAdd::test_add",
        ],
        p2p=["tests/test_add.py::test_zero"],
    )
