"""The user cache: fetched archives and host API snapshots, with cross-process locks."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout
from packaging.utils import canonicalize_name
from platformdirs import user_cache_dir

from driftcheck.errors import SourceError


def cache_root() -> Path:
    """The cache folder: ``$DRIFTCHECK_CACHE_DIR`` or the platform's user cache."""
    root = Path(os.environ.get("DRIFTCHECK_CACHE_DIR") or user_cache_dir("driftcheck"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def archive_dir(name: str, version: str) -> Path:
    """Where the archive of one release is kept."""
    folder = cache_root() / "archives" / canonicalize_name(name) / version
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextmanager
def locked(folder: Path, timeout: float = 900) -> Iterator[None]:
    """Hold an exclusive lock on a cache folder (shared by every driftcheck process)."""
    lock = FileLock(str(folder) + ".lock")
    try:
        with lock.acquire(timeout=timeout):
            yield
    except Timeout:
        raise SourceError(f"cache entry {folder} is locked by another process") from None


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
