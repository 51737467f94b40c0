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
