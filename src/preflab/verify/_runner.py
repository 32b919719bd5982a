"""Runs pytest inside the sandbox. Copied into the harness and digested with it; standalone
(imports nothing of preflab, which the sandboxed interpreter cannot see).

argv: BOX --bridge MODULE NODEID...    (function-level tasks: fd 5 requests, fd 6 replies)
      BOX --import SOLUTION_DIR NODEID...   (repo-level tasks)
fd 3: the run's nonce (read once)   fd 4: the result channel

``--bridge``: the candidate runs in a sandbox of its own. The solution module the tests import
is a proxy whose functions send their arguments down fd 5 and read the result from fd 6, decoded
by ``_preflab_wire.py`` into exact built-in values; no candidate code ever runs here. A value the
candidate may not send, or a candidate that dies, raises :class:`CandidateFailure` (a
``BaseException``, so a test's ``except Exception`` cannot swallow it) and is recorded in the
``preflab_refusals`` property: any refusal is reward 0.

``--import``: the repo-level shape, where the tests must import the patched code itself: it
shares this process, and the checks below are what stands between it and the verdict.

The JUnit XML goes to fd 4, a pipe whose reading end only the host holds; the candidate's
stdout is never read. Two properties are added to it: the nonce (so a document the candidate
forged without it is refused) and ``preflab_integrity``, a check that the functions pytest and
``unittest`` decide outcomes with are still the ones they were before any candidate code ran.
"""

import builtins
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys

try:
    import pytest
except ImportError as _missing:  # the sandbox hides where pytest lives: say so on the channel
    os.write(
        4, json.dumps({"preflab_error": f"the sandbox cannot import pytest ({_missing})"}).encode()
    )
    os._exit(3)

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
    def __init__(self, nonce, bridge=None):
        self.nonce = nonce
        self.bridge = bridge
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
        if self.bridge is not None:
            refusals = json.dumps(self.bridge.refusals[:20])
            self.xml.add_global_property("preflab_refusals", refusals)


REQUESTS_FD, REPLIES_FD = 5, 6
NOT_EXCEPTIONS = ("BaseException", "SystemExit", "KeyboardInterrupt", "GeneratorExit")


class CandidateFailure(BaseException):
    """The candidate sent what may not cross, or died: the test fails, the run scores 0."""


class Bridge:
    def __init__(self, wire):
        self.wire = wire
        self.refusals = []
        self.dead = None

    def fail(self, reason):
        self.refusals.append(reason)
        raise CandidateFailure(reason)

    def ask(self, message):
        if self.dead:
            raise CandidateFailure(self.dead)
        try:
            self.wire.send(REQUESTS_FD, message)
            reply = self.wire.receive(REPLIES_FD)
        except (EOFError, OSError) as e:
            self.dead = f"the candidate's process ended ({e})"
            self.fail(self.dead)
        except self.wire.Refused as e:
            self.fail(f"the candidate sent an unreadable reply: {e}")
        if "refused" in reply:
            self.fail(str(reply["refused"])[:500])
        return reply

    def result(self, reply):
        if "raise" in reply:
            raise _exception(reply["raise"])
        try:
            return self.wire.decode(reply["ok"])
        except (KeyError, self.wire.Refused) as e:
            self.fail(f"the candidate sent a value that may not cross: {e}")

    def call(self, name, args, kwargs):
        try:
            message = {
                "op": "call",
                "name": name,
                "args": self.wire.encode(list(args)),
                "kwargs": self.wire.encode(dict(kwargs)),
            }
        except self.wire.Refused as e:  # the harness passed a non-plain value: a task error
            raise CandidateFailure(
                f"the test passed {name}() a value that cannot cross: {e}"
            ) from None
        reply = self.ask(message)
        value = self.result(reply)
        for key, tree in reply.get("after", []) if type(reply.get("after")) is list else []:
            target = args[key] if type(key) is int and key < len(args) else kwargs.get(key)
            try:
                _write_back(target, self.wire.decode(tree))
            except self.wire.Refused as e:
                self.fail(f"the candidate sent a value that may not cross: {e}")
        return value


