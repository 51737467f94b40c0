"""The user cache: fetched archives and host API snapshots, with cross-process locks."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout
from packaging.utils import canonicalize_name
from platformdirs import user_cache_dir

from driftcheck.errors import SourceError


def cache_root() -> Path:
    """The cache folder: ``$DRIFTCHECK_CACHE_DIR`` or the platform's user cache.

    Raises:
        SourceError: When the folder cannot be created.
    """
    root = Path(os.environ.get("DRIFTCHECK_CACHE_DIR") or user_cache_dir("driftcheck"))
    root = root.expanduser()
    _mkdir(root)
    return root


def archive_dir(name: str, version: str) -> Path:
    """Where the archive of one release is kept."""
    folder = cache_root() / "archives" / canonicalize_name(name) / version
    _mkdir(folder)
    return folder


def _mkdir(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise SourceError(
            f"cannot create the cache folder {folder}: {reason} "
            "(set DRIFTCHECK_CACHE_DIR to a writable folder)"
        ) from None


@contextmanager
def locked(folder: Path, timeout: float = 900) -> Iterator[None]:
    """Hold an exclusive lock on a cache folder (shared by every driftcheck process)."""
    lock = FileLock(str(folder) + ".lock")
    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        raise SourceError(f"cache entry {folder} is locked by another process") from None
    except OSError as exc:
        raise SourceError(
            f"cannot lock the cache entry {folder}: {exc.strerror or exc} "
            "(set DRIFTCHECK_CACHE_DIR to a writable folder)"
        ) from None
    try:
        yield
    finally:
        lock.release()


def clear_cache() -> int:
    """Remove every cache entry; returns the number of bytes freed."""
    root = cache_root()
    freed = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    for child in root.iterdir():
        if child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
    return freed


@dataclass(frozen=True)
class CacheEntry:
    """One cached item: a release archive, a host API snapshot, a managed environment, …"""

    kind: str
    """Top-level cache folder: ``archives``, ``envs``, ``index``, …"""
    name: str
    """Path under that folder, e.g. ``vllm/0.16.0``."""
    path: Path
    size: int
    """Bytes on disk."""


#: Kinds whose entries sit two levels down (``archives/<name>/<version>``); others, one level.
_TWO_LEVELS = {"archives"}


def cache_entries() -> list[CacheEntry]:
    """Every entry of the cache, by kind (``archives/vllm/0.16.0``, ``snapshots/vllm``, …);
    lock files are not entries."""
    out: list[CacheEntry] = []
    root = cache_root()
    for kind_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        depth = 2 if kind_dir.name in _TWO_LEVELS else 1
        for path in _entries(kind_dir, depth):
            name = path.relative_to(kind_dir).as_posix()
            out.append(CacheEntry(kind_dir.name, name, path, _size(path)))
    return out


def _entries(folder: Path, depth: int) -> list[Path]:
    out: list[Path] = []
    for child in sorted(folder.iterdir()):
        if child.name.endswith(".lock"):
            continue
        if child.is_dir() and not child.is_symlink():
            if depth > 1:
                out.extend(_entries(child, depth - 1))
            elif any(child.iterdir()):  # an empty folder (an abandoned fetch) holds nothing
                out.append(child)
        else:
            out.append(child)
    return out


def _size(path: Path) -> int:
    if not path.is_dir() or path.is_symlink():
        return path.lstat().st_size
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue
    return total


def clear_kinds(kinds: list[str]) -> int:
    """Remove the entries of some kinds only (``archives``, ``envs``, …); bytes freed.

    Raises:
        UsageError: A kind the cache does not have.
    """
    from driftcheck.errors import UsageError

    root = cache_root()
    known = sorted(p.name for p in root.iterdir() if p.is_dir())
    for kind in kinds:
        if kind not in known:
            have = ", ".join(known) or "nothing cached"
            raise UsageError(f"no cache kind {kind!r} (the cache has: {have})")
    freed = 0
    for kind in kinds:
        freed += _size(root / kind)
        shutil.rmtree(root / kind, ignore_errors=True)
    return freed


def code_digest() -> str:
    """Digest of driftcheck's own sources and the Python running them: cached analyses are only
    valid for the same code read by the same parser (``ast`` differs between versions)."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        import hashlib
        import sys

        h = hashlib.sha256(f"{sys.version_info[0]}.{sys.version_info[1]}".encode())
        root = Path(__file__).resolve().parent
        # The sources, and the data files beside them that shape the analysis (the OpenAI
        # SDK's table): a change to either is new code.
        for path in sorted([*root.rglob("*.py"), *root.rglob("*.toml")]):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
        _CODE_DIGEST = h.hexdigest()[:16]
    return _CODE_DIGEST


_CODE_DIGEST: str | None = None
