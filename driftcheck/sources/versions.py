"""Release versions on the user's package index, and specs beyond ``==``.

``vllm@latest`` and ``vllm>=0.16`` resolve to the newest matching final release, as listed by
``python -m pip index versions`` (so the user's index configuration applies). Listings are cached
for an hour; offline, a cached listing of any age is used, and :func:`stale_listing` says how
old it is (the report shows it: "latest" may no longer be the newest).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from driftcheck.cache import cache_root
from driftcheck.errors import FetchError, UsageError
from driftcheck.sources.specs import PackageSpec, parse_spec

TTL_SECONDS = 3600
_SPEC_RE = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(@latest|[<>=!~].*)\s*$")


def is_version_spec(text: str) -> bool:
    """True for ``name@latest`` or ``name`` followed by a PEP 440 specifier (not plain ``==X``)."""
    m = _SPEC_RE.match(text)
    if not m:
        return False
    rest = m.group(2)
    if rest.startswith("==") and "," not in rest:
        return False  # one exact version (or a malformed one): parse_spec says which
    return True


def split_spec(text: str) -> tuple[str, SpecifierSet]:
    """``vllm>=0.16,<0.20`` → (``vllm``, specifier); ``vllm@latest`` → (``vllm``, empty)."""
    m = _SPEC_RE.match(text)
    if not m:
        raise UsageError(f"not a version spec: {text!r}")
    name, rest = m.group(1), m.group(2)
    if rest == "@latest":
        return name, SpecifierSet()
    try:
        return name, SpecifierSet(rest)
    except InvalidSpecifier:
        raise UsageError(f"invalid version range {rest!r} in {text!r}") from None


def _parse_listing(text: str) -> list[str]:
    for line in text.splitlines():
        if line.strip().startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
    return []


def available_versions(name: str, *, missing_ok: bool = False) -> list[str]:
    """Final releases of ``name`` on the index, newest first (``missing_ok``: an unknown
    package is an empty list, remembered like a listing)."""
    key = canonicalize_name(name)
    path = cache_root() / "index" / f"{key}.json"
    _STALE.pop(key, None)
    cached = None
    if path.exists():
        try:
            cached = json.loads(path.read_text())
        except (OSError, ValueError):
            cached = None
    if cached is not None and time.time() - cached.get("time", 0) < TTL_SECONDS:
        if cached["versions"] or missing_ok:
            return cached["versions"]
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", name, "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=False,
    )
    versions = _parse_listing(proc.stdout)
    if not versions:
        if cached:
            _STALE[key] = float(cached.get("time", 0))
            return cached["versions"]
        if "No matching distribution" in proc.stderr + proc.stdout:
            if missing_ok:
                _remember(path, [])
                return []
            raise FetchError(f"unknown package {name!r}: the package index has no release of it")
        raise FetchError(f"cannot list the releases of {name} (no network?)")
    finals = []
    for v in versions:
        try:
            parsed = Version(v)
        except InvalidVersion:
            continue
        if not parsed.is_prerelease and not parsed.is_devrelease:
            finals.append(v)
    finals.sort(key=Version, reverse=True)
    _remember(path, finals)
    return finals


#: Listings the index could not renew, used from the cache: name → when they were listed.
_STALE: dict[str, float] = {}


def stale_listing(name: str) -> dict | None:
    """How old the release list of ``name`` is, when the last one read came from the cache
    because the index could not be reached (else None)."""
    listed = _STALE.get(canonicalize_name(name))
    if listed is None:
        return None
    return {"source": "cache", "age_s": round(time.time() - listed), "why": "index unreachable"}


def age_text(seconds: float) -> str:
    """An age for people: ``40 s``, ``12 min``, ``5 h``, ``3 days``."""
    for unit, size, above in (("days", 86400, 2 * 86400), ("h", 3600, 7200), ("min", 60, 120)):
        if seconds >= above:
            return f"{int(seconds // size)} {unit}"
    return f"{int(seconds)} s"


def _remember(path: Path, versions: list[str]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"time": time.time(), "versions": versions}))
    except OSError:
        pass


def newest_matching(name: str, spec: SpecifierSet) -> str:
    """The newest final release of ``name`` that ``spec`` allows."""
    for v in available_versions(name):
        if Version(v) in spec:
            return v
    raise FetchError(f"no release of {name} matches {spec or 'latest'}")


def oldest_matching(name: str, spec: SpecifierSet) -> str:
    """The oldest final release of ``name`` that ``spec`` allows (and that has files this
    Python can use: the index listing leaves the others out)."""
    for v in reversed(available_versions(name)):
        if Version(v) in spec:
            return v
    raise FetchError(f"no release of {name} matches {spec}")


def releases_between(name: str, first: str, last: str) -> list[str]:
    """Final releases from ``first`` to ``last`` inclusive (``last`` may be ``latest``), oldest first."""
    versions = available_versions(name)
    if last == "latest":
        last = versions[0]
    lo, hi = Version(first), Version(last)
    out = [v for v in versions if lo <= Version(v) <= hi]
    if not out:
        raise FetchError(f"no release of {name} between {first} and {last}")
    return sorted(out, key=Version)


def exact_spec(text: str, default_name: str | None = None) -> PackageSpec:
    """Parse a spec, resolving ``name@latest`` and version ranges to the newest matching release."""
    if is_version_spec(text):
        name, spec = split_spec(text)
        return PackageSpec(kind="release", name=name, version=newest_matching(name, spec))
    return parse_spec(text, default_name=default_name)
