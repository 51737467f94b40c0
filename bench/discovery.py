"""Benchmark: what discovery (which client files are read, their module names) costs.

Times :func:`driftcheck.client.discovery.discover` on a fresh tree each run (a wheel's
member list included; a directory's walk timed apart, every scan made it before), for a release's wheel (default ``speculators==0.3.0``, fetched into the cache once)
and for a directory project (default: this checkout, a few hundred files), and the notebook
reader on the layout fixture. Prints the median of each in milliseconds.

Usage::

    python bench/discovery.py [--client speculators==0.3.0] [--folder .] [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from driftcheck.client.discovery import discover
from driftcheck.client.notebooks import to_python
from driftcheck.sources.specs import parse_spec
from driftcheck.sources.trees import DirectoryTree, open_tree

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "fixtures" / "clients" / "layouts" / "notebooks" / "analysis.ipynb"


def _median_ms(make, run, repeat: int) -> float:
    """Median of ``run(make())`` over ``repeat`` runs, ``make`` not timed."""
    times = []
    for _ in range(repeat):
        thing = make()
        t0 = time.perf_counter()
        run(thing)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def _listed(tree: DirectoryTree) -> DirectoryTree:
    tree._file_set()  # the walk every scan of a directory makes
    return tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--client", default="speculators==0.3.0")
    parser.add_argument("--folder", default=str(ROOT))
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    spec = parse_spec(args.client)
    counts: list[int] = []

    def run(tree) -> None:
        counts.append(len(discover(tree).modules))

    wheel = _median_ms(lambda: open_tree(spec), run, args.repeat)
    print(f"discovery, {args.client} (wheel): {wheel:.1f} ms ({counts[-1]} files)")
    walk = _median_ms(lambda: DirectoryTree(Path(args.folder)), _listed, args.repeat)
    folder = _median_ms(lambda: _listed(DirectoryTree(Path(args.folder))), run, args.repeat)
    print(f"discovery, {args.folder} (directory): {folder:.1f} ms ({counts[-1]} files), "
          f"(listing its files, which every scan did before: {walk:.1f} ms)")  # fmt: skip
    raw = NOTEBOOK.read_text()
    nb = _median_ms(lambda: raw, to_python, args.repeat * 10)
    print(f"notebook to Python, {NOTEBOOK.name}: {nb:.2f} ms")


if __name__ == "__main__":
    main()
