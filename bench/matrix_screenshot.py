"""Screenshot of the matrix page of any matrix database (the picture in docs/matrix-report.md).

Writes the page as ``driftcheck matrix report --html`` does, opens it in Debian's headless
chromium through Playwright (``pip install -e '.[test]'``; Playwright's own browser download is
never used), clicks the first cell with errors (or the cell ``--cell CLIENT_SPEC@RELEASE``) so
its findings show, and saves a PNG of the whole page.

Usage::

    python bench/matrix_screenshot.py --db matrix.sqlite --out docs/img/matrix-report.png \
        [--host vllm] [--compare OLD.sqlite] [--cell trl==0.19.0@0.16.0] [--width 1280]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

from driftcheck.matrix.compare import compare_matrices
from driftcheck.matrix.page import render_html
from driftcheck.matrix.results import load_matrix


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--host")
    parser.add_argument("--compare")
    parser.add_argument("--cell", help="CLIENT_SPEC@RELEASE to open (default: first with errors)")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()

    matrix = load_matrix(args.db, args.host)
    comparison = (
        compare_matrices(matrix, load_matrix(args.compare, matrix.host)) if args.compare else None
    )
    if args.cell:
        spec, _, release = args.cell.rpartition("@")
    else:
        spec, release = next(
            (
                (c.spec, r)
                for c in matrix.clients
                for r in matrix.releases
                if matrix.status(c.spec, r) == "errors"
            ),
            (matrix.clients[0].spec, matrix.releases[0]),
        )
    row = [c.spec for c in matrix.clients].index(spec)
    col = list(matrix.releases).index(release)
    with tempfile.TemporaryDirectory() as folder:
        page_path = Path(folder) / "matrix.html"
        page_path.write_text(render_html(matrix, comparison), encoding="utf-8")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=args.chromium, headless=True)
            page = browser.new_page(viewport={"width": args.width, "height": 600})
            page.goto(page_path.as_uri())
            page.click(f'#heat button[data-row="{row}"][data-col="{col}"]')
            page.screenshot(path=args.out, full_page=True)
            browser.close()
    print(
        f"{args.out}: {len(matrix.clients)} client(s) x {len(matrix.releases)} release(s), cell {spec} @ {release}"
    )


if __name__ == "__main__":
    main()
