"""The user cache: fetched archives, host API snapshots, environments, with cross-process locks.

The cache folder is driftcheck's own: a ``CACHEDIR.TAG`` (the cache-directory tagging standard,
so backup tools skip it) that names driftcheck marks it when driftcheck creates it. A folder
made before the marker existed is adopted when it is empty or holds only driftcheck's kinds;
any other folder (a project, ``~/.cache``, ``/``) is never marked, and ``cache list`` and
``cache clear`` refuse it. Inside a marked folder they touch only the kinds of :data:`KINDS`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from filelock import FileLock, Timeout
from packaging.utils import canonicalize_name
from platformdirs import user_cache_dir

from driftcheck.errors import SourceError, UsageError

#: What the cache holds, top-level folder → (depth of its entries, what they are).
KINDS: dict[str, tuple[int, str]] = {
    "archives": (2, "release archives (archives/<name>/<version>)"),
    "snapshots": (1, "host API snapshots, one folder per host"),
    "uses": (1, "client analyses"),
    "findings": (1, "check runs"),
    "index": (1, "release lists of the package index"),
    "envs": (1, "probe and witness environments"),
    "models": (1, "the probe's built-in tiny models"),
    "probe-logs": (1, "the probe's logs"),
    "probe-states": (1, "the probe's saved states (tensor parallel)"),
    "witness": (1, "witness results"),
}
#: Kinds whose files one version of driftcheck's code writes for itself alone: their names end
#: in ``-<code digest>.pickle`` (a host's visited modules, a client's analysis, a check run), so
#: those of other code (an upgrade, another checkout) are never read again.
CODE_KEYED = ("findings", "snapshots", "uses")
MARKER = "CACHEDIR.TAG"
_MARKER_TEXT = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by driftcheck.\n"
    "# `driftcheck cache clear` removes only driftcheck's own entries beside it.\n"
)
_OURS = "created by driftcheck"
#: A process using an entry marks it with a file named after its pid in this folder.
IN_USE = ".in-use"
_CHECKED: set[str] = set()


def cache_root() -> Path:
    """The cache folder: ``$DRIFTCHECK_CACHE_DIR`` or the platform's user cache (created and
    marked as driftcheck's when new, adopted when it holds only driftcheck's kinds).

    Raises:
        SourceError: When the folder cannot be created.
    """
    root = Path(os.environ.get("DRIFTCHECK_CACHE_DIR") or user_cache_dir("driftcheck"))
    root = root.expanduser()
    _mkdir(root)
    key = str(root)
    if key not in _CHECKED:
        _CHECKED.add(key)
        if not (root / MARKER).exists() and not _strangers(root):
            with contextlib.suppress(OSError):  # a read-only cache stays usable unmarked
                (root / MARKER).write_text(_MARKER_TEXT)
    return root


def is_marked(root: Path) -> bool:
    """True when ``root`` carries driftcheck's marker."""
    try:
        return _OURS in (root / MARKER).read_text(errors="replace")
    except OSError:
        return False


def is_ours(root: Path) -> bool:
    """True when ``root`` is driftcheck's: marked, or (a read-only cache made before markers,
    which cannot be marked) unmarked and holding only driftcheck's kinds."""
    return is_marked(root) or (not (root / MARKER).exists() and not _strangers(root))


def _strangers(root: Path) -> list[str]:
    """Top-level entries of ``root`` that are not driftcheck's (nor its marker)."""
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    ours = is_marked(root)
    return [
        n for n in names if not (n == MARKER and ours) and not (n in KINDS and (root / n).is_dir())
    ]


def own_root() -> Path:
    """The cache folder, only when it is driftcheck's (for commands that list or remove).

    Raises:
        UsageError: A folder driftcheck did not make (a project, ``~/.cache``, ``/``).
    """
    root = cache_root()
    if not is_ours(root):
        strangers = _strangers(root)
        shown = ", ".join(strangers[:3]) + (
            f" and {len(strangers) - 3} more" if strangers[3:] else ""
        )
        raise UsageError(
            f"{root} is not a driftcheck cache folder (no marker {MARKER} of driftcheck's, and it "
            f"holds {shown or 'a foreign marker'}): nothing listed or removed; point "
            "DRIFTCHECK_CACHE_DIR at a folder of driftcheck's own"
        )
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
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            raise disk_full(folder) from None
        reason = getattr(exc, "strerror", None) or str(exc)
        raise SourceError(
            f"cannot create the cache folder {folder}: {reason} "
            "(set DRIFTCHECK_CACHE_DIR to a writable folder)"
        ) from None


