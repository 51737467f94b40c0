"""Releases fetched into the user cache, through pip.

A release is fetched with ``python -m pip download --no-deps`` (so the user's index configuration
applies), or only its sources through :mod:`driftcheck.sources.ranged` when the index allows ranged reads,
into the user cache; each cache entry records the archive's SHA-256, so a truncated or corrupt
file is discarded and fetched again. Kept apart from :mod:`driftcheck.sources.trees`, which only reads
source trees and never touches the network or the cache.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path

from packaging.version import InvalidVersion, Version

from driftcheck.cache import archive_dir, disk_full, locked, pip_disk_full
from driftcheck.errors import DriftcheckError, FetchError, SourceError
from driftcheck.sources.archives import ARCHIVE_ERRORS, safe_relpath, why
from driftcheck.sources.metadata import version_key

#: What a slim archive keeps (bump when that changes: older cache entries are fetched again).
#: Read on every cache hit, so it lives here, not in the ranged reader (imported on a miss).
SLIM_FORMAT = 2
_FROM_VERSIONS = re.compile(r"\(from versions: ([^)]*)\)")
_IGNORED_INDEX = re.compile(r"repository located at (\S+) is not a trusted or secure host")
_OFFLINE_MARKERS = (
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "nodename nor servname provided",
    "Network is unreachable",
    "No route to host",
    "Connection refused",
    "NewConnectionError",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "ProxyError",
)
_TLS_MARKERS = ("SSLError", "CERTIFICATE_VERIFY_FAILED", "SSLCertVerificationError")


#: pip's words for ENOSPC, with the file it was writing when it says which.
def cached_sha256(name: str, version: str) -> str | None:
    """The recorded SHA-256 of a cached release archive, without opening it (None if absent)."""
    try:
        folder = archive_dir(name, version)
        info = json.loads((folder / "entry.json").read_text())
        if (folder / info["file"]).is_file():
            return str(info["sha256"])
    except (OSError, ValueError, KeyError, TypeError, DriftcheckError):
        pass
    return None


def fetch_release(name: str, version: str, *, quiet: bool = True) -> Path:
    """Return the cached archive of ``name==version``, downloading it with pip if needed.

    The cache entry records the archive's SHA-256; an entry that no longer matches (a
    truncated or corrupt file) is discarded and fetched again.

    Raises:
        FetchError: Unknown package or version, no network, pip failed.
        SourceError: The cache folder cannot be used.
    """
    folder: Path | None = None
    try:
        folder = archive_dir(name, version)
        # A hit is read without the lock (entries are written whole, by rename): a read-only
        # cache (a CI cache mounted read-only) serves what it holds.
        cached = _valid_cached(folder)
        if cached is not None:
            return cached
        with locked(folder):
            cached = _valid_cached(folder)
            if cached is not None:
                return cached
            _clear_entry(folder)
            from driftcheck.sources.ranged import fetch_slim

            got_remote = fetch_slim(name, version, folder)
            if got_remote is not None and _opens(got_remote[0]):
                path, info = got_remote
                entry = {"file": path.name, "sha256": _sha256(path), **info}
                if info.get("mode") == "ranged":
                    entry["slim_format"] = SLIM_FORMAT
                _write_entry(folder, entry)
                return path
            _clear_entry(folder)
            # Download inside the entry's own folder: the final move is a same-disk rename.
            with tempfile.TemporaryDirectory(prefix=".download-", dir=folder) as tmp:
                _pip_download(name, version, Path(tmp), quiet=quiet)
                got = sorted(p for p in Path(tmp).iterdir() if p.is_file())
                if not got:
                    raise FetchError(f"pip downloaded nothing for {name}=={version}")
                target = folder / got[0].name
                os.replace(got[0], target)
            if not _opens(target):
                target.unlink(missing_ok=True)
                raise FetchError(f"the archive pip downloaded for {name}=={version} is corrupt")
            _write_entry(folder, {"file": target.name, "sha256": _sha256(target)})
            return target
    except DriftcheckError:
        raise
    except OSError as exc:
        where = exc.filename or folder or "the cache folder"
        if exc.errno == errno.ENOSPC:
            raise disk_full(folder or where) from None
        raise SourceError(
            f"cannot use the cache at {where}: {why(exc)} (set DRIFTCHECK_CACHE_DIR to "
            "a writable folder)"
        ) from None


def _clear_entry(folder: Path) -> None:
    """Remove whatever a previous, failed or damaged, fetch left in ``folder``."""
    for stale in folder.iterdir():
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            stale.unlink(missing_ok=True)


def _write_entry(folder: Path, info: dict) -> None:
    """Write ``entry.json`` atomically (a crash never leaves half a file)."""
    tmp = folder / "entry.json.part"
    tmp.write_text(json.dumps(info))
    os.replace(tmp, folder / "entry.json")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _valid_cached(folder: Path) -> Path | None:
    entry = folder / "entry.json"
    if not entry.exists():
        return None
    try:
        info = json.loads(entry.read_text())
        path = folder / info["file"]
        if (
            safe_relpath(info["file"]) == info["file"]
            and "/" not in info["file"]
            and path.is_file()
            and path.stat().st_size > 0
            and (info.get("mode") != "ranged" or info.get("slim_format") == SLIM_FORMAT)
            and _quick_check(path, info)
        ):
            return path
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return None


def _quick_check(path: Path, info: dict) -> bool:
    """Cheap integrity check: the archive opens; the digest is checked once per size/mtime."""
    st = path.stat()
    stamp = f"{st.st_size}:{st.st_mtime_ns}"
    if info.get("verified") != stamp:
        if _sha256(path) != info.get("sha256"):
            return False
        info["verified"] = stamp
        try:
            _write_entry(path.parent, info)
        except OSError:
            pass
    return _opens(path)


def _opens(path: Path) -> bool:
    """True when a zip's central directory reads (a truncated zip fails here)."""
    if not path.name.endswith((".whl", ".zip")):
        return True
    try:
        with zipfile.ZipFile(path) as zf:
            zf.infolist()
        return True
    except ARCHIVE_ERRORS:
        return False


