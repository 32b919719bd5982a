"""The code verifier: a candidate solution against a task's pytest harness, in a sandbox.

Steps: a fresh work directory holds the harness (read-only to the candidate) and the candidate's
files (``solution/``, its only writable place and its cwd); SHA-256 of every harness file and
of pytest's own code is taken; pytest runs sandboxed (:mod:`preflab.verify.sandbox`) through
``_runner.py``, which sends the JUnit XML down a pipe only the host reads; after teardown the
digests are taken again. The reward is 1.0 only when the digests match, the result document
carries this run's nonce and an intact integrity check, every expected test ran, and every
fail-to-pass (f2p) and pass-to-pass (p2p) test passed. Anything else is 0 with a reason.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from xml.etree import ElementTree

from .digest import diff, pytest_entry_digests, tree_digests
from .result import Verdict
from .sandbox import Limits, claim_uid, ensure_available, run_sandboxed
from .tasks import CodeTask

RUNNER = Path(__file__).with_name("_runner.py")
PYTEST_INI = "[pytest]\n"
CODE_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.DOTALL)


def extract_code(completion: str) -> str:
    """The last fenced code block of a model completion, or the whole text when there is none."""
    blocks = CODE_FENCE.findall(completion)
    return blocks[-1] if blocks else completion


@dataclass(frozen=True)
class Outcome:
    ran: bool
    passed: bool


def junit_address(nodeid: str) -> tuple[str, str]:
    """``(classname, name)`` pytest's junitxml writes for a node id (``mangle_test_address``)."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


class ResultDocumentError(ValueError):
    pass


def read_results(document: bytes, nonce: str) -> dict[tuple[str, str], Outcome]:
    """Outcomes from the JUnit XML of the result channel; refuses a document without this run's
    nonce, with a failed integrity check, or that is not exactly one well-formed document."""
    if not document.strip():
        raise ResultDocumentError("no result document arrived (pytest did not finish)")
    try:
        root = ElementTree.fromstring(document)
    except ElementTree.ParseError as e:
        raise ResultDocumentError(f"result document unreadable ({e})") from e
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    if props.get("preflab_nonce") != nonce:
        raise ResultDocumentError("result document lacks this run's nonce (forged or replaced)")
    if props.get("preflab_integrity") != "ok":
        raise ResultDocumentError(
            f"pytest/unittest internals were modified: "
            f"{props.get('preflab_integrity') or 'check missing'}"
        )
    outcomes: dict[tuple[str, str], Outcome] = {}
    for case in root.iter("testcase"):
        key = (case.get("classname", ""), case.get("name", ""))
        skipped = case.find("skipped") is not None
        failed = case.find("failure") is not None or case.find("error") is not None
        previous = outcomes.get(key, Outcome(ran=True, passed=True))
        outcomes[key] = Outcome(
            ran=previous.ran and not skipped, passed=previous.passed and not failed and not skipped
        )
    return outcomes


def solution_files(task: CodeTask, solution: str | Mapping[str, str]) -> dict[str, str]:
    """A solution is one module's text (written to ``task.solution_path``) or several files."""
    if isinstance(solution, str):
        return {task.solution_path: solution}
    return {_relative(path): text for path, text in solution.items()}


def _relative(path: str) -> str:
    pure = PurePosixPath(path)
    if pure.is_absolute() or ".." in pure.parts or not pure.parts:
        raise ValueError(f"solution file {path!r} must be a relative path without '..'")
    return str(pure)


def _prepare(
    task: CodeTask, solution: Mapping[str, str], work: Path, uid: int | None
) -> tuple[Path, Path]:
    box = work / "box"
    if task.harness_dir:
        shutil.copytree(task.harness_dir, box, symlinks=False)
    box.mkdir(exist_ok=True)
    for rel, text in task.files.items():
        target = box / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    (box / "pytest.ini").write_text(PYTEST_INI)
    shutil.copyfile(RUNNER, box / "_preflab_runner.py")
    solution_dir = box / "solution"
    solution_dir.mkdir()
    for rel, text in solution.items():
        target = solution_dir / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    os.chmod(work, 0o711)
    for path in [box, *box.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    if uid is not None:
        for path in [solution_dir, *solution_dir.rglob("*")]:
            os.chown(path, uid, uid)
        os.chmod(solution_dir, 0o700)
    return box, solution_dir


def _env(solution_dir: Path) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(solution_dir),
        "TMPDIR": str(solution_dir),
        "LANG": "C.UTF-8",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }


