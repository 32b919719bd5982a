"""Runs pytest inside the sandbox. Copied into the harness and digested with it; standalone
(imports nothing of preflab, which the sandboxed interpreter cannot see).

argv: BOX SOLUTION_DIR NODEID...   fd 3: the run's nonce (read once)   fd 4: the result channel

The JUnit XML goes to fd 4, a pipe whose reading end only the host holds; the candidate's
stdout is never read. Two properties are added to it: the nonce (so a document the candidate
forged without it is refused) and ``preflab_integrity``, a check that the functions pytest and
``unittest`` decide outcomes with are still the ones they were before any candidate code ran.
"""

import os
import sys

import pytest

NONCE_FD, RESULT_FD = 3, 4
WATCHED_MODULES = (
    "_pytest.runner",
    "_pytest.python",
    "_pytest.reports",
    "_pytest.main",
    "_pytest.junitxml",
    "_pytest.skipping",
    "_pytest.outcomes",
    "_pytest.fixtures",
    "_pytest.assertion.rewrite",
    "_pytest.assertion.util",
    "_pytest.unittest",
)


def _behaviour(value):
    return callable(value) or isinstance(value, (property, classmethod, staticmethod))


def _watched():
    import builtins
    import unittest

    import _pytest.junitxml
    import _pytest.reports

    # behaviour only (functions, classes, descriptors): a harness setting a plain attribute such
    # as ``unittest.TestCase.maxDiff`` is no tampering
    seen = {f"builtins.{k}": v for k, v in vars(builtins).items() if _behaviour(v)}
    for cls in (
        unittest.TestCase,
        unittest.TestResult,
        _pytest.reports.TestReport,
        _pytest.junitxml.LogXML,
        _pytest.junitxml._NodeReporter,
    ):
        seen.update(
            {
                f"{cls.__module__}.{cls.__qualname__}.{k}": v
                for k, v in vars(cls).items()
                if _behaviour(v)
            }
        )
    for name in WATCHED_MODULES:
        module = sys.modules.get(name)
        if module is not None:
            seen.update({f"{name}.{k}": v for k, v in vars(module).items() if callable(v)})
    seen["sys.modules[pytest]"] = sys.modules.get("pytest")
    return seen


class Guard:
    def __init__(self, nonce):
        self.nonce = nonce
        self.before = {}
        self.xml = None

    @pytest.hookimpl(trylast=True)  # after junitxml has put its LogXML in the stash
    def pytest_configure(self, config):
        from _pytest.junitxml import xml_key

        self.xml = config.stash.get(xml_key, None)
        self.xml.add_global_property("preflab_nonce", self.nonce)
        self.before = _watched()

    @pytest.hookimpl(tryfirst=True)  # before LogXML writes the document
    def pytest_sessionfinish(self, session):
        now = _watched()
        changed = sorted(k for k, v in self.before.items() if now.get(k, None) is not v)
        verdict = "ok" if not changed else "changed: " + ", ".join(changed[:8])
        self.xml.add_global_property("preflab_integrity", verdict)


def main():
    box, solution_dir, nodeids = sys.argv[1], sys.argv[2], sys.argv[3:]
    nonce = os.read(NONCE_FD, 256).decode()
    os.close(NONCE_FD)
    # appended, never prepended: a candidate's pytest.py, sitecustomize.py or json.py cannot
    # shadow the interpreter's modules (-I already keeps the cwd and PYTHON* variables out)
    sys.path.append(solution_dir)
    guard = Guard(nonce)
    args = [
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:pastebin",
        "--import-mode=importlib",
        "-c",
        os.path.join(box, "pytest.ini"),
        "--rootdir",
        box,
        "--confcutdir",
        box,
        "-o",
        "junit_family=xunit2",
        f"--junitxml=/dev/fd/{RESULT_FD}",
        *[os.path.join(box, n) for n in nodeids],
    ]
    code = pytest.main(args, plugins=[guard])
    sys.stdout.flush()
    os._exit(int(code))


if __name__ == "__main__":
    main()
