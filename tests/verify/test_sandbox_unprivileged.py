"""The sandbox's non-root path (``unshare --map-root-user``): the verifier run by an unprivileged
user (``runuser -u nobody``), as it runs on a laptop or in a CI job without root.

Needs root to switch to ``nobody`` (skipped otherwise on a laptop, where the whole suite already
runs this path; a failure in CI, which runs as root). The interpreter and the checkout may live
under a directory ``nobody`` cannot enter (``/root`` with pyenv, a clone in a ``mktemp -d``
directory): the driver then runs in a private mount namespace where only those trees are
bind-mounted back read-only, as on any machine where Python is installed for every user."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import preflab
from preflab.verify.sandbox import _blocking_ancestor, _processes_of, interpreter_trees

from . import test_hacks_in_process as hacks_in_process
from .conftest import CORRECT

NOBODY = "nobody"

DRIVER = r"""
import json, os, sys
from preflab.verify import verify
from preflab.verify.tasks import CodeTask

TESTS = "from solution import add\n\ndef test_add():\n    assert add(2, 3) == 5\n\ndef test_zero():\n    assert add(0, 0) == 0\n"
task = CodeTask(task_id="add", kind="code", timeout_s=30, files={"tests/test_add.py": TESTS},
                f2p=["tests/test_add.py::test_add"], p2p=["tests/test_add.py::test_zero"])
CORRECT = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return 0\n"
marker = sys.argv[1]
cases = {
    "correct": CORRECT,
    "wrong": WRONG,
    "network": "import socket\ndef add(a, b):\n    socket.create_connection(('1.1.1.1', 80), timeout=3).close()\n"
               "    return a + b\n",
    "rewrite_tests": "open('../tests/test_add.py', 'w').write('def test_add(): pass\\ndef test_zero(): pass\\n')\n"
                     + WRONG,
    "write_tmp": f"open({marker!r}, 'w').write('x')\n" + CORRECT,
    "background": "import subprocess\nsubprocess.Popen(['sleep', '600'], start_new_session=True)\n" + CORRECT,
}
out = {"uid": os.geteuid()}
for name, solution in cases.items():
    v = verify(task, {"solution.py": solution})
    out[name] = {"reward": v.reward, "harness": v.harness_sha256_verified, "reason": v.reason}