def verify_code(
    task: CodeTask, solution: str | Mapping[str, str], *, limits: Limits | None = None
) -> Verdict:
    limits = limits or Limits(wall_s=task.timeout_s, cpu_s=int(task.timeout_s) + 1)
    ensure_available()
    if os.geteuid() != 0:  # no uid drop: the run keeps the caller's uid
        return _verify_code(task, solution, limits, None)
    with claim_uid() as uid:
        return _verify_code(task, solution, limits, uid)


def _verify_code(
    task: CodeTask, solution: str | Mapping[str, str], limits: Limits, uid: int | None
) -> Verdict:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="preflab-verify-") as tmp:
        work = Path(tmp)
        box, solution_dir = _prepare(task, solution_files(task, solution), work, uid)
        before = {**tree_digests(box, skip=(solution_dir,)), **pytest_entry_digests()}
        nonce = secrets.token_hex(16)
        # whole test files, not node ids: a candidate that breaks collection then shows as a
        # collection error of the module (its tests failed) rather than as a usage error
        test_files = list(dict.fromkeys(n.split("::", 1)[0] for n in [*task.f2p, *task.p2p]))
        command = [
            sys.executable,
            "-I",
            "-B",
            str(box / "_preflab_runner.py"),
            str(box),
            str(solution_dir),
            *test_files,
        ]
        run = run_sandboxed(
            command,
            workdir=work,
            cwd=solution_dir,
            limits=limits,
            uid=uid if uid is not None else os.getuid(),
            env=_env(solution_dir),
            secret=nonce.encode(),
            writable=solution_dir,
        )
        after = {**tree_digests(box, skip=(solution_dir,)), **pytest_entry_digests()}
    verdict = _judge(task, run, nonce, diff(before, after))
    verdict.wall_s = time.monotonic() - started
    return verdict


def _judge(task: CodeTask, run, nonce: str, changes: list[str]) -> Verdict:
    problems = []
    if changes:
        problems.append("harness changed: " + "; ".join(changes[:5]))
    if run.timed_out:
        problems.append(f"timed out after {task.timeout_s:g}s (process group killed)")
    elif run.returncode not in (0, 1, 2):  # 2: a collection error, seen in the document
        problems.append(f"pytest exited with {run.returncode}, not 0, 1 or 2")
    if run.leftovers:
        problems.append(f"{len(run.leftovers)} processes outlived the run (killed)")
    try:
        outcomes = read_results(run.channel, nonce)
    except ResultDocumentError as e:
        problems.append(str(e))
        outcomes = {}
    tests = {n: _outcome_name(_lookup(outcomes, n)) for n in [*task.f2p, *task.p2p]}
    missing = [n for n, o in tests.items() if o in ("not run", "skipped")]
    if missing and outcomes:
        problems.append("expected tests did not run: " + ", ".join(missing[:5]))
    f2p_exit = int(any(tests[n] != "passed" for n in task.f2p))
    p2p_exit = int(any(tests[n] != "passed" for n in task.p2p))
    verified = not problems
    if verified and (f2p_exit or p2p_exit):
        failing = [n for n, o in tests.items() if o != "passed"]
        reason = "tests failed: " + ", ".join(failing[:5])
    else:
        reason = "; ".join(problems) or "all tests passed"
    reward = 1.0 if verified and not f2p_exit and not p2p_exit else 0.0
    return Verdict(
        task_id=task.task_id,
        kind="code",
        reward=reward,
        reason=reason,
        f2p_exit=f2p_exit,
        p2p_exit=p2p_exit,
        harness_sha256_verified=verified,
        tests=tests,
    )


def _lookup(outcomes: dict[tuple[str, str], Outcome], nodeid: str) -> Outcome | None:
    """A test's outcome; a test whose module failed to import or was skipped whole takes the
    module's outcome (pytest reports only the module then)."""
    found = outcomes.get(junit_address(nodeid))
    if found is None:
        return outcomes.get(junit_address(nodeid.split("::", 1)[0]))
    return found


def _outcome_name(outcome: Outcome | None) -> str:
    if outcome is None:
        return "not run"
    if not outcome.ran:
        return "skipped"
    return "passed" if outcome.passed else "failed"
