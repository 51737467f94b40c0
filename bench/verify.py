"""Benchmark: ``--verify`` on a real scan, with the witness environments already built.

Times the witnesses alone (the scan before them is not timed), once with every program run in
the releases' interpreters and once served from the witness-result cache, and prints each time
against the target (30 s for speculators 0.3.0 against vLLM 0.16.0) as a ratio.

Usage::

    python bench/verify.py [--client speculators==0.3.0] [--against vllm==0.16.0] [--target 30]
"""

from __future__ import annotations

import argparse
import time

from driftcheck.pipeline import scan
from driftcheck.witness.verify import verify


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", default="speculators==0.3.0")
    ap.add_argument("--against", default="vllm==0.16.0")
    ap.add_argument("--target", type=float, default=30.0, help="seconds the run may take")
    args = ap.parse_args()
    result = scan(args.client, args.against)
    for label, cached in (("programs run", False), ("results cached", True)):
        start = time.perf_counter()
        done = verify(
            result.findings, result.target_release, result.baseline_release, cached=cached
        )
        took = time.perf_counter() - start
        print(f"{label:15s} {took:6.2f} s  target/time {args.target / took:6.1f}x  {done.counts}")


if __name__ == "__main__":
    main()
