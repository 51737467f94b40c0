"""The disk the probe's managed environments take: their sizes, when each was last used, the
eviction of the least recently used ones above a limit (``[tool.driftcheck] probe-cache-gb``,
default 40), and files shared between them.

An environment in use is never evicted: a probe marks the one it runs in (a file named after
its process under ``.in-use/``, ignored once that process is gone), and one being built holds its
cache lock. Sizes count each file once however many environments link it (:func:`share_files`
hard-links the files that are byte-identical in another environment at the same path, e.g. the
CUDA libraries two torch releases both pin), and an eviction frees what only that environment
holds.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from driftcheck.cache import IN_USE, cache_root, entry_in_use

DEFAULT_LIMIT_GB = 40.0
#: Room kept free for an environment about to be built (they take 6-8 GB).
NEW_ENV_BYTES = 8 * 10**9
#: Files smaller than this are not worth a link (most of an environment's bytes are large files).
SHARE_MIN_BYTES = 256 * 1024
_LAST_USED = ".last-used"

Progress = Callable[[str], None]


@dataclass
class CachedEnv:
    """One managed environment on disk."""

    root: Path
    #: Bytes of its files, each counted once.
    bytes: int
    #: Bytes that only this environment holds (what evicting it frees).
    own_bytes: int
    last_used: float


def envs_dir() -> Path:
    """Where the managed environments live."""
    return cache_root() / "envs"


def managed_dirs() -> list[Path]:
    """The managed vLLM environments in the cache (not the witnesses' environments)."""
    base = envs_dir()
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if p.is_dir() and p.name.startswith("vllm-"))


def limit_bytes(client: str | None = None) -> int:
    """The size limit: ``probe-cache-gb`` of the client's (a directory client) or the current
    directory's ``pyproject.toml``, else :data:`DEFAULT_LIMIT_GB`."""
    from driftcheck.config import config_for, find_pyproject, load_config

    gb: float | None = None
    with contextlib.suppress(Exception):  # a client spec that is no folder has no settings
        gb = config_for(client).probe_cache_gb if client else None
    if gb is None:
        found = find_pyproject(Path.cwd())
        if found is not None:
            gb = load_config(found).probe_cache_gb
    return int((gb or DEFAULT_LIMIT_GB) * 10**9)


def folder_bytes(root: Path) -> int:
    """The size of a folder's files (a file linked twice inside it counted twice)."""
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


def touch(root: Path) -> None:
    """Record that the environment was used now."""
    with contextlib.suppress(OSError):
        (root / _LAST_USED).write_text(f"{time.time():.0f}\n")


def last_used(root: Path) -> float:
    """When the environment was last used (its build when never since)."""
    for name in (_LAST_USED, "env.json"):
        with contextlib.suppress(OSError):
            return (root / name).stat().st_mtime
    return 0.0


@contextlib.contextmanager
def in_use(root: Path | None) -> Iterator[None]:
    """Mark ``root`` as in use by this process while the block runs (and touch it)."""
    if root is None:
        yield
        return
    path = root / IN_USE / str(os.getpid())
    marker: Path | None = path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    except OSError:
        marker = None
    touch(root)
    try:
        yield
    finally:
        if marker is not None:
            with contextlib.suppress(OSError):
                marker.unlink()


def busy(root: Path) -> bool:
    """True when a live process marked the environment in use, or its build lock is held."""
    return entry_in_use(root) is not None


def disk_usage(roots: list[Path]) -> tuple[list[CachedEnv], int]:
    """Each environment's size and the bytes all of them take, a file linked from several
    environments counted once."""
    seen: dict[tuple[int, int], tuple[int, set[Path]]] = {}
    per_root: dict[Path, set[tuple[int, int]]] = {r: set() for r in roots}
    for root in roots:
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                try:
                    st = os.lstat(os.path.join(dirpath, name))
                except OSError:
                    continue
                key = (st.st_dev, st.st_ino)
                size, where = seen.setdefault(key, (st.st_size, set()))
                where.add(root)
                per_root[root].add(key)
    out = []
    for root in roots:
        keys = per_root[root]
        total = sum(seen[k][0] for k in keys)
        own = sum(seen[k][0] for k in keys if seen[k][1] == {root})
        out.append(CachedEnv(root, total, own, last_used(root)))
    return out, sum(size for size, _where in seen.values())


def evict(
    limit: int,
    *,
    keep: tuple[Path, ...] = (),
    room: int = 0,
    progress: Progress | None = None,
) -> list[tuple[Path, int]]:
    """Remove least recently used environments until they take at most ``limit - room``
    bytes; never one in ``keep``, in use or being built. Returns (root, bytes freed)."""
    say = progress or (lambda _m: None)
    envs, used = disk_usage(managed_dirs())
    removed: list[tuple[Path, int]] = []
    keep_set = {k.resolve() for k in keep}
    for env in sorted(envs, key=lambda e: e.last_used):
        if used + room <= limit:
            break
        if env.root.resolve() in keep_set or busy(env.root):
            continue
        age = (time.time() - env.last_used) / 3600
        say(
            f"evicting {env.root.name} ({env.own_bytes / 1e9:.1f} GB, last used {age:.1f} h "
            f"ago): the probe environments take {used / 1e9:.1f} GB, the limit is "
            f"{limit / 1e9:.0f} GB (probe-cache-gb)"
        )
        shutil.rmtree(env.root, ignore_errors=True)
        with contextlib.suppress(OSError):
            Path(str(env.root) + ".lock").unlink()
        used -= env.own_bytes
        removed.append((env.root, env.own_bytes))
    if used + room > limit:
        say(
            f"the probe environments take {used / 1e9:.1f} GB (limit {limit / 1e9:.0f} GB): "
            "none left to evict (the others are in use)"
        )
    return removed


def share_files(root: Path, others: list[Path], *, progress: Progress | None = None) -> int:
    """Hard-link each file of ``root`` that is byte-identical to the file at the same path in
    one of ``others`` (same size, same SHA-256). Returns the bytes saved."""
    say = progress or (lambda _m: None)
    t0 = time.monotonic()
    saved = 0
    for dirpath, _dirs, files in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir.split(os.sep, 1)[0] == "bin":
            continue  # scripts name their own interpreter
        for name in files:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if st.st_size < SHARE_MIN_BYTES or st.st_nlink > 1 or not os.path.isfile(path):
                continue
            for other in others:
                twin = os.path.join(other, rel_dir, name)
                try:
                    ot = os.lstat(twin)
                except OSError:
                    continue
                if ot.st_size != st.st_size or ot.st_dev != st.st_dev or os.path.islink(twin):
                    continue
                if _digest(twin) != _digest(path):
                    continue
                tmp = f"{path}.driftcheck-link"
                try:
                    os.link(twin, tmp)
                    os.replace(tmp, path)
                except OSError:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp)
                    continue
                saved += st.st_size
                break
    if saved:
        say(
            f"shared {saved / 1e9:.2f} GB of identical files with the other environments "
            f"(hard links, {time.monotonic() - t0:.0f} s)"
        )
    return saved


def _digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


if __name__ == "__main__":  # python -m driftcheck.envs.disk [share]: sizes (and links)
    import sys

    dirs = managed_dirs()
    if sys.argv[1:] == ["share"]:
        for i, d in enumerate(dirs):
            share_files(d, dirs[:i], progress=print)
    envs, used = disk_usage(dirs)
    for e in envs:
        print(f"{e.root.name}: {e.bytes / 1e9:.2f} GB, {e.own_bytes / 1e9:.2f} GB its own")
    print(f"total {used / 1e9:.2f} GB")