def disk_full(where: Path | str) -> SourceError:
    """The one line for a full disk (ENOSPC), said at once: nothing retries into it."""
    return SourceError(
        f"no space left on {where} (free some space, or set DRIFTCHECK_CACHE_DIR to a folder "
        "on another disk)"
    )


_NO_SPACE = re.compile(r"No space left on device(?::\s*'([^']+)')?")


def pip_disk_full(output: str, where: Path) -> SourceError | None:
    """The full-disk error when pip's output says ENOSPC (at the nearest folder of the file it
    names that still exists, else ``where``), or None."""
    m = _NO_SPACE.search(output)
    if m is None:
        return None
    named = Path(m.group(1)) if m.group(1) else where
    while not named.is_dir() and named != named.parent:
        named = named.parent
    return disk_full(named)


@contextmanager
def locked(folder: Path, timeout: float = 900) -> Iterator[None]:
    """Hold an exclusive lock on a cache folder (shared by every driftcheck process)."""
    lock = FileLock(str(folder) + ".lock")
    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        raise SourceError(f"cache entry {folder} is locked by another process") from None
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise disk_full(folder.parent) from None
        raise SourceError(
            f"cannot lock the cache entry {folder}: {exc.strerror or exc} "
            "(set DRIFTCHECK_CACHE_DIR to a writable folder)"
        ) from None
    try:
        yield
    finally:
        lock.release()


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


def cache_entries(kinds: list[str] | None = None) -> list[CacheEntry]:
    """Every entry of driftcheck's kinds (``archives/vllm/0.16.0``, ``snapshots/vllm``, …), or
    of the given ones; lock files are not entries, nor is anything else in the folder.

    Raises:
        UsageError: The folder is not driftcheck's.
    """
    root = own_root()
    out: list[CacheEntry] = []
    for kind in sorted(kinds or KINDS):
        kind_dir = root / kind
        if not kind_dir.is_dir():
            continue
        for path in _entries(kind_dir, KINDS[kind][0]):
            name = path.relative_to(kind_dir).as_posix()
            out.append(CacheEntry(kind, name, path, _size(path)))
    return out


def code_suffix() -> str:
    """The end of the name of a file only this code reads (see :data:`CODE_KEYED`)."""
    return f"-{code_digest()}.pickle"


def stale_entries(kinds: list[str] | None = None) -> list[CacheEntry]:
    """The files of the code-keyed kinds (or of those of ``kinds`` that are) that other
    driftcheck code made: no scan by this code reads them again.

    Raises:
        UsageError: The folder is not driftcheck's.
    """
    root = own_root()
    mine = code_suffix()
    out: list[CacheEntry] = []
    for kind in CODE_KEYED:
        folder = root / kind
        if (kinds and kind not in kinds) or not folder.is_dir():
            continue
        for dirpath, _dirs, files in os.walk(folder):
            for name in files:
                if name.endswith(".pickle") and not name.endswith(mine):
                    path = Path(dirpath) / name
                    out.append(
                        CacheEntry(kind, path.relative_to(folder).as_posix(), path, _size(path))
                    )
    return sorted(out, key=lambda e: (e.kind, e.name))


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
        try:
            return path.lstat().st_size
        except OSError:
            return 0
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue
    return total


def entry_in_use(path: Path) -> str | None:
    """Why ``path`` is in use (a live process marked it, or holds its lock), or None."""
    marks = path / IN_USE
    for mark in sorted(marks.iterdir()) if marks.is_dir() else []:
        try:
            os.kill(int(mark.name), 0)
        except (ValueError, ProcessLookupError):
            continue
        except PermissionError:
            pass  # alive, someone else's
        return f"in use by process {mark.name}"
    inner = sorted(path.glob("*.lock")) if path.is_dir() and not path.is_symlink() else []
    for lock_path in [Path(str(path) + ".lock"), *inner]:
        if lock_path.exists() and _held(lock_path):
            return "in use: a driftcheck process holds its lock"
    return None


