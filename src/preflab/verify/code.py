"""The code verifier: a candidate solution against a task's pytest harness, in sandboxes.

Two shapes (``CodeTask.mode``, see ``docs/verify.md``):

* ``function`` (the default): the judge and the candidate live in different processes, each in
  a sandbox of its own, under different uids as root. The judge (pytest through ``_runner.py``
  on the harness) never imports candidate code: the solution module its tests import is a proxy
  whose calls cross two pipes as plain data (``_wire.py``) to the candidate's process
  (``_candidate.py``), which runs in a minimal root where the harness, the tasks file and the
  expected values do not exist. A value that may not cross (an ``int`` subclass, an object with
  a custom ``__eq__``, a generator) is refused, and any refusal is reward 0 with the reason.
* ``repo`` (SWE-style, where the tests must import the patched code): the candidate's files
  share the judge's process. Its verdict is trusted only as far as in-process checks reach: a
  static screen of the candidate's files (:mod:`preflab.verify.screen`) sends runner tampering
  to 0 before anything runs; the run's nonce, pytest's integrity check and the digests of the
  harness and of pytest's code catch what the screen cannot see.

In both, a fresh work directory holds the harness; SHA-256 of every harness file and of pytest's
code is taken before and after; the JUnit XML comes down a pipe only the host reads. The reward
is 1.0 only when the digests match, the result document carries this run's nonce and an intact
integrity check, nothing was refused, every expected test ran, and every fail-to-pass (f2p) and
pass-to-pass (p2p) test passed. Anything else is 0 with a reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from xml.etree import ElementTree

from .digest import diff, pytest_entry_digests, tree_digests
from .result import Verdict
from .sandbox import (
    Limits,
    claim_uid,
    ensure_available,
    minimal_root_script,
    python_trees,
    run_sandboxed,
    spawn_sandboxed,
    stop,
    wait_or_kill,
    wrap_minimal,
)
from .screen import screen_files
from .tasks import CodeTask

#: how long a candidate's process may take to exit once the judge is done before it is killed
CANDIDATE_GRACE_S = 1.0
RUNNER = Path(__file__).with_name("_runner.py")
WIRE = Path(__file__).with_name("_wire.py")
CANDIDATE = Path(__file__).with_name("_candidate.py")
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
    if document.lstrip().startswith(b"{"):  # the runner could not start pytest: it says why
        try:
            said = json.loads(document)["preflab_error"]
        except (ValueError, KeyError, TypeError):
            said = "the runner failed"
        raise ResultDocumentError(
            f"{said}: the interpreter or its site-packages lies under a directory the sandbox "
            "hides or cannot read; install pytest where every user can read it"
        )
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
    if "preflab_refusals" in props:
        try:
            refusals = json.loads(props["preflab_refusals"] or "[]")
        except ValueError:
            refusals = ["unreadable refusal list"]
        if refusals:
            raise ResultDocumentError("refused: " + "; ".join(str(r) for r in refusals[:3]))
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


def _write_files(root: Path, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def _prepare(task: CodeTask, work: Path, bridge: bool) -> Path:
    """The harness in ``work/box``: the task's files, the runner, the wire codec."""
    box = work / "box"
    if task.harness_dir:
        shutil.copytree(task.harness_dir, box, symlinks=False)
    box.mkdir(exist_ok=True)
    _write_files(box, task.files)
    (box / "pytest.ini").write_text(PYTEST_INI)
    shutil.copyfile(RUNNER, box / "_preflab_runner.py")
    if bridge:
        shutil.copyfile(WIRE, box / "_preflab_wire.py")
    os.chmod(work, 0o711)
    for path in [box, *box.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return box


def _own(directory: Path, uid: int | None) -> None:
    """``directory`` and what it holds: the given uid's, private to it."""
    if uid is None:
        return
    for path in [directory, *directory.rglob("*")]:
        os.chown(path, uid, uid)
    os.chmod(directory, 0o700)


def _env(home: Path, tmp: str | None = None) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "TMPDIR": tmp or str(home),
        "LANG": "C.UTF-8",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    }


def module_name(solution_path: str) -> str:
    """``pkg/solution.py`` -> ``pkg.solution``: the module a function-level task's tests import."""
    return str(PurePosixPath(solution_path).with_suffix("")).replace("/", ".")


def verify_code(
    task: CodeTask, solution: str | Mapping[str, str], *, limits: Limits | None = None
) -> Verdict:
    limits = limits or Limits(wall_s=task.timeout_s, cpu_s=int(task.timeout_s) + 1)
    ensure_available()
    files = solution_files(task, solution)
    if task.mode == "repo":
        found = screen_files(files, allow=task.screen_allow)
        if found:
            return Verdict(
                task_id=task.task_id,
                kind="code",
                reward=0.0,
                reason="static screen: " + "; ".join(found[:5]),
                f2p_exit=1,
                harness_sha256_verified=None,
            )
    with contextlib.ExitStack() as stack:
        root = os.geteuid() == 0
        judge_uid = stack.enter_context(claim_uid()) if root else None
        if task.mode == "repo":
            return _verify_repo(task, files, limits, judge_uid)
        candidate_uid = stack.enter_context(claim_uid()) if root else None
        return _verify_function(task, files, limits, judge_uid, candidate_uid)
    raise AssertionError("unreachable")


