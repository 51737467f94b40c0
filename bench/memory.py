"""Benchmark: the peak memory of one scan, on the scans of a real-verdicts file, and the time and
peak of a whole-package scan (``--big``).

A matrix runs many scans at once, so the peak resident memory of each scan is what limits how
many run side by side. Each scan runs in a fresh Python process that reports its own
``ru_maxrss`` (nothing kept between scans), in three states of a private copy of the cache:

* cold: the release archives are in the cache, but no host snapshot and no cached analysis;
* snapshot: the host snapshots are cached (as in a matrix, where each release is read once),
  the client is analysed afresh;
* warm: the same cache after a scan (the client's uses and its findings cached too).

The interpreter with driftcheck's modules imported and nothing scanned is measured the same way,
so the numbers can be read against what no scan can go below. Prints each scan's peak, the
median and the max per state, and the ratio of the median to the target (default 120 MB;
1 MB = 10^6 bytes). ``--big`` measures the scan of a whole large client (default transformers
5.24.0 against torch 2.10.0) in the same three states: its CPU time (user + system, what a
shared machine does not inflate; the wall time beside it) and peak, against 60 s and 1 GB;
``--big-repeat N`` runs the three states N times and prints the median time and the highest
peak.

Usage::

    python bench/memory.py [--verdicts tests/real/verdicts/trl.toml] [--big] [--only-big]
        [--big-repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from driftcheck.compat import tomllib

CHILD = """
import json, resource, sys, time
t0 = time.perf_counter()
from driftcheck.pipeline import scan
if sys.argv[1] == "--imports":
    out = {"seconds": 0.0, "findings": 0, "fingerprints": []}
else:
    t0 = time.perf_counter()
    result = scan(sys.argv[1], sys.argv[2], baseline=sys.argv[3] or None)
    out = {"seconds": time.perf_counter() - t0, "findings": len(result.findings),
           "fingerprints": sorted(f.fingerprint for f in result.findings)}
usage = resource.getrusage(resource.RUSAGE_SELF)
out["rss_mb"] = usage.ru_maxrss * 1024 / 1e6
out["cpu_s"] = usage.ru_utime + usage.ru_stime
print(json.dumps(out))
"""

HERE = Path(__file__).resolve().parent


def _child(args: list[str], cache: Path | None) -> dict:
    env = dict(os.environ)
    if cache is not None:
        env["DRIFTCHECK_CACHE_DIR"] = str(cache)
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, *args], env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-4000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _fresh_cache(user_cache: Path, tmp: Path) -> Path:
    """A private cache holding only the archives (and index listings) of the user's cache."""
    cache = tmp / "cache"
    for kind in ("archives", "index"):
        if (user_cache / kind).is_dir():
            shutil.copytree(user_cache / kind, cache / kind, dirs_exist_ok=True)
    return cache


def _forget(cache: Path, *kinds: str) -> None:
    for kind in kinds:
        shutil.rmtree(cache / kind, ignore_errors=True)


def _three_states(scan: list[str], cache: Path) -> dict[str, dict]:
    _forget(cache, "snapshots", "uses", "findings")
    cold = _child(scan, cache)
    _forget(cache, "uses", "findings")
    snap = _child(scan, cache)
    warm = _child(scan, cache)
    return {"cold": cold, "snapshot": snap, "warm": warm}


def _scans(verdicts: Path) -> list[list[str]]:
    data = tomllib.loads(verdicts.read_text())
    return [[s["client"], s["against"], s.get("baseline", "")] for s in data.get("scan", [])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--verdicts", type=Path, default=HERE.parent / "tests/real/verdicts/trl.toml"
    )
    parser.add_argument("--target-mb", type=float, default=120.0)
    parser.add_argument("--big", action="store_true", help="Also time the whole-package scan.")
    parser.add_argument("--only-big", action="store_true", help="Only the whole-package scan.")
    parser.add_argument("--big-client", default="transformers==5.24.0")
    parser.add_argument("--big-against", default="torch==2.10.0")
    parser.add_argument("--big-seconds", type=float, default=60.0)
    parser.add_argument("--big-mb", type=float, default=1000.0)
    parser.add_argument(
        "--big-repeat",
        type=int,
        default=1,
        help="Run the whole-package scan's three states this many times: the median time and "
        "the highest peak are printed (a shared machine's speed moves by a tenth from one "
        "run to the next).",
    )
    parser.add_argument("--json", type=Path, help="Also write every measurement here.")
    args = parser.parse_args()

    from driftcheck.cache import cache_root

    user_cache = cache_root()
    report: dict = {}
    base = _child(["--imports"], None)
    report["imports"] = base
    print(f"interpreter + import driftcheck.pipeline: {base['rss_mb']:.0f} MB peak")
    if not args.only_big:
        scans = _scans(args.verdicts)
        for scan in scans:  # the archives into the user cache once (not measured)
            _child(scan, None)
        with tempfile.TemporaryDirectory(prefix="driftcheck-bench-") as tmp:
            cache = _fresh_cache(user_cache, Path(tmp))
            results = [_three_states(scan, cache) for scan in scans]
        report["scans"] = [
            {"scan": scan, **states} for scan, states in zip(scans, results, strict=True)
        ]
        print(f"{'scan':52} {'cold':>8} {'snapshot':>9} {'warm':>8}  (peak RSS, MB)")
        for scan, states in zip(scans, results, strict=True):
            label = f"{scan[0]} against {scan[1]}" + (f" (baseline {scan[2]})" if scan[2] else "")
            print(
                f"{label:52} {states['cold']['rss_mb']:8.0f} {states['snapshot']['rss_mb']:9.0f} "
                f"{states['warm']['rss_mb']:8.0f}   "
                f"{states['cold']['seconds']:.1f} s cold, {states['cold']['findings']} findings"
            )
        for state in ("cold", "snapshot", "warm"):
            peaks = [r[state]["rss_mb"] for r in results]
            med = statistics.median(peaks)
            print(
                f"{state:9} median {med:6.0f} MB   max {max(peaks):6.0f} MB   "
                f"ratio target/median {args.target_mb / med:.2f}x   "
                f"(target < {args.target_mb:.0f} MB; "
                f"{med - base['rss_mb']:.0f} MB above the interpreter)"
            )
    if args.big or args.only_big:
        big = [args.big_client, args.big_against, ""]
        _child(big, None)  # its archives into the user cache (not measured)
        with tempfile.TemporaryDirectory(prefix="driftcheck-bench-") as tmp:
            cache = _fresh_cache(user_cache, Path(tmp))
            runs = [_three_states(big, cache) for _ in range(max(1, args.big_repeat))]
        report["big"] = {"scan": big, **runs[0]}
        report["big_runs"] = runs
        for state in ("cold", "snapshot", "warm"):
            cpu = statistics.median(run[state]["cpu_s"] for run in runs)
            wall = statistics.median(run[state]["seconds"] for run in runs)
            peak = max(run[state]["rss_mb"] for run in runs)
            each = " / ".join(f"{run[state]['cpu_s']:.1f}" for run in runs)
            print(
                f"{args.big_client} against {args.big_against}, {state:8}: "
                f"{cpu:6.1f} s CPU (target < {args.big_seconds:.0f} s, ratio "
                f"{args.big_seconds / cpu:.2f}x; {wall:.1f} s wall)   "
                f"peak {peak:6.0f} MB "
                f"(target < {args.big_mb:.0f} MB, ratio {args.big_mb / peak:.2f}x)   "
                f"{runs[0][state]['findings']} findings"
                + (f"   (median of {len(runs)} runs: {each} s)" if len(runs) > 1 else "")
            )
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