print(json.dumps(out))
"""


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the unprivileged sandbox path must run in CI: {reason}")
    pytest.skip(reason)


def _mount_script(stage: Path, src: Path) -> list[str]:
    """Shell lines that make the interpreter and preflab's source reachable for ``nobody`` in
    this mount namespace."""
    hidden: dict[Path, list[Path]] = {}
    for tree in [*interpreter_trees(), src]:
        if (blocker := _blocking_ancestor(tree)) is not None:
            hidden.setdefault(blocker, []).append(tree)
    trees = [t for ts in hidden.values() for t in ts]
    lines = [
        f"mkdir -p {stage}/{k} && mount --bind {shlex.quote(str(t))} {stage}/{k}"
        for k, t in enumerate(trees)
    ]
    lines += [f"mount -t tmpfs -o mode=0755,size=1m tmpfs {shlex.quote(str(b))}" for b in hidden]
    lines += [
        f"mkdir -p {shlex.quote(str(t))} && mount --bind {stage}/{k} {shlex.quote(str(t))} && "
        f"mount -o remount,bind,ro {shlex.quote(str(t))}"
        for k, t in enumerate(trees)
    ]
    return lines


@pytest.fixture(scope="module")
def as_nobody() -> dict:
    """The driver's verdicts, run as ``nobody``; the marker file a candidate tried to write."""
    if os.geteuid() != 0 or not shutil.which("runuser") or not shutil.which("unshare"):
        _unavailable("needs root and util-linux runuser/unshare to switch to an unprivileged user")
    src = Path(preflab.__file__).resolve().parents[1]
    probe = subprocess.run(
        ["runuser", "-u", NOBODY, "--", "unshare", "--map-root-user", "--net", "true"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        _unavailable(f"unprivileged user namespaces are off here: {probe.stderr.strip()}")
    box = Path(tempfile.mkdtemp(prefix="preflab-nobody-"))
    try:
        box.chmod(0o755)
        (box / "driver.py").write_text(DRIVER)
        marker = Path(tempfile.gettempdir()) / f"{box.name}-marker"
        run = [
            *_mount_script(box / "stage", src),
            f"exec runuser -u {NOBODY} -- env PYTHONPATH={shlex.quote(str(src))} "
            f"{shlex.quote(sys.executable)} {box}/driver.py {marker}",
        ]
        done = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "--", "sh", "-ec", "\n".join(run)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(done.stdout.strip().splitlines()[-1])
        result["marker_exists"] = marker.exists()
        marker.unlink(missing_ok=True)
        return result
    finally:
        shutil.rmtree(box, ignore_errors=True)


def test_the_verifier_runs_as_the_unprivileged_user(as_nobody):
    assert as_nobody["uid"] != 0
    assert as_nobody["correct"]["reward"] == 1.0 and as_nobody["correct"]["harness"] is True
    assert as_nobody["wrong"]["reward"] == 0.0


def test_a_socket_connect_fails_without_root(as_nobody):
    assert as_nobody["network"]["reward"] == 0.0
    assert "tests failed" in as_nobody["network"]["reason"]


def test_rewriting_the_tests_is_impossible_without_root(as_nobody):
    """Without root there is no uid drop, but the tests are not in the candidate's world (its
    minimal root) and every host mount is read-only to it: the write fails, the harness is
    intact, the wrong answer fails its tests."""
    verdict = as_nobody["rewrite_tests"]
    assert verdict["reward"] == 0.0 and verdict["harness"] is True, verdict
    assert "tests failed" in verdict["reason"]


def test_writes_to_tmp_stay_in_private_scratch_without_root(as_nobody):
    assert as_nobody["write_tmp"]["reward"] == 1.0  # the write is harmless to the verdict
    assert as_nobody["marker_exists"] is False  # and never reached the host's /tmp


def test_a_background_process_does_not_outlive_the_run_without_root(as_nobody):
    assert as_nobody["background"]["reward"] == 1.0
    nobody_uid = int(subprocess.run(["id", "-u", NOBODY], capture_output=True, text=True).stdout)
    sleepers = [
        pid
        for pid in _processes_of(nobody_uid)
        if b"sleep\x00600" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]
    assert sleepers == []  # the PID namespace took it down with the run


VENV_DRIVER = r"""
import json, os, site, sys
from preflab.verify import verify
from preflab.verify.screen import RULES
from preflab.verify.tasks import CodeTask

TESTS = "from solution import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"
WRONG = "def add(a, b):\n    return 0\n"
SITE = site.getsitepackages()[0]
HOOK = "import _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n"
PERSIST = {
    "pth_and_hook_module": (
        f"open({os.path.join(SITE, 'zz_hook.py')!r}, 'w').write({HOOK!r})\n"
        f"open({os.path.join(SITE, 'zz_hook.pth')!r}, 'w').write('import zz_hook\\n')\n"
    ),
    "sitecustomize_in_site_packages": (
        f"open({os.path.join(SITE, 'sitecustomize.py')!r}, 'w').write({HOOK!r})\n"
    ),
    "interpreter_replaced_by_a_wrapper": (
        "import os\n"
        f"p = {os.path.join(sys.prefix, 'bin', 'python')!r}\n"
        "real = os.path.realpath(p)\n"
        "os.replace(p, p + '.real') if os.path.lexists(p) else None\n"
        "open(p, 'w').write('#!/bin/sh\\nexec ' + real + ' -c \"import sys; sys.exit(0)\"\\n')\n"
        "os.chmod(p, 0o755)\n"
    ),
    "pyvenv_cfg_rewritten": (
        f"open({os.path.join(sys.prefix, 'pyvenv.cfg')!r}, 'a').write('include-system-site-packages = true\\n')\n"
    ),
}
out = {"uid": os.geteuid(), "site_owner": os.stat(SITE).st_uid, "site": SITE}
for mode, allow in (("function", []), ("repo", sorted(RULES))):
    task = CodeTask(task_id="add", kind="code", timeout_s=30, files={"tests/test_add.py": TESTS},
                    f2p=["tests/test_add.py::test_add"], mode=mode, screen_allow=allow)
    for name, writer in PERSIST.items():
        def wrap(body):
            return "try:\n" + "".join("    " + l + "\n" for l in body.splitlines()) + \
                "except OSError as e:\n    import sys; print('blocked', e, file=sys.stderr)\n"
        first = verify(task, {"solution.py": wrap(writer) + WRONG})
        then = verify(task, {"solution.py": WRONG})
        out[f"{mode}:{name}"] = {"first": first.reward, "then": then.reward, "why": then.reason}
out["left_behind"] = sorted(set(os.listdir(SITE)) & {"zz_hook.py", "zz_hook.pth", "sitecustomize.py"})
# the in-process corpus (tests/verify/test_hacks_in_process.py), as this user
corpus = json.load(open(sys.argv[1]))
tests = corpus["files"]
task = CodeTask(task_id="add", kind="code", timeout_s=30, files=tests, f2p=corpus["f2p"],
                p2p=corpus["p2p"])
out["honest"] = verify(task, {"solution.py": corpus["correct"]}).reward
for name, source in corpus["hacks"].items():
    for mode in ("function", "repo"):
        if mode == "repo" and name in corpus["function_only"]:
            continue
        v = verify(task.model_copy(update={"mode": mode}), {"solution.py": source})
        out[f"corpus:{mode}:{name}"] = {"reward": v.reward, "reason": v.reason}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def nobody_with_own_venv() -> dict:
    """The driver run as ``nobody`` from a virtual environment ``nobody`` owns (its
    site-packages writable to it, preflab's dependencies reached through a ``.pth``)."""
    if os.geteuid() != 0 or not shutil.which("runuser") or not shutil.which("unshare"):
        _unavailable("needs root and util-linux runuser/unshare to switch to an unprivileged user")
    src = Path(preflab.__file__).resolve().parents[1]
    deps = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]
    box = Path(tempfile.mkdtemp(prefix="preflab-nobody-venv-"))
    try:
        box.chmod(0o755)
        (box / "driver.py").write_text(VENV_DRIVER)
        (box / "corpus.json").write_text(json.dumps(CORPUS))
        (box / "corpus.json").chmod(0o644)
        venv = box / "venv"
        venv.mkdir()
        nobody = int(subprocess.run(["id", "-u", NOBODY], capture_output=True, text=True).stdout)
        os.chown(venv, nobody, nobody)
        base = Path(sys.base_prefix) / "bin" / "python3"
        (box / "deps.pth").write_text("\n".join([str(src), *deps]) + "\n")
        (box / "deps.pth").chmod(0o644)
        lib = f"python{sys.version_info.major}.{sys.version_info.minor}"
        run = [
            *_mount_script(box / "stage", src),
            f"runuser -u {NOBODY} -- {shlex.quote(str(base))} -m venv --without-pip {venv}",
            f"runuser -u {NOBODY} -- cp {box}/deps.pth {venv}/lib/{lib}/site-packages/",
            f"exec runuser -u {NOBODY} -- {venv}/bin/python {box}/driver.py {box}/corpus.json",
        ]
        done = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "--", "sh", "-ec", "\n".join(run)],
            capture_output=True,
            text=True,
            timeout=400,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(box, ignore_errors=True)


CORPUS = {
    "files": hacks_in_process.FILES,
    "f2p": hacks_in_process.NODES,
    "p2p": ["tests/test_add.py::test_zero"],
    "correct": CORRECT,
    "hacks": {name: hacks_in_process.hack(src) for name, src in hacks_in_process.HACKS.items()},
    "function_only": sorted(hacks_in_process.FUNCTION_ONLY),
}


@pytest.mark.parametrize("name", sorted(hacks_in_process.HACKS))
def test_the_in_process_corpus_scores_zero_as_an_unprivileged_user(nobody_with_own_venv, name):
    assert nobody_with_own_venv["honest"] == 1.0
    modes = ["function"] + ([] if name in hacks_in_process.FUNCTION_ONLY else ["repo"])
    for mode in modes:
        seen = nobody_with_own_venv[f"corpus:{mode}:{name}"]
        assert seen["reward"] == 0.0, (mode, seen)


PERSISTENCE = [
    "pth_and_hook_module",
    "sitecustomize_in_site_packages",
    "interpreter_replaced_by_a_wrapper",
    "pyvenv_cfg_rewritten",
]


def test_the_unprivileged_user_owns_its_site_packages(nobody_with_own_venv):
    assert nobody_with_own_venv["uid"] != 0
    assert nobody_with_own_venv["site_owner"] == nobody_with_own_venv["uid"]


@pytest.mark.parametrize("mode", ["function", "repo"])
@pytest.mark.parametrize("name", PERSISTENCE)
def test_nothing_a_candidate_writes_outlives_its_run(nobody_with_own_venv, mode, name):
    """Each hack writes into the interpreter it runs under (which the user owns) so that the
    *next* wrong solution passes; the sandbox's read-only mounts keep the write from landing."""
    seen = nobody_with_own_venv[f"{mode}:{name}"]
    assert nobody_with_own_venv["honest"] == 1.0  # the verifier works for this user at all
    assert seen["first"] == 0.0
    assert seen["then"] == 0.0, seen
    assert nobody_with_own_venv["left_behind"] == []