def _write_back(target, new):
    """A list, dict or set argument the candidate changed in place, changed here the same way."""
    if type(target) is list and type(new) is list:
        target[:] = new
    elif type(target) in (dict, set) and type(new) is type(target):
        target.clear()
        target.update(new)


def _exception(raised):
    """The exception the candidate raised, as the nearest built-in class (so ``pytest.raises(
    ValueError)`` sees a candidate's ``class Invalid(ValueError)``)."""
    message = str(raised.get("message", ""))[:2000] if type(raised) is dict else ""
    names = raised.get("types", []) if type(raised) is dict else []
    for name in names if type(names) is list else []:
        kind = getattr(builtins, name, None) if type(name) is str else None
        if isinstance(kind, type) and issubclass(kind, Exception) and name not in NOT_EXCEPTIONS:
            try:
                return kind(message)
            except Exception:  # UnicodeDecodeError and the like want more arguments
                return Exception(f"{name}: {message}")
    return CandidateFailure(f"the candidate raised {names[:1]}: {message}")


class RemoteFunction:
    __slots__ = ("_bridge", "_name")

    def __init__(self, bridge, name):
        self._bridge, self._name = bridge, name

    def __call__(self, *args, **kwargs):
        return self._bridge.call(self._name, args, kwargs)

    def __repr__(self):
        return f"<candidate function {self._name}>"


def _refused_class(bridge, name):
    def refuse(*args, **kwargs):
        bridge.fail(
            f"{name} is a class: objects with state cannot cross to a function-level task's "
            "tests (give the task mode 'repo')"
        )

    return refuse


class BridgeFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers ``import MODULE`` (and its parent packages) with the proxy module."""

    def __init__(self, bridge, module):
        self.bridge, self.module = bridge, module
        parts = module.split(".")
        self.packages = {".".join(parts[:k]) for k in range(1, len(parts))}

    def find_spec(self, name, path=None, target=None):
        if name == self.module or name in self.packages:
            return importlib.machinery.ModuleSpec(name, self, is_package=name in self.packages)
        return None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        if module.__name__ in self.packages:
            module.__path__ = []
            return
        reply = self.bridge.ask({"op": "hello"})
        if "raise" in reply:
            error = _exception(reply["raise"])
            raise ImportError(f"the solution failed to import: {error!r}")
        listing = reply.get("ok") if type(reply.get("ok")) is dict else {}
        for name in listing.get("functions", []):
            if type(name) is str and name.isidentifier():
                setattr(module, name, RemoteFunction(self.bridge, name))
        for name in listing.get("classes", []):
            if type(name) is str and name.isidentifier():
                setattr(module, name, _refused_class(self.bridge, name))
        values = listing.get("values", {})
        for name, tree in values.items() if type(values) is dict else ():
            if name.isidentifier() and not name.startswith("__"):
                try:
                    setattr(module, name, self.bridge.wire.decode(tree))
                except self.bridge.wire.Refused as e:
                    self.bridge.fail(f"the candidate sent a value that may not cross: {e}")


def _load_wire(box):
    spec = importlib.util.spec_from_file_location(
        "_preflab_wire", os.path.join(box, "_preflab_wire.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    box, mode, target, nodeids = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    nonce = os.read(NONCE_FD, 256).decode()
    os.close(NONCE_FD)
    bridge = None
    if mode == "--bridge":
        bridge = Bridge(_load_wire(box))
        sys.meta_path.insert(0, BridgeFinder(bridge, target))
    else:
        # appended, never prepended: a candidate's pytest.py, sitecustomize.py or json.py cannot
        # shadow the interpreter's modules (-I already keeps the cwd and PYTHON* variables out)
        sys.path.append(target)
    guard = Guard(nonce, bridge)
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
