"""Run one command in a throwaway sandbox: no network, rlimits, a wall clock, nothing left behind.

Isolation comes from Linux namespaces through util-linux ``unshare`` (present on every Debian
and in most container images; bubblewrap is not installed here, so it is not required):

* ``--net``: a new network namespace holding only a downed loopback, so every connect fails;
* ``--pid --fork --kill-child --mount-proc``: the command is PID 1 of a new PID namespace, so
  when it exits (or is killed) the kernel SIGKILLs every process it left behind, daemons included;
* as root, the command then drops to an unprivileged uid of its own (``setpriv``), so the
  harness, the host's files and the interpreter are read-only to it and ``RLIMIT_NPROC``
  applies (root is exempt from it). Directories the interpreter lives under that the uid cannot
  enter (``/root`` with pyenv) are replaced in the sandbox's mount namespace by a tmpfs holding
  only a read-only bind of the interpreter tree, which also hides the rest of them; ``/tmp``,
  ``/var/tmp``, ``/dev/shm``, ``/run/lock`` and the command's own writable directory become
  private, size-limited tmpfs (see :func:`_private_scratch`).
* not as root, ``--map-root-user`` makes the namespaces unprivileged ones; the command keeps
  the caller's uid (the digest check in :mod:`preflab.verify.code` is then what catches writes
  to the harness) but gets the same private tmpfs scratch, so what it writes to ``/tmp`` and
  the like never reaches the host; files the caller's uid owns elsewhere stay writable to it
  (``tests/verify/test_sandbox_unprivileged.py``).

Two more rules hold on both paths:

* **nothing outside the scratch is writable**: every mount the host has (``/``, a home
  directory, a virtual environment the caller owns) is remounted read-only in the sandbox's
  mount namespace before the private scratch is laid over it, so a ``.pth`` file or a hook module
  written into site-packages cannot outlive the run whoever runs it (:func:`_readonly_lines`);
* **no capabilities** reach the command: without root, the command is root only of its own user
  namespace, and ``setpriv`` empties its bounding set before the ``exec``, so it cannot undo
  the mounts that hide or protect things.

:func:`minimal_root_script` builds the candidate's world for function-level tasks: a fresh
tmpfs root holding read-only binds of the system directories and the interpreter, its own
``/proc``, ``/tmp`` and a handful of device nodes, its own directory, and nothing else: the
harness, the tasks file and the host's home directories do not exist there.

The caller's process group is SIGKILLed on the wall-clock deadline and every child is reaped.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

SANDBOX_UID_BASE = 61000
SANDBOX_UID_SPAN = 4000


@dataclass(frozen=True)
class Limits:
    """Per-run resource limits (``setrlimit``), applied before the namespace is entered."""

    wall_s: float = 30.0
    cpu_s: int = 30
    address_space_bytes: int = 2 * 1024**3
    processes: int = 64
    file_size_bytes: int = 16 * 1024**2
    open_files: int = 256
    #: size of each private tmpfs: the writable directory's copy, /tmp, /var/tmp, /dev/shm
    scratch_bytes: int = 64 * 1024**2

    def apply(self) -> None:
        """Runs in the child between fork and exec (``preexec_fn``). The open-files limit is
        set by the setup shell right before it ``exec``s the command (:func:`_place_fds`): the
        shell itself keeps directories and pipes open on numbers above it."""
        for limit, value in (
            (resource.RLIMIT_CPU, self.cpu_s),
            (resource.RLIMIT_AS, self.address_space_bytes),
            (resource.RLIMIT_NPROC, self.processes),
            (resource.RLIMIT_FSIZE, self.file_size_bytes),
            (resource.RLIMIT_CORE, 0),
        ):
            resource.setrlimit(limit, (value, value))


@dataclass
class SandboxRun:
    returncode: int | None
    timed_out: bool
    wall_s: float
    channel: bytes = b""
    output_tail: str = ""
    leftovers: list[int] = field(default_factory=list)


class SandboxUnavailable(RuntimeError):
    pass


def sandbox_uid() -> int:
    """This process's first-choice sandbox uid (where :func:`claim_uid` starts looking)."""
    return SANDBOX_UID_BASE + os.getpid() % SANDBOX_UID_SPAN