#: Pythons whose wheels carry the same sources when a release has none for this one (when the
#: index does not say which it has): down to 3.6, the oldest many old releases still serve.
_OLDER_PYTHONS = [f"3.{m}" for m in range(sys.version_info.minor - 1, 5, -1)]
_LINUX = ("manylinux", "linux_x86_64")


def older_wheels(files: list[str] | None) -> list[tuple[str, str]]:
    """(Python version, platform) of the wheels among a release's ``files`` made for an older
    Python 3 than this one, newest Python first, one each (a Linux or pure wheel where there is
    one: its sources are the same on every platform). Without the file list, every older
    Python with a Linux wheel."""
    if files is None:
        return [(v, "manylinux2014_x86_64") for v in _OLDER_PYTHONS]
    from packaging.utils import InvalidWheelFilename, parse_wheel_filename

    best: dict[str, str] = {}
    for name in files:
        if not name.endswith(".whl"):
            continue
        try:
            tags = parse_wheel_filename(name)[3]
        except InvalidWheelFilename:
            continue
        for tag in tags:
            m = re.fullmatch(r"(?:cp|py)3(\d+)", tag.interpreter)
            if not m or not int(m.group(1)) < sys.version_info.minor:
                continue
            py = f"3.{m.group(1)}"
            linux = tag.platform == "any" or tag.platform.startswith(_LINUX)
            if py not in best or (linux and not best[py].startswith(_LINUX)):
                best[py] = tag.platform
    return [(py, best[py]) for py in sorted(best, key=lambda v: -int(v.split(".")[1]))]


def _release_files(name: str, version: str) -> list[str] | None:
    from driftcheck.sources.release_times import release_files

    try:
        return release_files(name, version)
    except DriftcheckError:
        return None


