"""SHA-256 digests of a harness: every file under a directory, plus pytest's own code."""

from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def tree_digests(root: Path, *, skip: tuple[Path, ...] = ()) -> dict[str, str]:
    """``relative path -> sha256`` of every file under ``root`` (links recorded by target, so
    swapping a file for a link is a change), ``skip`` subtrees left out."""
    out = {}
    for path in sorted(root.rglob("*")):
        if any(path == s or s in path.parents for s in skip):
            continue
        key = str(path.relative_to(root))
        if path.is_symlink():
            out[key] = "symlink:" + str(path.readlink())
        elif path.is_file():
            out[key] = sha256_file(path)
    return out


#: ``path -> (stat key, digest)`` for files that are hashed on every run (pytest's own code)
_CACHE: dict[str, tuple[tuple[int, ...], str]] = {}


def sha256_cached(path: Path) -> str:
    """:func:`sha256_file`, hashed again only when the file's stat changed. The key holds the
    inode change time, which the kernel sets on every write, chmod or rename and which no
    unprivileged process can set back."""
    st = path.stat()
    key = (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    hit = _CACHE.get(str(path))
    if hit is not None and hit[0] == key:
        return hit[1]
    digest = sha256_file(path)
    _CACHE[str(path)] = (key, digest)
    return digest


def pytest_entry_digests() -> dict[str, str]:
    """pytest's entry points and the plugin code that decides outcomes (``pytest``, ``_pytest``,
    ``pluggy``): a candidate that could write to site-packages could rewrite them."""
    import _pytest
    import pluggy
    import pytest

    out = {}
    for package in (pytest, _pytest, pluggy):
        root = Path(str(package.__file__)).parent
        for path in sorted(root.rglob("*.py")):
            key = f"{package.__name__}/{path.relative_to(root)}"
            out[key] = (
                "symlink:" + str(path.readlink()) if path.is_symlink() else sha256_cached(path)
            )
    return out


def diff(before: dict[str, str], after: dict[str, str]) -> list[str]:
    changes = [f"changed {k}" for k in before if k in after and before[k] != after[k]]
    changes += [f"deleted {k}" for k in before if k not in after]
    changes += [f"added {k}" for k in after if k not in before]
    return sorted(changes)