@contextlib.contextmanager
def claim_uid() -> Iterator[int]:
    """A uid no other run holds (threads and processes alike), for as long as the run lasts, so
    ``RLIMIT_NPROC`` and the leftover reaping touch only this run's processes. Claims are
    ``flock``s on files in a root-only directory; the kernel drops them if the holder dies."""
    locks = Path(tempfile.gettempdir()) / "preflab-verify-uids"
    locks.mkdir(mode=0o700, exist_ok=True)
    start = sandbox_uid() - SANDBOX_UID_BASE + threading.get_ident() % 97
    for k in range(SANDBOX_UID_SPAN):
        uid = SANDBOX_UID_BASE + (start + k) % SANDBOX_UID_SPAN
        fd = os.open(locks / str(uid), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        try:
            yield uid
        finally:
            os.close(fd)  # releases the lock
        return
    raise SandboxUnavailable(f"all {SANDBOX_UID_SPAN} sandbox uids are in use")


@functools.cache
def ensure_available() -> None:
    """:func:`check_available`, once per process (a failed check raises every time)."""
    check_available()


def check_available() -> None:
    if not shutil.which("unshare"):
        raise SandboxUnavailable("`unshare` (util-linux) is not installed; install util-linux")
    if not os.path.exists(SHELL):
        raise SandboxUnavailable("bash is not installed; the sandbox's setup runs in bash")
    probe = subprocess.run([*_unshare_prefix(), "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        raise SandboxUnavailable(
            f"cannot create namespaces ({probe.stderr.strip()}); run as root or enable "
            "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)"
        )


def _unshare_prefix() -> list[str]:
    flags = ["--net", "--pid", "--fork", "--kill-child", "--mount-proc"]
    if os.geteuid() != 0:
        flags.insert(0, "--map-root-user")
    return ["unshare", *flags, "--"]


def _blocking_ancestor(path: Path) -> Path | None:
    """The highest ancestor of ``path`` that other users may not enter, if any."""
    for parent in reversed(path.parents):
        if parent != Path("/") and not os.stat(parent).st_mode & 0o001:
            return parent
    return None


def interpreter_trees() -> list[Path]:
    trees = {
        Path(sys.prefix).resolve(),
        Path(sys.base_prefix).resolve(),
        Path(sys.executable).resolve().parent.parent,
    }
    return sorted(trees)


def site_dirs() -> list[Path]:
    """The site-packages directories this interpreter imports from, those that ``.pth`` files
    add included (a virtual environment may reach its packages through one)."""
    found = {
        Path(p).resolve()
        for p in sys.path
        if os.path.isabs(p)
        and os.path.isdir(p)
        and Path(p).name in ("site-packages", "dist-packages")
    }
    return sorted(found)


def python_trees() -> list[Path]:
    """:func:`interpreter_trees` and :func:`site_dirs`, none inside another."""
    trees = sorted({*interpreter_trees(), *site_dirs()})
    return [t for t in trees if not any(o != t and o in t.parents for o in trees)]


PRIVATE_TMP_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
#: the setup shell keeps directories open on these numbers (above the pipes at 3, 4, 5, ... and
#: the high numbers :func:`_place_fds` moves them through)
WORKDIR_FD = 200
#: the sandbox's setup shell: bash, whose redirections take fd numbers above 9 (dash's do not)
SHELL = shutil.which("bash") or "/bin/bash"
#: kernel and device file systems are left as they are (their writes need privileges the
#: command does not have, and ``/dev/null`` must stay writable)
KERNEL_MOUNTS = ("/proc", "/sys", "/dev")
DROP_CAPS = ["setpriv", "--bounding-set", "-all", "--inh-caps", "-all", "--no-new-privs", "--"]


def _unescape_mountinfo(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def host_mount_points() -> list[str]:
    """The mount points this process sees, outside the kernel file systems."""
    points = []
    with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
        for line in f:
            point = _unescape_mountinfo(line.split()[4])
            kernel = any(point == k or point.startswith(k + "/") for k in KERNEL_MOUNTS)
            if not kernel and point not in points:
                points.append(point)
    return points


def _readonly_lines() -> list[str]:
    """Shell that makes every host mount read-only in this mount namespace (a remount that the
    kernel refuses, such as an already read-only locked one, is left as it is)."""
    return [
        f"mount -o remount,bind,ro {shlex.quote(point)} 2>/dev/null || true"
        for point in host_mount_points()
    ]


def _interpreter_trees_under(directories: tuple[str, ...]) -> list[tuple[int, Path]]:
    """Interpreter trees and site directories inside ``directories``, each with a free shell fd
    (WORKDIR_FD + 1, ...)."""
    roots = [Path(d).resolve() for d in directories if os.path.isdir(d)]
    under = [t for t in python_trees() if any(t == r or r in t.parents for r in roots)]
    return [(WORKDIR_FD + 1 + k, tree) for k, tree in enumerate(under[:20])]


def _root_setup_script(workdir: Path, uid: int, writable: Path | None, scratch_bytes: int) -> str:
    """Shell run as root inside the mount namespace, then ``exec``s the command unprivileged."""
    lines = ["set -e"]
    hidden: dict[Path, list[Path]] = {}
    for tree in python_trees():
        blocker = _blocking_ancestor(tree)
        if blocker is not None:
            hidden.setdefault(blocker, []).append(tree)
    staging = workdir / ".mnt"
    for k, tree in enumerate(t for trees in hidden.values() for t in trees):
        lines += [f"mkdir -p '{staging}/{k}'", f"mount --bind '{tree}' '{staging}/{k}'"]
    for blocker in hidden:
        lines.append(f"mount -t tmpfs -o mode=0755,size=1m tmpfs '{blocker}'")
    for k, tree in enumerate(t for trees in hidden.values() for t in trees):
        lines += [
            f"mkdir -p '{tree}'",
            f"mount --bind '{staging}/{k}' '{tree}'",
            f"mount -o remount,bind,ro '{tree}'",
        ]
    lines += _readonly_lines()
    lines += _private_scratch(workdir, uid, writable, scratch_bytes)
    lines.append(f'exec setpriv --reuid {uid} --regid {uid} --clear-groups --no-new-privs -- "$@"')
    return "\n".join(lines)


def _private_scratch(workdir: Path, uid: int, writable: Path | None, size: int) -> list[str]:
    """Every world-writable directory becomes a private, size-limited tmpfs (the work directory,
    often under /tmp, is kept through an open fd: ``mount`` must not canonicalise that path);
    the one directory the command may write is replaced by a size-limited tmpfs copy, so
    nothing it writes reaches the host's disk or outlives the run."""
    lines = [f"exec {WORKDIR_FD}< '{workdir}'"]
    # an interpreter (a virtual environment, say) that lives under one of those directories is
    # kept the same way, read-only: a checkout under /tmp must still find its python and pytest
    kept = _interpreter_trees_under(PRIVATE_TMP_DIRS)
    lines += [f"exec {fd}< '{tree}'" for fd, tree in kept]
    for directory in PRIVATE_TMP_DIRS:
        if os.path.isdir(directory):
            lines.append(f"mount -t tmpfs -o size={size},mode=1777 tmpfs '{directory}'")
    lines += [
        f"mkdir -p '{workdir}'",
        f"mount --no-canonicalize --bind /proc/self/fd/{WORKDIR_FD} '{workdir}'",
        f"exec {WORKDIR_FD}<&-",
    ]
    for fd, tree in kept:
        lines += [
            f"mkdir -p '{tree}'",
            f"mount --no-canonicalize --bind /proc/self/fd/{fd} '{tree}'",
            f"mount -o remount,bind,ro '{tree}'",
            f"exec {fd}<&-",
        ]
    if writable is not None:
        scratch = workdir / ".scratch"
        lines += [
            f"mount -t tmpfs -o size={size},mode=0700,uid={uid},gid={uid} tmpfs '{scratch}'",
            f"cp -a '{writable}/.' '{scratch}/'",
            f"mount --bind '{scratch}' '{writable}'",
        ]
    lines.append('cd "$(pwd)"')  # re-enter the cwd by path: through the new mounts
    return lines


def wrap(
    command: list[str],
    workdir: Path,
    uid: int,
    writable: Path | None = None,
    scratch_bytes: int = Limits.scratch_bytes,
) -> list[str]:
    if os.geteuid() == 0:
        script = _root_setup_script(workdir, uid, writable, scratch_bytes)
    else:  # root of its own user namespace (the caller's uid outside): may mount, keeps the uid
        script = "\n".join(
            [
                "set -e",
                *_readonly_lines(),
                *_private_scratch(workdir, 0, writable, scratch_bytes),
                f'exec {" ".join(DROP_CAPS)} "$@"',
            ]
        )
    return [*_unshare_prefix(), SHELL, "-c", script, "sandbox", *command]


def wrap_minimal(script: str, command: list[str]) -> list[str]:
    """``command`` in new namespaces, inside the root that ``script`` builds."""
    return [*_unshare_prefix(), SHELL, "-c", script, "sandbox", *command]


#: what a candidate's minimal root holds of the host, read-only (symbolic links are recreated)
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
DEVICES = ("null", "zero", "full", "random", "urandom")


def minimal_root_script(
    root: Path,
    home: Path,
    keep: list[Path],
    uid: int | None,
    scratch_bytes: int,
    hide: list[Path] | None = None,
) -> str:
    """Shell (run as root of the sandbox's namespaces) that builds a fresh root at ``root``: the
    system directories and ``keep`` (the interpreter, the candidate's stub) bound read-only,
    ``home`` (the candidate's files) as a private size-limited tmpfs copy, then ``chroot``s into
    it and ``exec``s the command without privileges (``uid``, or no capabilities without root).
    ``hide``: directories inside the kept trees covered by an empty read-only tmpfs (preflab's
    own package, when it is installed in the interpreter's site-packages)."""
    q = shlex.quote
    dev = root / "dev"
    inside = root / str(home).lstrip("/")
    binds: list[Path] = []
    links: list[str] = []
    for name in SYSTEM_DIRS:
        path = Path(name)
        if path.is_symlink():
            links.append(f"ln -s {q(os.readlink(path))} {q(str(root / name.lstrip('/')))}")
        elif path.is_dir():
            binds.append(path)
    system = [Path(d).resolve() for d in SYSTEM_DIRS if os.path.isdir(d)]
    binds += [
        tree
        for tree in sorted({p.resolve() for p in keep})
        if not any(tree == s or s in tree.parents for s in system)
    ]
    devices = [name for name in DEVICES if os.path.exists(f"/dev/{name}")]
    targets = [root / str(b).lstrip("/") for b in binds]
    # one mkdir and one touch for every mount point (each command is a fork and an exec)
    lines = [
        "set -e",
        f"mkdir -p {q(str(root))}",
        f"mount -t tmpfs -o mode=0755,size=4m tmpfs {q(str(root))}",
        "mkdir -p " + " ".join(q(str(d)) for d in [dev, root / "proc", root / "tmp"]),
        "touch " + " ".join(q(str(dev / name)) for name in devices),
        *[f"mount --bind /dev/{name} {q(str(dev / name))}" for name in devices],
        f"ln -s /proc/self/fd {q(str(dev / 'fd'))}",
        f"mount -t proc proc {q(str(root / 'proc'))}",
        f"mount -t tmpfs -o size={scratch_bytes},mode=1777 tmpfs {q(str(root / 'tmp'))}",
        *links,
        # after /tmp's tmpfs: a kept tree under /tmp (the stub, a venv) gets its point on it
        "mkdir -p " + " ".join(q(str(t)) for t in targets),
    ]
    for source, target in zip(binds, targets, strict=True):
        lines += [
            f"mount --rbind {q(str(source))} {q(str(target))}",
            f"mount -o remount,bind,ro {q(str(target))}",
        ]
    for hidden in hide or []:
        kept = [p.resolve() for p in [*keep, *map(Path, SYSTEM_DIRS)]]
        if hidden.is_dir() and any(hidden == k or k in hidden.parents for k in kept):
            lines.append(
                f"mount -t tmpfs -o ro,size=4k,mode=0555 tmpfs {q(str(root / str(hidden).lstrip('/')))}"
            )
    owner = f",uid={uid},gid={uid}" if uid is not None else ""
    lines += [
        f"mkdir -p {q(str(inside))}",
        f"mount -t tmpfs -o size={scratch_bytes},mode=0700{owner} tmpfs {q(str(inside))}",
        f"cp -a {q(str(home))}/. {q(str(inside))}/",
        f"mount -o remount,bind,ro {q(str(root))}",
    ]
    if uid is not None:
        drop = f"setpriv --reuid {uid} --regid {uid} --clear-groups --no-new-privs --"
    else:
        drop = " ".join(DROP_CAPS)
    chroot = shutil.which("chroot") or shutil.which("chroot", path="/usr/sbin:/sbin") or "chroot"
    lines.append(f'exec {q(chroot)} {q(str(root))} {drop} "$@"')
    return "\n".join(lines)


def _drain(fd: int, sink: bytearray, cap: int) -> None:
    """Read a pipe to EOF, keeping at most ``cap`` bytes (a flood cannot exhaust host memory)."""
    with os.fdopen(fd, "rb", buffering=0) as stream:
        while chunk := stream.read(65536):
            if len(sink) < cap:
                sink.extend(chunk[: cap - len(sink)])


def _processes_of(uid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    found.append(int(entry.name))
            except FileNotFoundError:
                continue
    return found


def spawn_sandboxed(
    wrapped: list[str],
    *,
    cwd: Path,
    limits: Limits,
    env: dict[str, str],
    fds: dict[int, int],
    log: Path,
) -> subprocess.Popen[bytes]:
    """Start an already wrapped command (``wrap`` or ``wrap_minimal``) with the host's pipes
    ``fds`` (``{number in the child: fd here}``) placed at the child's numbers, output to
    ``log``; the caller waits and calls :func:`stop`.

    The pipes travel at their own numbers (``pass_fds``; every other fd is closed) and the
    sandbox's shell moves them to their places first thing (:func:`_place_fds`): subprocess
    closes what ``pass_fds`` does not name *after* ``preexec_fn``, and refuses to keep a number
    that is not open yet, so the move cannot happen in ``preexec_fn``."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            _place_fds(wrapped, fds, limits.open_files),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=limits.apply,
            pass_fds=tuple(fds.values()),
            close_fds=True,
        )


def _place_fds(wrapped: list[str], fds: dict[int, int], open_files: int) -> list[str]:
    """``wrapped`` whose shell script first moves each pipe to its number (through a high
    number first, so a pipe already sitting at another's target is not overwritten) and sets
    the open-files limit just before its last line, the ``exec`` of the command."""
    at = wrapped.index("-c") + 1
    head, _, last = wrapped[at].rpartition("\n")
    script = f"{head}\nulimit -n {open_files}\n{last}"
    if not fds:
        return [*wrapped[:at], script, *wrapped[at + 1 :]]
    free = (n for n in range(10, WORKDIR_FD) if n not in fds.values() and n not in fds)
    high = {target: next(free) for target in sorted(fds)}
    lines = [f"exec {high[t]}<&{fds[t]} {fds[t]}<&-" for t in sorted(fds)]
    lines += [f"exec {t}<&{high[t]} {high[t]}<&-" for t in sorted(fds)]
    return [*wrapped[:at], "\n".join(lines) + "\n" + script, *wrapped[at + 1 :]]


def wait_or_kill(proc: subprocess.Popen[bytes], wall_s: float) -> bool:
    """Wait for ``proc``; at ``wall_s`` kill it (:func:`_kill_sandbox`). True when it was killed.

    A blocking ``wait`` with a timer, not ``Popen.wait(timeout=...)``: that one polls with
    sleeps of up to 50 ms, which every verification would pay after its command exited."""
    fired = threading.Event()
    backstops: list[threading.Timer] = []

    def kill() -> None:
        fired.set()
        backstops.append(_kill_sandbox(proc))

    timer = threading.Timer(wall_s, kill)
    timer.daemon = True
    timer.start()
    try:
        proc.wait()
    finally:
        timer.cancel()
        for backstop in backstops:
            backstop.cancel()
    return fired.is_set()


def _kill_sandbox(proc: subprocess.Popen[bytes]) -> threading.Timer:
    """SIGKILL the sandbox's PID namespace through its init (``unshare``'s child) while
    ``unshare`` lives to reap it, then, should ``unshare`` not be gone a second later, the whole
    process group (the returned timer: cancel it once the process is reaped). Killing ``unshare`` first leaves the namespace's init to the host's init to
    reap: measured here, 1.6 s before its processes and mounts were gone, against milliseconds."""
    for child in _children(proc.pid):
        _kill(child)

    def group() -> None:
        if proc.returncode is None:  # not reaped yet: the pid is still this process group's
            _kill_group(proc.pid)

    backstop = threading.Timer(1.0, group)
    backstop.daemon = True
    backstop.start()
    return backstop


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def stop(proc: subprocess.Popen[bytes], uid: int | None) -> list[int]:
    """Kill a sandboxed command (:func:`_kill_sandbox`), wait for it and, as root, reap whatever
    its uid still runs; the processes found then."""
    if proc.poll() is None:
        backstop = _kill_sandbox(proc)
        proc.wait()
        backstop.cancel()
    return _reap_uid(uid) if uid is not None and os.geteuid() == 0 else []


def run_sandboxed(
    command: list[str],
    *,
    workdir: Path,
    cwd: Path,
    limits: Limits,
    uid: int,
    env: dict[str, str],
    secret: bytes,
    writable: Path | None = None,
    channel_cap: int = 4 * 1024**2,
    extra_fds: dict[int, int] | None = None,
) -> SandboxRun:
    """Run ``command`` sandboxed. Two pipes go in: fd 3 (``secret``, read once by the host's
    runner) and fd 4 (the out-of-band result channel, drained here); ``extra_fds`` adds more
    (the host closes its copies once the command started). Output goes to a host file of which
    only a tail is kept for diagnostics; it is never parsed."""
    secret_r, secret_w = os.pipe()
    channel_r, channel_w = os.pipe()
    if os.geteuid() == 0:
        # pytest reopens the pipe as /dev/fd/4, which checks the pipe's owner (root, 0600)
        os.fchown(channel_w, uid, uid)
    os.write(secret_w, secret)
    os.close(secret_w)
    received = bytearray()
    if writable is not None:  # the scratch's mount point: the host tree is read-only inside
        (workdir / ".scratch").mkdir(exist_ok=True)
    log_path = workdir / "output.log"
    started = time.monotonic()
    fds = {3: secret_r, 4: channel_w, **(extra_fds or {})}
    proc = spawn_sandboxed(
        wrap(command, workdir, uid, writable, limits.scratch_bytes),
        cwd=cwd,
        limits=limits,
        env=env,
        fds=fds,
        log=log_path,
    )
    for fd in fds.values():
        os.close(fd)
    reader = threading.Thread(target=_drain, args=(channel_r, received, channel_cap), daemon=True)
    reader.start()
    timed_out = wait_or_kill(proc, limits.wall_s)
    # after a normal exit the kernel has already reaped the PID namespace; after a kill it
    # tears it down asynchronously, so survivors only count when nothing was killed
    survivors = stop(proc, uid)
    leftovers = [] if timed_out else survivors
    reader.join(timeout=5)
    tail = log_path.read_bytes()[-4000:].decode("utf-8", "replace")
    log_path.unlink()
    return SandboxRun(
        returncode=None if timed_out else proc.returncode,
        timed_out=timed_out,
        wall_s=time.monotonic() - started,
        channel=bytes(received),
        output_tail=tail,
        leftovers=leftovers,
    )


def _reap_uid(uid: int, grace_s: float = 10.0) -> list[int]:
    """SIGKILL every process of the sandbox uid until none is left; the first ones found."""
    first = _processes_of(uid)
    deadline = time.monotonic() + grace_s
    while (pids := _processes_of(uid)) and time.monotonic() < deadline:
        for pid in pids:
            _kill(pid)
        time.sleep(0.02)
    return first


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
