"""When each release of a package was published, and its files, from the package index.

pip lists versions but not dates, so the index pip is configured with (``pip config list``:
``index-url`` and ``extra-index-url``; else pip's own default, read from pip) is asked for its
JSON project page (PEP 691), whose files carry ``upload-time`` (PEP 700); a release's time is
its first file's; the file names say which Pythons a release has wheels for. Indexes without JSON or times (a local folder of wheels) are skipped. Answers
are cached like the release list (:mod:`driftcheck.sources.versions`): an hour, and offline a
cached answer of any age.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from driftcheck.cache import cache_root
from driftcheck.sources.versions import TTL_SECONDS

JSON_PAGE = "application/vnd.pypi.simple.v1+json"
TIMEOUT = 10  # a small page; a network that drops packets costs no more than this
_INDEX_KEYS = re.compile(r"^(?:[^.]*)\.(index-url|extra-index-url|no-index)='(.*)'$")


def index_urls() -> list[str]:
    """The simple-API roots pip would read, main index first (pip's configuration and
    environment, as ``pip config list`` shows them; pip's default when none is set)."""
    main: list[str] = []
    extra: list[str] = []
    proc = _pip("config", "list")
    for line in proc.splitlines():
        m = _INDEX_KEYS.match(line.strip())
        if m and m.group(1) == "no-index":
            if m.group(2).lower() in ("1", "true", "yes", "on"):
                return []  # pip reads no index: neither does this
        elif m:
            (main if m.group(1) == "index-url" else extra).extend(m.group(2).split())
    if not main:
        default = _python("from pip._internal.models.index import PyPI; print(PyPI.simple_url)")
        main = [default.strip()] if default.strip() else []
    out: list[str] = []
    for url in [*main, *extra]:
        if url.startswith(("https://", "http://")) and url not in out:
            out.append(url.rstrip("/"))
    return out


def _pip(*args: str) -> str:
    return _python(None, "-m", "pip", *args, "--disable-pip-version-check")


def _python(code: str | None, *args: str) -> str:
    argv = [sys.executable, *(("-c", code) if code is not None else ()), *args]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout if proc.returncode == 0 else ""


def file_version(filename: str) -> str | None:
    """The version a wheel's or sdist's file name carries (None for other files)."""
    try:
        if filename.endswith(".whl"):
            return str(parse_wheel_filename(filename)[1])
        return str(parse_sdist_filename(filename)[1])
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None


def times_from_page(page: dict) -> dict[str, float]:
    """Release → first upload (a POSIX time) from a PEP 691 project page; yanked files and
    files without ``upload-time`` are left out."""
    out: dict[str, float] = {}
    for f in page.get("files") or []:
        if not isinstance(f, dict) or f.get("yanked") or not f.get("upload-time"):
            continue
        version = file_version(str(f.get("filename", "")))
        if version is None:
            continue
        try:
            when = datetime.fromisoformat(str(f["upload-time"]).replace("Z", "+00:00"))
        except ValueError:
            continue
        stamp = when.timestamp()
        out[version] = min(stamp, out.get(version, stamp))
    return out


def _page(root: str, name: str) -> dict | None:
    req = urllib.request.Request(f"{root}/{name}/", headers={"Accept": JSON_PAGE})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:
            if JSON_PAGE not in resp.headers.get("Content-Type", ""):
                return None
            page = json.loads(resp.read())
    except (OSError, ValueError, urllib.error.URLError):
        return None
    return page if isinstance(page, dict) else None


def release_times(name: str) -> dict[str, float]:
    """Each release of ``name`` and when it was first published (empty when no index pip uses
    gives upload times, or none can be reached and nothing is cached)."""
    return dict(_project(name).get("releases", {}))


def published(name: str, version: str) -> float | None:
    """When ``name==version`` was first published (None when the index does not say)."""
    want = _normal(version)
    return next((t for v, t in release_times(name).items() if _normal(v) == want), None)


def release_files(name: str, version: str) -> list[str] | None:
    """The file names the index holds for ``name==version`` (not yanked), or None when no
    index pip uses says (no JSON page, none reachable)."""
    files = _project(name).get("files")
    if not isinstance(files, dict):
        return None
    want = _normal(version)
    return next((list(f) for v, f in files.items() if _normal(v) == want), [])


def _normal(version: str) -> str:
    try:
        return str(Version(version))
    except InvalidVersion:
        return version


def _project(name: str) -> dict:
    """The project's releases (first upload time) and files, from the index or the cache."""
    key = canonicalize_name(name)
    path = cache_root() / "index" / f"{key}.times.json"
    cached: dict | None = None
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        cached = None
    if isinstance(cached, dict) and time.time() - cached.get("time", 0) < TTL_SECONDS:
        return cached
    found: dict[str, float] = {}
    files: dict[str, list[str]] = {}
    for root in index_urls():
        page = _page(root, key)
        if page is None:
            continue
        for v, t in times_from_page(page).items():
            found[v] = min(t, found.get(v, t))
        for f in page.get("files") or []:
            version = file_version(str(f.get("filename", ""))) if isinstance(f, dict) else None
            if version is not None and not f.get("yanked"):
                files.setdefault(version, []).append(str(f["filename"]))
    if not found and not files:
        return cached if isinstance(cached, dict) else {}
    answer = {"time": time.time(), "releases": found, "files": files}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(answer))
    except OSError:
        pass
    return answer


def newest_before(times: dict[str, float], moment: float) -> str | None:
    """The highest final release published before ``moment`` (a later bug-fix release of an
    older line does not hide a newer line already out)."""
    best: Version | None = None
    chosen: str | None = None
    for v, t in times.items():
        try:
            parsed = Version(v)
        except InvalidVersion:
            continue
        if t < moment and not parsed.is_prerelease and not parsed.is_devrelease:
            if best is None or parsed > best:
                best, chosen = parsed, v
    return chosen


def day(moment: float) -> str:
    """A publication time as a date (UTC)."""
    return time.strftime("%Y-%m-%d", time.gmtime(moment))


__all__ = [
    "day",
    "file_version",
    "index_urls",
    "newest_before",
    "published",
    "release_files",
    "release_times",
]
