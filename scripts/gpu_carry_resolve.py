"""Which wheels the GPU machine lacks: the closure of some requirements, walked one wheel at a
time (each downloaded with ``--no-deps`` for CPython 3.12 on manylinux x86-64), never entering
what the machine already has; then the requirements that the chosen set leaves unmet.

pip's own resolver cannot do this walk: it would resolve, and download, torch and the CUDA
libraries the machine has, at versions it cannot know. So each requirement takes the newest
release it allows (or the hand pin), and :func:`unmet_in` reports what then conflicts.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from gpu_carry_reqs import Requirement, Version, norm, satisfies, unmet, wheel_metadata

#: manylinux tags the machine takes (glibc 2.35 and older: what the run that worked used).
PLATFORMS = [f"manylinux_2_{m}_x86_64" for m in range(35, 4, -1)] + [
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
]


class ResolveError(Exception):
    """A wheel cannot be found or downloaded."""


@dataclass
class Picked:
    """One wheel chosen for the machine."""

    name: str
    version: str
    path: Path
    requires: list[Requirement]
    extras: set[str] = field(default_factory=set)
    wanted_by: list[str] = field(default_factory=list)

    def record(self) -> dict:
        return {
            "name": self.name,
            "version": self.version,
            "file": self.path.name,
            "bytes": self.path.stat().st_size,
            "extras": sorted(self.extras),
            "wanted_by": self.wanted_by[:4],
        }


@dataclass
class Closure:
    """The wheels chosen, what the machine must provide, and what was left out."""

    picked: dict[str, Picked] = field(default_factory=dict)
    provided: dict[str, list[str]] = field(default_factory=dict)  # name -> who asks, and for what
    left_out: dict[str, list[str]] = field(default_factory=dict)
    #: Requirements with extras on what the machine provides: those extras are not walked.
    extras_not_walked: list[str] = field(default_factory=list)


def _wheel_name_version(path: Path) -> tuple[str, str]:
    name, version = path.name.split("-")[:2]
    return norm(name), version


def cached(cache: Path, name: str, spec: str) -> Path | None:
    """The newest wheel of ``name`` in ``cache`` that meets ``spec``."""
    best: tuple[tuple, Path] | None = None
    for path in cache.glob("*.whl"):
        n, v = _wheel_name_version(path)
        parsed = Version.parse(v)
        if n != name or parsed is None or not satisfies(v, spec):
            continue
        if best is None or parsed.key() > best[0]:
            best = (parsed.key(), path)
    return best[1] if best else None


def download(name: str, spec: str, cache: Path) -> Path:
    """The wheel for ``name<spec>``: from ``cache``, else downloaded there with pip."""
    hit = cached(cache, norm(name), spec)
    if hit is not None:
        return hit
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".dl-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-cache-dir"]
        cmd += ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp"]
        cmd += ["--abi", "cp312", "-d", tmp, f"{name}{spec}"]
        for platform in PLATFORMS:
            cmd += ["--platform", platform]
        proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
        got = list(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or len(got) != 1:
            lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("ERROR")]
            raise ResolveError(f"{name}{spec}: {(lines or ['no wheel'])[-1]}")
        return got[0].replace(cache / got[0].name)


def close(
    roots: list[tuple[Requirement, str]],
    *,
    have: set[str],
    pins: dict[str, str],
    leave_out: set[str],
    cache: Path,
    jobs: int = 8,
) -> Closure:
    """The wheels ``roots`` (requirement, who asks) need beyond ``have`` (names the machine or an earlier closure
    provides), walked breadth first; each wave of new names is downloaded in parallel."""
    out = Closure()
    queue = [(r, owner) for r, owner in roots if r.applies()]
    errors: list[str] = []
    while queue:
        wave: dict[str, tuple[Requirement, str, set[str]]] = {}
        for req, owner in queue:
            key = req.key
            if key in leave_out:
                out.left_out.setdefault(key, []).append(f"{owner}: {req}")
            elif key in have:
                out.provided.setdefault(key, []).append(f"{owner}: {req}")
                if req.extras:
                    out.extras_not_walked.append(f"{owner}: {req}")
            elif key in out.picked:
                p = out.picked[key]
                p.wanted_by.append(owner)
                new = tuple(set(req.extras) - p.extras)
                if new:  # an extra asked for later brings its own requirements
                    p.extras |= set(new)
                    queue.extend((c, p.name) for c in p.requires if c.applies(new))
            elif key in wave:
                wave[key][2].update(req.extras)
            else:
                wave[key] = (req, owner, set(req.extras))
        queue = []
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {
                key: pool.submit(download, req.name, pins.get(key, req.specifier), cache)
                for key, (req, _owner, _extras) in wave.items()
            }
        for key, fut in futures.items():
            req, owner, extras = wave[key]
            try:
                path = fut.result()
            except ResolveError as exc:
                errors.append(str(exc))
                continue
            name, version, requires = wheel_metadata(path)
            out.picked[key] = Picked(name, version, path, requires, extras, [owner])
            queue.extend((c, name) for c in requires if c.applies(tuple(extras)))
    if errors:
        raise ResolveError("; ".join(errors))
    return out


def unmet_in(
    closure: Closure, versions: dict[str, str], ignored: set[tuple[str, str]]
) -> list[str]:
    """Requirements of the chosen wheels that ``versions`` (the machine's known ones and the
    chosen set's) do not meet, less the ``(who, what)`` pairs known not to matter."""
    lines = []
    for key, p in sorted(closure.picked.items()):
        for r in p.requires:
            if (key, r.key) in ignored:
                continue
            lines += unmet(p.name, [r], tuple(p.extras), versions)
    return lines
