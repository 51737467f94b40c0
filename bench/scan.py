"""Benchmark: driftcheck scans against one griffe full static load of the same host, in one run.

Each scan runs in a fresh Python process (nothing kept in memory between runs) and is timed
around ``driftcheck.pipeline.scan`` only, like the griffe load is timed around ``griffe.load``:

* cold: the release archives are in the cache, but no host snapshot and no cached analysis;
* warm, snapshot: the host snapshots are cached, the client is analysed afresh;
* warm, all: the same cache after one scan (host snapshots, the client's uses and the findings
  of this client against these two releases are cached).

The griffe full static load reads the target's ``.py`` files unpacked to a temporary folder
(unpacking not timed). Prints each time, the ratio full load / scan, the peak RSS of the scans,
and the bytes the archives cost to fetch.

Usage::

    python bench/scan.py [--client speculators==0.3.0] [--against vllm==0.16.0] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path, PurePosixPath

CHILD = """
import json, resource, sys, time
from driftcheck.pipeline import scan
t0 = time.perf_counter()
result = scan(sys.argv[1], sys.argv[2])
elapsed = time.perf_counter() - t0
print(json.dumps({"seconds": elapsed, "findings": len(result.findings),
                  "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "stats": result.stats}))
"""


def _scan_in_child(client: str, against: str, cache: Path) -> dict:
    env = {**os.environ, "DRIFTCHECK_CACHE_DIR": str(cache)}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, client, against], env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _unpack_py(archive: Path, dest: Path) -> int:
    count = 0
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            name = PurePosixPath(info.filename)
            if info.is_dir() or name.suffix != ".py" or ".." in name.parts:
                continue
            if name.parts[0].endswith((".dist-info", ".data")):
                continue
            target = dest.joinpath(*name.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(zf.read(info))
            count += 1
    return count


def _entry(cache: Path, name: str, version: str) -> dict:
    return json.loads((cache / "archives" / name / version / "entry.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--client", default="speculators==0.3.0")
    parser.add_argument("--against", default="vllm==0.16.0")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--large",
        default="verl==0.7.0",
        help="A large client to time cold too ('' to skip); its own pin is the baseline.",
    )
    parser.add_argument("--large-against", default="vllm==0.16.0")
    args = parser.parse_args()

    from driftcheck.cache import cache_root
    from driftcheck.pipeline import scan
    from driftcheck.sources.fetch import fetch_release

    host, version = args.against.split("==", 1)
    first = scan(args.client, args.against)  # fills the user cache (archives) once, not timed
    user_cache = cache_root()
    with tempfile.TemporaryDirectory(prefix="driftcheck-bench-") as tmp:
        cache = Path(tmp) / "cache"
        for kind in ("archives", "index"):  # the index (version listings) only when one was read
            if (user_cache / kind).is_dir():
                shutil.copytree(user_cache / kind, cache / kind, dirs_exist_ok=True)
        colds, snaps, warms = [], [], []
        for _ in range(args.repeat):
            shutil.rmtree(cache / "snapshots", ignore_errors=True)
            shutil.rmtree(cache / "uses", ignore_errors=True)
            shutil.rmtree(cache / "findings", ignore_errors=True)
            colds.append(_scan_in_child(args.client, args.against, cache))
            shutil.rmtree(cache / "uses", ignore_errors=True)
            shutil.rmtree(cache / "findings", ignore_errors=True)
            snaps.append(_scan_in_child(args.client, args.against, cache))
            warms.append(_scan_in_child(args.client, args.against, cache))
        cold = min(r["seconds"] for r in colds)
        snap = min(r["seconds"] for r in snaps)
        warm = min(r["seconds"] for r in warms)
        rss = max(r["rss_mib"] for r in colds + snaps + warms)

        logging.getLogger("griffe").setLevel(logging.CRITICAL)
        import griffe

        archive = fetch_release(host, version)
        src = Path(tmp) / "src"
        n_files = _unpack_py(archive, src)
        t0 = time.perf_counter()
        griffe.load(host, search_paths=[str(src)], resolve_aliases=False, allow_inspection=False)
        full = time.perf_counter() - t0

    print(
        f"scan {args.client} against {args.against} (baseline {first.baseline}): "
        f"{len(first.findings)} findings, {first.stats['uses']} uses"
    )
    print(f"griffe full static load of {args.against} ({n_files} files): {full:.2f} s")
    print(
        f"scan, archives cached (cold):  {cold:.3f} s   ratio {full / cold:6.1f}x   (target >= 5x)"
    )
    print(
        f"scan, snapshot cached (warm):  {snap:.3f} s   ratio {full / snap:6.1f}x   (target >= 20x)"
        "   client analysed afresh"
    )
    print(
        f"scan, all cached (warm):       {warm:.3f} s   ratio {full / warm:6.1f}x"
        "   client uses and findings cached too"
    )
    print(f"scan peak RSS: {rss:.0f} MiB   (target < 400 MiB)")
    if args.large:
        scan(args.large, args.large_against)  # its archives into the user cache, not timed
        with tempfile.TemporaryDirectory(prefix="driftcheck-bench-") as tmp:
            cache = Path(tmp) / "cache"
            for kind in ("archives", "index"):
                if (user_cache / kind).is_dir():
                    shutil.copytree(user_cache / kind, cache / kind, dirs_exist_ok=True)
            big = _scan_in_child(args.large, args.large_against, cache)
        print(
            f"scan {args.large} against {args.large_against}, archives cached (cold): "
            f"{big['seconds']:.1f} s   ({big['stats']['uses']} uses, {big['findings']} findings; "
            f"target < 30 s, ratio {30 / big['seconds']:.1f}x)"
        )
    for spec in (args.against, f"{host}=={first.baseline}"):
        name, ver = spec.split("==", 1)
        info = _entry(user_cache, name, ver)
        sent = info.get("bytes_transferred")
        whole = info.get("wheel_bytes")
        if sent and whole:
            print(
                f"fetch {spec}: {sent / 1e6:.1f} MB transferred of a {whole / 1e6:.0f} MB wheel "
                f"({info.get('mode')}, ratio {whole / sent:.0f}x less)"
            )
        else:
            size = (user_cache / "archives" / name / ver / info["file"]).stat().st_size
            print(f"fetch {spec}: whole archive by pip download ({size / 1e6:.0f} MB)")


if __name__ == "__main__":
    main()
