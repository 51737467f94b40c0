"""Benchmark: a driftcheck scan against one griffe full static load of the same host.

Measures, in one run:

1. ``driftcheck.pipeline.scan(CLIENT, HOST==TARGET)`` in-process with every archive already in
   the cache (fetched first, not timed): best of ``--repeat`` runs, plus the scan's peak RSS;
2. one griffe full static load of the target host (its wheel's ``.py`` files unpacked to a
   temporary folder first, not timed): ``griffe.load(HOST, search_paths=[tmp],
   resolve_aliases=False, allow_inspection=False)``;

then prints both times and the ratio full load / scan. The scan runs first so that its peak
RSS (``resource.getrusage``, a high-water mark for the whole process) is not the full load's.

Usage::

    python bench/scan.py [--client speculators==0.3.0] [--against vllm==0.16.0] [--repeat 3]
"""

from __future__ import annotations

import argparse
import logging
import resource
import sys
import tempfile
import time
import zipfile
from pathlib import Path, PurePosixPath


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


def _rss_mib() -> float:
    """Peak resident set size of this process so far, in MiB (Linux reports KiB)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _fetch(spec: str) -> Path:
    from driftcheck.sources import fetch_release
    from driftcheck.specs import parse_spec

    parsed = parse_spec(spec)
    if parsed.kind != "release":
        raise SystemExit(f"bench needs NAME==VERSION specs, got {spec!r}")
    return fetch_release(parsed.name, parsed.version)


def _unpack_py(wheel: Path, dest: Path) -> int:
    """Write the wheel's ``.py`` files under ``dest``; returns how many."""
    count = 0
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            name = PurePosixPath(info.filename)
            if info.is_dir() or name.suffix != ".py" or name.is_absolute() or ".." in name.parts:
                continue
            if name.parts[0].endswith((".dist-info", ".data")):
                continue
            target = dest.joinpath(*name.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))
            count += 1
    return count


def _count_modules(module: object) -> int:
    """Modules defined in the package (aliases to modules, i.e. re-exports, not followed)."""
    total = 1
    for member in module.members.values():
        if not member.is_alias and member.is_module:
            total += _count_modules(member)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--client", default="speculators==0.3.0")
    parser.add_argument("--against", default="vllm==0.16.0")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from driftcheck.pipeline import scan

    host_name = args.against.split("==", 1)[0]

    # Everything the scan reads is in the cache before any timing (baseline included).
    _fetch(args.client)
    target_wheel = _fetch(args.against)
    rss_imports = _rss_mib()
    first = scan(args.client, args.against)  # also fetches the baseline the client pins
    print(
        f"scan {args.client} against {args.against} (baseline {first.baseline}): "
        f"{len(first.findings)} finding(s), {first.stats.get('uses')} uses, host files read: "
        f"{first.stats.get('host_files_target')} target, "
        f"{first.stats.get('host_files_baseline')} baseline"
    )

    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        scan(args.client, args.against)
        times.append(time.perf_counter() - t0)
    best = min(times)
    rss_scan = _rss_mib()
    print(
        f"scan: best {best:.3f} s of {args.repeat} "
        f"({', '.join(f'{t:.3f}' for t in times)}); first (cold) run not counted"
    )
    print(
        f"scan peak RSS: {rss_scan:.0f} MiB (process peak; {rss_imports:.0f} MiB after "
        "imports, before the first scan)"
    )

    import griffe

    logging.getLogger("griffe").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="driftcheck-bench-") as tmp:
        n_files = _unpack_py(target_wheel, Path(tmp))
        t0 = time.perf_counter()
        package = griffe.load(
            host_name, search_paths=[tmp], resolve_aliases=False, allow_inspection=False
        )
        full = time.perf_counter() - t0
        n_modules = _count_modules(package)
    print(
        f"griffe {_version('griffe')} full static load of {args.against}: {full:.3f} s "
        f"({n_modules} modules from {n_files} .py files)"
    )
    print(f"ratio full load / scan: {full / best:.2f}x")


if __name__ == "__main__":
    main()
