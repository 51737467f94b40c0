"""Benchmark: the ecosystem matrix at scale: real vLLM dependents x every vLLM minor release.

Runs ``driftcheck matrix run`` twice in child processes over the same clients and releases:

* cold: a new, empty driftcheck cache (every archive fetched, every host snapshot built, every
  client analysed): what a first run on a new machine costs;
* warm: the same cache (archives, snapshots and analyses kept) into a new database, so that
  every pair is computed again from the cache.

Prints per run: pairs, failed, seconds, pairs per minute, the peak RSS of a worker (the largest
``peak_rss_mib`` stored), the median scan time and the database's size; then the cost of a
1,000 clients x 40 releases matrix in core-hours from the measured seconds per pair.

Usage::

    python bench/matrix.py [--clients bench/vllm-dependents.txt] [--first 0.11] [-j 2]
        [--work DIR] [--only cold|warm]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def minor_releases(first: str) -> list[str]:
    """The first final release of every vLLM minor from ``first`` to the newest on the index."""
    from driftcheck.sources.versions import available_versions

    firsts: dict[tuple[int, int], Version] = {}
    for text in available_versions("vllm"):
        v = Version(text)
        if v.is_prerelease or v.is_devrelease or v < Version(first):
            continue
        key = (v.major, v.minor)
        if key not in firsts or v < firsts[key]:
            firsts[key] = v
    return [str(firsts[k]) for k in sorted(firsts)]


def run(label: str, releases: list[str], clients: Path, db: Path, cache: Path, jobs: int) -> dict:
    env = dict(os.environ, DRIFTCHECK_CACHE_DIR=str(cache))
    argv = [sys.executable, "-c", "from driftcheck.cli import main; main()"]
    argv += ["matrix", "run", "--host", "vllm"]
    argv += ["--releases", ",".join(releases), "--clients", str(clients), "--db", str(db)]
    argv += ["-j", str(jobs), "--format", "json", "--quiet"]
    t0 = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        sys.exit(f"{label}: matrix run failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    summary = json.loads(done.stdout)
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT seconds, peak_rss_mib, status FROM pairs").fetchall()
    scans = [r[0] for r in rows if r[2] != "failed"]
    return {
        "label": label,
        "pairs": summary["pairs"],
        "computed": summary["computed"],
        "failed": summary["failed"],
        "statuses": summary["statuses"],
        "seconds": seconds,
        "pairs_per_minute": summary["computed"] / seconds * 60,
        "worker_peak_mib": max((r[1] or 0) for r in rows),
        "median_scan_s": statistics.median(scans) if scans else 0.0,
        "mean_scan_s": statistics.fmean(scans) if scans else 0.0,
        "db_bytes": db.stat().st_size,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=Path, default=ROOT / "bench" / "vllm-dependents.txt")
    parser.add_argument("--first", default="0.11")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--work", type=Path, default=None, help="keep the cache and databases here")
    parser.add_argument("--only", choices=("cold", "warm"), default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="driftcheck-matrix-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    releases = minor_releases(args.first)
    clients = [ln for ln in args.clients.read_text().splitlines() if ln and not ln.startswith("#")]
    print(
        f"{len(clients)} clients x {len(releases)} vLLM releases ({releases[0]} .. "
        f"{releases[-1]}) = {len(clients) * len(releases)} pairs, -j {args.jobs}, in {work}"
    )
    results = []
    for label in ("cold", "warm"):
        if args.only and label != args.only:
            continue
        db = work / f"{label}.sqlite"
        db.unlink(missing_ok=True)
        result = run(label, releases, args.clients, db, work / "cache", args.jobs)
        results.append(result)
        print(
            f"{label}: {result['computed']} pairs ({result['failed']} failed) in "
            f"{result['seconds']:.0f} s = {result['pairs_per_minute']:.1f} pairs/min; worker peak "
            f"{result['worker_peak_mib']:.0f} MiB; scan median {result['median_scan_s']:.2f} s, "
            f"mean {result['mean_scan_s']:.2f} s; database {result['db_bytes'] / 1e6:.2f} MB; "
            f"statuses {result['statuses']}"
        )
    for r in results:
        core_hours = 1000 * 40 * r["seconds"] * args.jobs / r["computed"] / 3600
        print(
            f"1,000 x 40 at the {r['label']} rate: {core_hours:.0f} core-hours (cores for one hour)"
        )
    (work / "results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
