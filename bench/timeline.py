"""Benchmark: ``timeline`` over every host release in a range, against a griffe full load.

Runs the timeline twice in fresh processes: first to fill the cache (archives fetched in
parallel, host snapshots written), then again with everything cached; times each around
``driftcheck.timelines.timeline``. Prints the warm time against the 15 s target and against one
griffe full static load of the newest release, and the bytes each release cost to fetch.

Usage::

    python bench/timeline.py [--client speculators==0.3.0] [--host vllm] [--from 0.11.0] [--to latest]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path, PurePosixPath

CHILD = """
import json, resource, sys, time
from driftcheck.timelines import timeline
t0 = time.perf_counter()
result = timeline(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4])
print(json.dumps({"seconds": time.perf_counter() - t0, "versions": result.versions,
                  "errors": result.errors, "newest_clean": result.newest_clean(),
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _run(args: argparse.Namespace) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, args.client, args.host, args.first, args.last],
        capture_output=True,
        text=True,
        env=dict(os.environ),
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--client", default="speculators==0.3.0")
    parser.add_argument("--host", default="vllm")
    parser.add_argument("--from", dest="first", default="0.11.0")
    parser.add_argument("--to", dest="last", default="latest")
    args = parser.parse_args()

    from driftcheck.cache import cache_root
    from driftcheck.sources.fetch import fetch_release

    fill = _run(args)
    warm = _run(args)
    versions = warm["versions"]
    newest = versions[-1]

    logging.getLogger("griffe").setLevel(logging.CRITICAL)
    import griffe

    archive = fetch_release(args.host, newest)
    with tempfile.TemporaryDirectory(prefix="driftcheck-bench-") as tmp:
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                name = PurePosixPath(info.filename)
                if name.suffix == ".py" and not name.parts[0].endswith(".dist-info"):
                    target = Path(tmp).joinpath(*name.parts)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(zf.read(info))
        t0 = time.perf_counter()
        griffe.load(args.host, search_paths=[tmp], resolve_aliases=False, allow_inspection=False)
        full = time.perf_counter() - t0

    print(
        f"timeline {args.client} across {len(versions)} {args.host} releases "
        f"{versions[0]}..{newest}: newest clean {warm['newest_clean']}"
    )
    print(f"first run (fetching, snapshots written): {fill['seconds']:.1f} s")
    print(
        f"warm run (everything cached): {warm['seconds']:.2f} s   "
        f"ratio to the 15 s target {15 / warm['seconds']:.1f}x   peak RSS {warm['rss_mib']:.0f} MiB"
    )
    print(
        f"griffe full static load of {args.host}=={newest}: {full:.2f} s   "
        f"ratio full load / warm timeline of {len(versions)} releases {full / warm['seconds']:.2f}x"
    )
    total_sent = total_whole = 0
    for v in versions:
        entry = cache_root() / "archives" / args.host / v / "entry.json"
        info = json.loads(entry.read_text())
        sent, whole = info.get("bytes_transferred"), info.get("wheel_bytes")
        if sent and whole:
            total_sent += sent
            total_whole += whole
            print(f"  {v}: {sent / 1e6:6.1f} MB of {whole / 1e6:4.0f} MB ({info.get('mode')})")
        else:
            print(f"  {v}: whole archive (pip download)")
    if total_sent:
        print(
            f"bytes transferred: {total_sent / 1e6:.0f} MB of {total_whole / 1e6:.0f} MB "
            f"({total_whole / total_sent:.0f}x less)"
        )
    if warm["errors"]:
        print(f"releases that could not be scanned: {warm['errors']}")


if __name__ == "__main__":
    main()
