"""The sandbox itself: what a command inside it can and cannot do. The command reports through
the result channel (fd 4), the same out-of-band pipe the code verifier reads."""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from preflab.verify.code import _judge
from preflab.verify.digest import diff, tree_digests
from preflab.verify.sandbox import Limits, SandboxRun, claim_uid, run_sandboxed
from preflab.verify.tasks import CodeTask

pytestmark = pytest.mark.usefixtures("sandbox")  # code verification runs sandboxed


@pytest.fixture
def work() -> Path:
    """Like the verifier's own work directory: a fresh one the sandbox uid can enter (pytest's
    tmp_path lies under a directory private to the host user)."""
    with tempfile.TemporaryDirectory(prefix="preflab-sandbox-test-") as tmp:
        os.chmod(tmp, 0o711)
        yield Path(tmp)


def run_probe(work: Path, source: str, *, limits: Limits | None = None) -> tuple[SandboxRun, dict]:
    script = work / "probe.py"
    script.write_text(textwrap.dedent(source))
    os.chmod(script, 0o644)
    with claim_uid() as uid:
        run = run_sandboxed(
            [sys.executable, "-I", str(script)],
            workdir=work,
            cwd=work,
            limits=limits or Limits(wall_s=20),
            uid=uid,
            env={"PATH": "/usr/bin:/bin"},
            secret=b"s3cret",
        )
    return run, {**json.loads(run.channel or b"{}"), "_claimed_uid": uid}


REPORT = "import json, os\ndef report(**kw):\n    os.write(4, json.dumps(kw).encode())\n"


def test_a_socket_connect_fails_even_to_a_port_open_on_the_host(work):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    run, seen = run_probe(
        work,
        REPORT
        + f"""
import socket
def attempt(address):
    s = socket.socket()
    s.settimeout(3)
    try:
        return s.connect_ex(address)
    except OSError as e:
        return e.errno
report(outside=attempt(("1.1.1.1", 80)), host_loopback=attempt(("127.0.0.1", {port})),
       interfaces=sorted(name for _, name in socket.if_nameindex()))
""",
    )
    listener.close()
    assert run.returncode == 0, run.output_tail
    assert seen["outside"] != 0 and seen["host_loopback"] != 0
    assert seen["interfaces"] == ["lo"]  # a new network namespace: loopback only, and down


@pytest.mark.skipif(os.geteuid() != 0, reason="uid drop happens only when run as root")
def test_the_command_runs_unprivileged_with_the_limits_set(work):
    run, seen = run_probe(
        work,
        REPORT
        + """
import resource
report(uid=os.getuid(), groups=os.getgroups(), pid=os.getpid(),
       limits={name: resource.getrlimit(getattr(resource, name))[0]
               for name in ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_NPROC", "RLIMIT_FSIZE",
                            "RLIMIT_NOFILE")},
       secret=os.read(3, 100).decode(), host_pids_visible=len([p for p in os.listdir("/proc") if p.isdigit()]))
""",
        limits=Limits(
            wall_s=20,
            cpu_s=7,
            address_space_bytes=1 << 30,
            processes=32,
            file_size_bytes=1 << 20,
            open_files=64,
        ),
    )
    assert run.returncode == 0, run.output_tail
    assert seen["uid"] == seen["_claimed_uid"] and seen["groups"] == []
    assert seen["pid"] == 1  # PID 1 of its own namespace
    assert seen["host_pids_visible"] == 1
    assert seen["secret"] == "s3cret"
    assert seen["limits"] == {
        "RLIMIT_CPU": 7,
        "RLIMIT_AS": 1 << 30,
        "RLIMIT_NPROC": 32,
        "RLIMIT_FSIZE": 1 << 20,
        "RLIMIT_NOFILE": 64,
    }


def test_the_wall_clock_kills_the_whole_group(work):
    run, _ = run_probe(
        work,
        "import subprocess, time\nsubprocess.Popen(['sleep', '300'])\ntime.sleep(300)\n",
        limits=Limits(wall_s=1),
    )
    assert run.timed_out and run.returncode is None
    assert run.wall_s < 10


def test_the_file_size_limit_stops_a_disk_filler(work):
    run, seen = run_probe(
        work,
        REPORT + "import os\ntry:\n    open('/tmp/big', 'wb').write(b'x' * (2 << 20))\n"
        "except OSError as e:\n    report(error=e.strerror, size=os.path.getsize('/tmp/big'))\n",
        limits=Limits(wall_s=10, file_size_bytes=1 << 20),
    )
    # Python ignores SIGXFSZ, so write() fails EFBIG
    assert seen["error"] == "File too large" and seen["size"] <= 1 << 20, run.output_tail


def test_a_world_writable_host_directory_is_read_only_inside(work):
    """Every host mount is remounted read-only in the sandbox: a directory anyone may write on
    the host (here 0777 beside the probe) takes no write from inside it."""
    writable = work / "out"
    writable.mkdir(mode=0o777)
    os.chmod(writable, 0o777)
    run, seen = run_probe(
        work,
        REPORT + f"try:\n    open('{writable}/x', 'w').write('x')\n    report(error=None)\n"
        "except OSError as e:\n    report(error=e.strerror)\n",
    )
    assert seen["error"] == "Read-only file system", run.output_tail
    assert not (writable / "x").exists()


def test_digests_name_every_change_addition_and_deletion(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test(): assert 1\n")
    (tmp_path / "fixture.sqlite").write_bytes(b"db")
    before = tree_digests(tmp_path)
    (tmp_path / "tests" / "test_a.py").write_text("def test(): pass\n")
    (tmp_path / "fixture.sqlite").unlink()
    (tmp_path / "tests" / "conftest.py").write_text("")
    assert diff(before, tree_digests(tmp_path)) == [
        "added tests/conftest.py",
        "changed tests/test_a.py",
        "deleted fixture.sqlite",
    ]


def test_a_changed_harness_gives_reward_zero_even_when_every_test_passed():
    """Where the candidate could write (not root: no uid of its own), the digest is the guard."""
    task = CodeTask(task_id="t", kind="code", f2p=["tests/test_a.py::test"])
    passing = (
        b'<testsuites><testsuite><properties><property name="preflab_nonce" value="n"/>'
        b'<property name="preflab_integrity" value="ok"/></properties>'
        b'<testcase classname="tests.test_a" name="test"/></testsuite></testsuites>'
    )
    run = SandboxRun(returncode=0, timed_out=False, wall_s=0.1, channel=passing)
    assert _judge(task, run, "n", []).reward == 1.0
    tampered = _judge(task, run, "n", ["changed tests/test_a.py"])
    assert (tampered.reward, tampered.harness_sha256_verified) == (0.0, False)
    assert "harness changed: changed tests/test_a.py" in tampered.reason


@pytest.mark.skipif(os.geteuid() != 0, reason="uids are claimed only when run as root")
def test_concurrent_runs_never_share_a_uid():
    """Two runs at once in one process (threads) get different uids, so reaping one run's
    leftovers can never kill the other's processes."""
    with claim_uid() as first, claim_uid() as second:
        assert first != second
    with claim_uid() as again:
        assert again == first  # released when the run ends
