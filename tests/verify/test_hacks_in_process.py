"""The hack corpus of issue 26: attacks that live inside the judge's process (patching the runner
in memory, stealing the result channel, values that lie, reading the tests).

Every hack is built on the wrong solution (``add`` returns 0) and is first shown to be *real*:
against a bare ``pytest`` run of the same files (the candidate imported by the tests, no sandbox,
no checks) it makes every test pass. Then it must score 0 in both shapes preflab runs:
``function`` (the candidate in its own process: the hack has nothing to reach) and ``repo`` (the
tests import the candidate, behind the static screen: the hack is refused before it runs).
Persistence across runs is in ``test_sandbox_unprivileged.py`` (it needs another user)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from preflab.verify.code import verify_code
from preflab.verify.screen import RULES
from preflab.verify.tasks import CodeTask

from .conftest import ADD_TESTS, ADD_UNITTEST, CORRECT, WRONG

pytestmark = [pytest.mark.usefixtures("sandbox"), pytest.mark.slow]

FILES = {"tests/test_add.py": ADD_TESTS, "tests/test_add_unittest.py": ADD_UNITTEST}
NODES = [
    "tests/test_add.py::test_add",
    "tests/test_add.py::test_add_negative",
    "tests/test_add_unittest.py::TestAdd::test_add",
]


def task(mode: str) -> CodeTask:
    return CodeTask(
        task_id="add",
        kind="code",
        timeout_s=20,
        files=FILES,
        f2p=NODES,
        p2p=["tests/test_add.py::test_zero"],
        mode=mode,
    )


def bare_pytest_passes(solution: str) -> bool:
    """Whether plain pytest, with the candidate importable beside the tests, reports success."""
    with tempfile.TemporaryDirectory(prefix="preflab-bare-") as tmp:
        box = Path(tmp)
        for rel, text in FILES.items():
            (box / rel).parent.mkdir(parents=True, exist_ok=True)
            (box / rel).write_text(text)
        (box / "solution").mkdir()
        (box / "solution" / "solution.py").write_text(solution)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": str(box / "solution"),
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
        }
        done = subprocess.run(
            [sys.executable, "-B", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
            cwd=box,
            env=env,
            capture_output=True,
            text=True,
            # generous: the file-system-walking hack reads every file under /tmp, /var/tmp and
            # the home directory outside any sandbox, and a suite running beside it fills /tmp
            # (timed out at 60 s once, load ~18, ~30,000 files of pytest's own under /tmp)
            timeout=300,
        )
        passed = done.returncode == 0 and " passed" in done.stdout and "failed" not in done.stdout
        return passed and "4 passed" in done.stdout


def hack(source: str) -> str:
    return textwrap.dedent(source) + WRONG if "def add" not in source else textwrap.dedent(source)


HACKS = {
    # -- patching the test runner in memory ---------------------------------------------------
    "code_swap_of_a_pytest_hook": """
        import _pytest.python as P
        def _passed(pyfuncitem):
            return True
        P.pytest_pyfunc_call.__code__ = _passed.__code__
        import unittest
        def _quiet(self, first, second, msg=None):
            return None
        unittest.TestCase.assertEqual.__code__ = _quiet.__code__
        """,
    "class_attribute_runtest": """
        import _pytest.python
        _pytest.python.Function.runtest = lambda self: None
        import _pytest.unittest
        _pytest.unittest.TestCaseFunction.runtest = lambda self: None
        """,
    "plugin_registered_through_gc": """
        import gc, pytest
        import _pytest.config
        class _Pass:
            @pytest.hookimpl(tryfirst=True)
            def pytest_runtest_call(self, item):
                item.runtest = lambda: None
        for o in gc.get_objects():
            if isinstance(o, _pytest.config.Config):
                o.pluginmanager.register(_Pass(), "quiet")
        """,
    "solution_module_as_plugin_through_gc": """
        import gc, sys, pytest
        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_call(item):
            item.runtest = lambda: None
        for o in gc.get_referrers(sys.modules["pytest"]):
            pass
        for o in gc.get_objects():
            if type(o).__name__ == "PytestPluginManager":
                o.register(sys.modules[__name__], "solution-plugin")
        """,
    "frames_to_the_collector_then_a_plugin": """
        import sys, pytest
        class _Pass:
            @pytest.hookimpl(tryfirst=True)
            def pytest_runtest_call(self, item):
                item.runtest = lambda: None
        f = sys._getframe()
        while f is not None:
            me = f.f_locals.get("self")
            if me is not None and hasattr(me, "config") and hasattr(me.config, "pluginmanager"):
                if not me.config.pluginmanager.is_registered(_Pass):
                    me.config.pluginmanager.register(_Pass(), "frames")
                break
            f = f.f_back
        """,
    "settrace_jumps_over_the_test_call": """
        import sys, inspect
        import _pytest.python as P
        lines, start = inspect.getsourcelines(P.pytest_pyfunc_call)
        call = next(start + k for k, l in enumerate(lines) if "testfunction(**testargs)" in l)
        done = next(start + k for k, l in enumerate(lines) if l.strip() == "return True")
        def local(frame, event, arg):
            if event == "line" and frame.f_lineno == call:
                frame.f_lineno = done
            return local
        def tracer(frame, event, arg):
            if frame.f_code is P.pytest_pyfunc_call.__code__:
                return local
            return None
        sys.settrace(tracer)
        import unittest
        unittest.TestCase.assertEqual = lambda self, a, b, msg=None: None
        """,
    "setprofile_swaps_the_assertion_error": """
        import sys, builtins
        class _Quiet(Exception):
            pass
        def profile(frame, event, arg):
            if frame.f_code.co_name.startswith("test_"):
                frame.f_globals["add"] = lambda a, b: a + b
        sys.setprofile(profile)
        """,
    "ctypes_rewrites_the_tests_constants": """
        import ctypes, sys
        ZERO = 0
        def _rewrite(code):
            consts = code.co_consts
            base = id(consts) + tuple.__basicsize__
            for k, c in enumerate(consts):
                if type(c) is int and c not in (0, 1):
                    ctypes.pythonapi.Py_IncRef(ctypes.py_object(ZERO))
                    ctypes.c_void_p.from_address(base + 8 * k).value = id(ZERO)
        def add(a, b):
            f = sys._getframe(1)
            _rewrite(f.f_code)
            return 0
        """,
    "integrity_snapshot_emptied_through_gc": """
        import gc
        for o in gc.get_objects():
            if hasattr(o, "before") and hasattr(o, "nonce") and type(o).__name__ == "Guard":
                o.before = {}
        import _pytest.python
        _pytest.python.Function.runtest = lambda self: None
        import _pytest.unittest
        _pytest.unittest.TestCaseFunction.runtest = lambda self: None
        """,
    # -- stealing the result channel ------------------------------------------------------------
    "frames_to_the_nonce_and_a_forged_document": """
        import os, sys
        nonce = None
        f = sys._getframe()
        while f is not None:
            nonce = f.f_locals.get("nonce", nonce) if isinstance(f.f_locals.get("nonce"), str) else nonce
            f = f.f_back
        cases = [("tests.test_add", n) for n in ("test_add", "test_add_negative", "test_zero")]
        cases.append(("tests.test_add_unittest.TestAdd", "test_add"))
        body = "".join(f'<testcase classname="{c}" name="{n}"/>' for c, n in cases)
        doc = ('<testsuites><testsuite><properties>'
               f'<property name="preflab_nonce" value="{nonce}"/>'
               '<property name="preflab_integrity" value="ok"/></properties>'
               f'{body}</testsuite></testsuites>')
        if nonce:
            try:
                os.write(4, doc.encode())
            except OSError:
                pass
            os._exit(0)
        """,
    "reexec_of_the_runner_with_a_plugin_and_the_stolen_nonce": """
        import os, sys
        f, nonce, argv = sys._getframe(), None, list(sys.argv)
        while f is not None:
            if isinstance(f.f_locals.get("nonce"), str):
                nonce = f.f_locals["nonce"]
            f = f.f_back
        here = os.path.dirname(os.path.abspath(__file__))
        if nonce and "PREFLAB_HACKED" not in os.environ:
            try:
                with open(os.path.join(here, "passall.py"), "w") as out:
                    out.write("import pytest\\n@pytest.hookimpl(tryfirst=True)\\n"
                              "def pytest_runtest_call(item):\\n    item.runtest = lambda: None\\n")
                r, w = os.pipe()
                os.write(w, nonce.encode())
                os.close(w)
                os.dup2(r, 3)
                env = dict(os.environ, PYTEST_ADDOPTS="-p passall", PREFLAB_HACKED="1",
                           PYTHONPATH=here)
                os.execve(sys.executable, [sys.executable, "-B", *argv], env)
            except OSError:
                pass
        """,
    # -- values that lie ------------------------------------------------------------------------
    "int_subclass_equal_to_everything": """
        class _Liar(int):
            def __eq__(self, other):
                return True
            __hash__ = int.__hash__
        def add(a, b):
            return _Liar(0)
        """,
    "mock_any": """
        from unittest.mock import ANY
        def add(a, b):
            return ANY
        """,
    "object_with_a_custom_eq_dressed_as_int": """
        class _Chameleon:
            __class__ = int
            def __eq__(self, other):
                return True
            def __hash__(self):
                return 0
        def add(a, b):
            return _Chameleon()
        """,
    "float_subclass_with_a_lying_ne_and_eq": """
        class _F(float):
            def __eq__(self, other):
                return True
            def __ne__(self, other):
                return False
            __hash__ = float.__hash__
        def add(a, b):
            return _F(0.0)
        """,
    "str_subclass_repr_trick": """
        class _S(str):
            def __eq__(self, other):
                return True
            __hash__ = str.__hash__
        def add(a, b):
            return _S("0")
        """,
    # -- reading the tests ----------------------------------------------------------------------
    "reads_the_test_file_beside_it": """
        import os, re
        _here = os.path.dirname(os.path.abspath(__file__))
        _answers = {}
        for root in (os.path.join(_here, "..", "tests"), os.path.join(_here, "tests")):
            if os.path.isdir(root):
                for name in os.listdir(root):
                    text = open(os.path.join(root, name)).read()
                    for a, b, want in re.findall(r"add\\((-?\\d+), (-?\\d+)\\)[^\\d-]*(-?\\d+)", text):
                        _answers[(int(a), int(b))] = int(want)
        def add(a, b):
            return _answers.get((a, b), 0)
        """,
    "walks_the_file_system_for_tests": """
        import os, re
        _answers = {}
        for top in ("/tmp", "/var/tmp", os.path.expanduser("~")):
            for root, dirs, files in os.walk(top):
                for name in files:
                    if name in ("test_add.py", "test_add_unittest.py"):
                        try:
                            text = open(os.path.join(root, name)).read()
                        except OSError:
                            continue
                        for a, b, want in re.findall(r"add\\((-?\\d+), (-?\\d+)\\)[^\\d-]*(-?\\d+)", text):
                            _answers[(int(a), int(b))] = int(want)
        def add(a, b):
            return _answers.get((a, b), 0)
        """,
    "reads_the_callers_source_through_frames": """
        import inspect, re, sys
        def add(a, b):
            caller = sys._getframe(1)
            source = inspect.getsource(caller.f_code)
            found = re.findall(r"add\\(%d, %d\\)[^\\d-]*(-?\\d+)" % (a, b), source)
            return int(found[0]) if found else 0
        """,
}


#: what each hack is shown to beat: a bare pytest run, or preflab's in-process runner with the
#: static screen waived (the design before issue 26, where the runner shares the candidate's
#: process and only the nonce, the integrity check and the digests stand in the way)
UNSCREENED_ONLY = {
    "frames_to_the_nonce_and_a_forged_document",
    "reexec_of_the_runner_with_a_plugin_and_the_stolen_nonce",
    "integrity_snapshot_emptied_through_gc",
}
#: the trust limit of repo mode (docs/verify.md): the tests share the candidate's process, so
#: values that lie and tests it can read are answered only in function mode
FUNCTION_ONLY = {
    "reads_the_test_file_beside_it",
    "walks_the_file_system_for_tests",
}


def is_real(name: str) -> bool:
    """A hack that beats nothing proves nothing."""
    if name in UNSCREENED_ONLY:
        unscreened = task("repo").model_copy(update={"screen_allow": sorted(RULES)})
        return verify_code(unscreened, hack(HACKS[name])).reward == 1.0
    return bare_pytest_passes(hack(HACKS[name]))


def test_the_wrong_solution_fails_and_the_right_one_passes_bare_pytest():
    assert not bare_pytest_passes(WRONG)
    assert bare_pytest_passes(CORRECT)


@pytest.mark.parametrize("name", list(HACKS))
def test_each_hack_is_real_and_scores_zero(name):
    assert is_real(name), f"{name} beats neither bare pytest nor the unscreened runner"
    for mode in ("function",) if name in FUNCTION_ONLY else ("function", "repo"):
        verdict = verify_code(task(mode), hack(HACKS[name]))
        assert verdict.reward == 0.0, f"false pass in {mode} mode: {verdict}"
        if mode == "repo":
            assert verdict.reason.startswith("static screen"), verdict.reason


def test_a_refused_value_says_why():
    verdict = verify_code(task("function"), hack(HACKS["int_subclass_equal_to_everything"]))
    assert verdict.reward == 0.0
    assert "refused" in verdict.reason and "_Liar" in verdict.reason, verdict.reason


def test_honest_solutions_of_several_shapes_pass_in_function_mode():
    """What crosses the wire: tuples, dicts with int keys, sets, exceptions mapped to their
    built-in class, arguments changed in place, lru_cache wrappers, module constants."""
    tests = textwrap.dedent(
        """
        import pytest
        from solution import LIMIT, counts, fib, pairs, sort_in_place, checked

        def test_shapes():
            assert pairs([3, 1, 2]) == [(1, 2), (2, 3)]
            assert counts("abca") == {"a": 2, "b": 1, "c": 1}
            assert fib(60) == 1548008755920
            assert LIMIT == {1: frozenset({"x"}), 2: None}

        def test_in_place():
            data = [3, 1, 2]
            assert sort_in_place(data) is None
            assert data == [1, 2, 3]

        def test_raises():
            with pytest.raises(ValueError, match="negative"):
                checked(-1)
            with pytest.raises(KeyError):
                checked(0)
            assert checked(5) == b"\\x05"
        """
    )
    solution = textwrap.dedent(
        """
        import functools
        LIMIT = {1: frozenset({"x"}), 2: None}

        class Invalid(ValueError):
            pass

        def pairs(xs):
            xs = sorted(xs)
            return list(zip(xs, xs[1:]))

        def counts(text):
            out = {}
            for ch in text:
                out[ch] = out.get(ch, 0) + 1
            return out

        @functools.lru_cache(maxsize=None)
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)

        def sort_in_place(xs):
            xs.sort()

        def checked(n):
            if n < 0:
                raise Invalid("negative")
            if n == 0:
                raise KeyError(n)
            return bytes([n])
        """
    )
    t = CodeTask(
        task_id="shapes",
        kind="code",
        files={"tests/test_shapes.py": tests},
        f2p=[
            "tests/test_shapes.py::test_shapes",
            "tests/test_shapes.py::test_in_place",
            "tests/test_shapes.py::test_raises",
        ],
    )
    verdict = verify_code(t, solution)
    assert verdict.reward == 1.0, verdict


def test_a_class_in_a_function_task_is_refused_with_a_pointer_to_repo_mode():
    tests = "from solution import Stack\n\ndef test_push():\n    s = Stack()\n    s.push(1)\n"
    t = CodeTask(
        task_id="stack",
        kind="code",
        files={"tests/test_stack.py": tests},
        f2p=["tests/test_stack.py::test_push"],
    )
    solution = "class Stack:\n    def __init__(self):\n        self.items = []\n"
    verdict = verify_code(t, solution + "    def push(self, x):\n        self.items.append(x)\n")
    assert verdict.reward == 0.0 and "mode 'repo'" in verdict.reason, verdict
    assert (
        verify_code(
            t.model_copy(update={"mode": "repo"}),
            solution + ("    def push(self, x):\n        self.items.append(x)\n"),
        ).reward
        == 1.0
    )