def _runner_command(box: Path, mode: str, target: str, task: CodeTask) -> list[str]:
    """The judge: ``_runner.py`` on the task's test files, ``--import DIR`` or ``--bridge MODULE``."""
    runner = str(box / "_preflab_runner.py")
    return [sys.executable, "-I", "-B", runner, str(box), mode, target, *_test_files(task)]


def start_candidate(
    command: list[str],
    *,
    work: Path,
    new_root: Path,
    home: Path,
    keep: list[Path],
    uid: int | None,
    limits: Limits,
    fds: dict[int, int],
    log: Path,
    edit_script: Callable[[str], str] = lambda script: script,
) -> subprocess.Popen[bytes]:
    """``command`` in a candidate's minimal root (system, interpreter, ``keep``; preflab's own
    package hidden; ``home`` its only writable place), the host's pipes ``fds`` placed; the
    caller closes its copies of the child's ends, waits and calls ``stop``."""
    script = minimal_root_script(
        new_root,
        home,
        [*candidate_trees(), *keep],
        uid,
        limits.scratch_bytes,
        hide=hidden_from_candidates(),
    )
    return spawn_sandboxed(
        wrap_minimal(edit_script(script), command),
        cwd=work,
        limits=limits,
        env=_env(home, "/tmp"),
        fds=fds,
        log=log,
    )


def _test_files(task: CodeTask) -> list[str]:
    # whole test files, not node ids: a candidate that breaks collection then shows as a
    # collection error of the module (its tests failed) rather than as a usage error
    return list(dict.fromkeys(n.split("::", 1)[0] for n in [*task.f2p, *task.p2p]))


def _verify_repo(
    task: CodeTask, files: Mapping[str, str], limits: Limits, uid: int | None
) -> Verdict:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="preflab-verify-") as tmp:
        work = Path(tmp)
        box = _prepare(task, work, bridge=False)
        solution_dir = box / "solution"
        solution_dir.mkdir()
        _write_files(solution_dir, files)
        _own(solution_dir, uid)
        before = {**tree_digests(box, skip=(solution_dir,)), **pytest_entry_digests()}
        nonce = secrets.token_hex(16)
        command = _runner_command(box, "--import", str(solution_dir), task)
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


def candidate_trees() -> list[Path]:
    """What of the host a candidate's minimal root holds besides the system directories: the
    interpreter trees and the site-packages directories it imports from (never a checkout or a
    source directory on ``sys.path``: those may hold tasks)."""
    return python_trees()


def hidden_from_candidates() -> list[Path]:
    """preflab's own package (its bundled data, its verifier's code) is never the candidate's
    to read, even when preflab is installed in the interpreter's site-packages."""
    return [Path(__file__).resolve().parents[1]]


def _verify_function(
    task: CodeTask,
    files: Mapping[str, str],
    limits: Limits,
    judge_uid: int | None,
    candidate_uid: int | None,
) -> Verdict:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="preflab-verify-") as tmp:
        work = Path(tmp)
        box = _prepare(task, work, bridge=True)
        judge_home = work / "judge"
        judge_home.mkdir()
        _own(judge_home, judge_uid)
        cand = work / "cand"
        stub, home, new_root = cand / "stub", cand / "home", cand / "root"
        for d in (stub, home, new_root):
            d.mkdir(parents=True)
        shutil.copyfile(CANDIDATE, stub / "_preflab_candidate.py")
        shutil.copyfile(WIRE, stub / "_preflab_wire.py")
        os.chmod(cand, 0o711)
        for path in [stub, *stub.iterdir()]:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        _write_files(home, files)
        _own(home, candidate_uid)
        before = {**tree_digests(box), **pytest_entry_digests()}
        nonce = secrets.token_hex(16)
        candidate_command = [
            sys.executable,
            "-I",
            "-B",
            str(stub / "_preflab_candidate.py"),
            str(stub / "_preflab_wire.py"),
            str(home),
            module_name(task.solution_path),
        ]
        requests_r, requests_w = os.pipe()
        replies_r, replies_w = os.pipe()
        candidate = start_candidate(
            candidate_command,
            work=cand,
            new_root=new_root,
            home=home,
            keep=[stub],
            uid=candidate_uid,
            limits=limits,
            fds={3: requests_r, 4: replies_w},
            log=work / "candidate.log",
        )
        os.close(requests_r)
        os.close(replies_w)
        judge_command = _runner_command(box, "--bridge", module_name(task.solution_path), task)
        try:
            run = run_sandboxed(
                judge_command,
                workdir=work,
                cwd=judge_home,
                limits=limits,
                uid=judge_uid if judge_uid is not None else os.getuid(),
                env=_env(judge_home),
                secret=nonce.encode(),
                writable=judge_home,
                extra_fds={5: requests_w, 6: replies_r},
            )
        finally:
            # the candidate serves calls until the judge is gone, then reads the end of its pipe
            # and exits by itself (a few ms); one that does not is killed
            wait_or_kill(candidate, CANDIDATE_GRACE_S)
            stop(candidate, candidate_uid)
        after = {**tree_digests(box), **pytest_entry_digests()}
        tail = (work / "candidate.log").read_bytes()[-2000:].decode("utf-8", "replace")
    run.output_tail = tail + run.output_tail
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
