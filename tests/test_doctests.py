"""The examples in the docstrings of ``preflab.schema`` and ``preflab.quality`` run with the suite
(issue 32: they passed, but nothing ran them). One test per module, so a failure names it."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import types

import pytest

import preflab.quality
import preflab.schema

PACKAGES = (preflab.schema, preflab.quality)


def modules() -> list[str]:
    names = []
    for package in PACKAGES:
        names.append(package.__name__)
        prefix = package.__name__ + "."
        names += [m.name for m in pkgutil.walk_packages(package.__path__, prefix)]
    return sorted(names)


def run_doctests(module: types.ModuleType) -> tuple[doctest.TestResults, str]:
    """``(results, report)`` of every example in ``module``'s docstrings."""
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report: list[str] = []
    for test in finder.find(module, module.__name__):
        runner.run(test, out=report.append)
    return runner.summarize(verbose=False), "".join(report)


@pytest.mark.parametrize("name", modules())
def test_the_examples_in_the_docstrings_hold(name):
    results, report = run_doctests(importlib.import_module(name))
    assert results.failed == 0, report


def test_the_packages_have_examples_and_they_are_run():
    attempted = sum(run_doctests(importlib.import_module(n))[0].attempted for n in modules())
    assert attempted >= 21, f"only {attempted} doctest examples found in schema/ and quality/"


def test_a_wrong_example_fails():
    module = types.ModuleType("broken")
    module.__doc__ = ">>> 1 + 1\n3\n"
    results, report = run_doctests(module)
    assert (results.attempted, results.failed) == (1, 1)
    assert "Expected:\n    3\nGot:\n    2" in report