def _pip_download(name: str, version: str, dest: Path, *, quiet: bool) -> None:
    base = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check"]
    base += ["--retries", "1", "--timeout", "20", "--dest", str(dest)]
    anywhere = ["--only-binary=:all:", "--platform", "manylinux2014_x86_64", "--platform", "any"]
    attempts: list[list[str]] = [
        ["--only-binary=:all:"],
        # A release with no wheel for this machine: any platform's wheel has the same sources.
        anywhere,
    ]
    sdist = ["--no-binary=:all:", "--no-build-isolation"]
    # pip prepares an sdist's metadata even to download it: without ``wheel`` in this
    # environment an old setup.py cannot (``invalid command 'bdist_wheel'``); an isolated build
    # environment, which pip fills from the index, can.
    isolated = ["--no-binary=:all:"]
    listed: set[str] = set()
    any_listing = False
    not_listed = ""  # pip's output when the version was not among those it found
    other = ""  # pip's output for any other failure (a build error, a bad wheel)
    n = 0
    while n < len(attempts):
        extra = attempts[n]
        n += 1
        try:
            proc = subprocess.run(
                [*base, *extra, f"{name}=={version}"],
                capture_output=True,
                text=True,
                errors="replace",
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except OSError as exc:
            raise FetchError(f"cannot run pip ({sys.executable} -m pip): {why(exc)}") from None
        if proc.returncode == 0:
            return
        out = proc.stderr + proc.stdout
        full = pip_disk_full(out, dest.parent)
        if full is not None:
            raise full
        if _offline(out):
            raise FetchError(
                f"cannot reach the package index to fetch {name}=={version} "
                "(no network?) and it is not in the cache"
            )
        if any(m in out for m in _TLS_MARKERS):
            raise FetchError(
                f"TLS error talking to the package index while fetching {name}=={version}: "
                "check pip's certificate settings"
            )
        # Each attempt lists only the versions it may use (wheels for this machine, any
        # wheel, sdists), so "no such version" is decided on the union of all attempts.
        versions = _listed_versions(out)
        if versions is not None:
            any_listing = True
            listed.update(versions)
            if _has_version(versions, version):
                other = out
            else:
                not_listed = out
        else:
            other = out
        if n == len(attempts):  # the planned attempts are spent: what may come next
            if extra is sdist:
                if other == out:  # the sdist exists but pip could not prepare it here
                    attempts.append(isolated)
            elif extra is not isolated:
                # An old release with wheels only for older Pythons (numpy 1.15 to 1.21): such
                # a wheel carries the same sources and needs no build, unlike the sdist.
                for py, plat in older_wheels(_release_files(name, version)):
                    platforms = ["--platform", plat] + (["--platform", "any"] * (plat != "any"))
                    attempts.append(["--only-binary=:all:", *platforms, "--python-version", py])
                attempts.append(sdist)
    if any_listing and not _has_version(listed, version) and not other:
        ignored = _IGNORED_INDEX.search(not_listed)
        if not listed and ignored:
            raise FetchError(
                f"pip ignored the package index {ignored.group(1)} (not a trusted or secure "
                f"host), so {name}=={version} cannot be fetched"
            )
        files = _release_files(name, version)
        if files:  # the index has it: pip found no file it may use here (Requires-Python)
            shown = ", ".join(files[:3]) + (", ..." if len(files) > 3 else "")
            raise FetchError(
                f"pip found no file of {name}=={version} it can use here (the index has "
                f"{shown}); name another release"
            )
        raise FetchError(_unknown_version_message(name, version, sorted(listed)))
    last = other or not_listed
    lines = [ln.strip() for ln in last.splitlines() if ln.strip()]
    first = next((ln for ln in lines if ln.startswith("ERROR")), lines[-1] if lines else "")
    raise FetchError(f"pip could not download {name}=={version}: {first[:300]}")


def _has_version(versions: Iterable[str], version: str) -> bool:
    try:
        want = Version(version)
    except InvalidVersion:
        return version in versions
    return any(version_key(v) == want for v in versions)


def _offline(text: str) -> bool:
    return any(m in text for m in _OFFLINE_MARKERS)


def _listed_versions(text: str) -> list[str] | None:
    m = _FROM_VERSIONS.search(text)
    if not m:
        return None
    body = m.group(1).strip()
    if body == "none":
        return []
    return [v.strip() for v in body.split(",") if v.strip()]


def _unknown_version_message(name: str, version: str, versions: list[str]) -> str:
    if not versions:
        return f"unknown package {name!r}: the package index has no release of it"
    want = version_key(version)
    ordered = sorted(set(versions), key=version_key)
    below = [v for v in ordered if version_key(v) < want][-2:]
    above = [v for v in ordered if version_key(v) > want][:2]
    near = ", ".join(below + above)
    return f"{name} has no release {version}; nearest: {near} (latest: {ordered[-1]})"


__all__ = ["cached_sha256", "fetch_release"]