def _held(lock_path: Path) -> bool:
    lock = FileLock(str(lock_path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return True
    except OSError:
        return False
    lock.release()
    return False


@dataclass
class Cleared:
    """What ``cache clear`` did: the bytes really freed, and the entries left with why."""

    freed: int = 0
    left: list[tuple[str, str]] = field(default_factory=list)


def clear_cache(kinds: list[str] | None = None, stale: bool = False) -> Cleared:
    """Remove every entry of driftcheck's kinds, or of the given ones (with ``stale``, only the
    files other driftcheck code made: :func:`stale_entries`); an entry in use (its lock held, a
    live probe's mark) stays, as does one the file system refuses to remove.

    Raises:
        UsageError: The folder is not driftcheck's, or a kind the cache does not have (with
            ``stale``, one that is not keyed by driftcheck's code).
    """
    root = own_root()
    if kinds:
        known = sorted(k for k in KINDS if (root / k).is_dir())
        for kind in kinds:
            if kind not in known:
                have = ", ".join(known) or "nothing cached"
                raise UsageError(f"no cache kind {kind!r} (the cache has: {have})")
            if stale and kind not in CODE_KEYED:
                raise UsageError(
                    f"--stale takes only the kinds keyed by driftcheck's code "
                    f"({', '.join(CODE_KEYED)}); {kind!r} is not"
                )
    done = Cleared()
    entries = stale_entries(kinds) if stale else cache_entries(list(kinds) if kinds else None)
    for entry in entries:
        label = f"{entry.kind}/{entry.name}"
        busy = entry_in_use(entry.path)
        if busy:
            done.left.append((label, busy))
            continue
        problem = _remove(entry.path)
        gone = entry.size - (_size(entry.path) if os.path.lexists(entry.path) else 0)
        done.freed += max(gone, 0)
        if problem:
            done.left.append((label, problem))
    for kind in kinds or list(CODE_KEYED if stale else KINDS):
        if (root / kind).is_dir():
            _tidy(root / kind)
    return done


def _remove(path: Path) -> str | None:
    """Remove a file or folder; the first reason it could not be, or None."""
    problems: list[str] = []

    def failed(_func: object, _path: str, exc: object) -> None:
        err = exc[1] if isinstance(exc, tuple) else exc  # onerror passes exc_info
        problems.append(getattr(err, "strerror", None) or str(err))

    try:
        if path.is_dir() and not path.is_symlink():
            if sys.version_info >= (3, 12):
                shutil.rmtree(path, onexc=failed)
            else:
                shutil.rmtree(path, onerror=failed)
        else:
            path.unlink()
    except OSError as exc:
        problems.append(exc.strerror or str(exc))
    return problems[0] if problems else None


def _tidy(folder: Path) -> None:
    """Remove what removed entries leave in a kind's folder: their free lock files and empty
    folders (never a lock someone holds: a fetch in progress starts with an empty folder)."""
    for dirpath, dirnames, filenames in os.walk(folder, topdown=False):
        here = Path(dirpath)
        for name in filenames:
            lock = here / name
            entry = Path(str(lock)[: -len(".lock")])
            if name.endswith(".lock") and not os.path.lexists(entry) and not _held(lock):
                with contextlib.suppress(OSError):
                    lock.unlink()
        for name in dirnames:
            sub = here / name
            if not os.path.lexists(str(sub) + ".lock") or not _held(Path(str(sub) + ".lock")):
                with contextlib.suppress(OSError):
                    sub.rmdir()  # only when empty
    with contextlib.suppress(OSError):
        folder.rmdir()


def code_digest() -> str:
    """Digest of driftcheck's own sources and the Python running them: cached analyses are only
    valid for the same code read by the same parser (``ast`` differs between versions)."""
    global _CODE_DIGEST
    if _CODE_DIGEST is None:
        import hashlib

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
