"""The matrix as one self-contained HTML page: the template ``page.html`` (inline CSS and
JavaScript, nothing fetched) with the matrix embedded as JSON that the page's script renders
(heatmap, first breaking releases, a cell's findings, filters by kind and severity).

The data goes into a ``<script type="application/json">`` element: ``<``, ``>`` and ``&`` are
written as JSON escapes there, so no text of a finding can close the element or be read as
markup, and the script puts every string into the page as text, never as HTML.
"""

from __future__ import annotations

import html
import json
import re
from importlib import resources

from driftcheck.matrix.compare import Comparison
from driftcheck.matrix.report import headline, row_data
from driftcheck.matrix.results import Matrix, Pair, Row

_SLOTS = re.compile(r"@@(TITLE|DATA)@@")

#: JSON escapes that keep embedded data inert inside a <script> element.
_SCRIPT_SAFE = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def _finding(row: Row, new: bool) -> dict:
    return {**row_data(row), "new": new}


def _cell(pair: Pair | None, comparison: Comparison | None) -> dict | None:
    if pair is None:
        return None
    change = comparison.change(pair.client_spec, pair.release) if comparison else None
    new = {r.fingerprint for r in change.new} if change else set()
    return {
        "status": pair.status,
        "why": pair.why,
        "counts": [pair.errors, pair.warnings, pair.infos],
        "baseline": pair.baseline,
        "seconds": round(pair.seconds, 2),
        "findings": [_finding(r, r.fingerprint in new) for r in pair.findings],
        "change": None
        if change is None
        else {"was": change.was, "against": change.against, "worse": change.worse},
    }


def page_data(matrix: Matrix, comparison: Comparison | None = None) -> dict:
    """What the page's script renders: the header, the clients' rows of cells, the kinds."""
    first, last = matrix.run_span()
    kinds = sorted({r.kind for p in matrix.pairs.values() for r in p.findings})
    return {
        "host": matrix.host,
        "headline": headline(matrix),
        "releases": list(matrix.releases),
        "tools": matrix.tool_versions(),
        "run": [first, last],
        "kinds": kinds,
        "clients": [
            {
                "label": c.label,
                "spec": c.spec,
                "cells": [_cell(matrix.pair(c.spec, r), comparison) for r in matrix.releases],
            }
            for c in matrix.clients
        ],
        "compare": None
        if comparison is None
        else {
            "old": comparison.old,
            "worse": len(comparison.worse()),
            "breaks": len(comparison.breaks()),
            "new": comparison.new_findings(),
        },
    }


def script_json(data: object) -> str:
    """JSON that is safe as the text of a ``<script>`` element (and equal once parsed)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return re.sub("[<>&\u2028\u2029]", lambda m: _SCRIPT_SAFE[m.group()], text)


def render_html(matrix: Matrix, comparison: Comparison | None = None) -> str:
    """The whole page, one string."""
    template = resources.files("driftcheck.matrix").joinpath("page.html").read_text("utf-8")
    slots = {
        "TITLE": html.escape(f"driftcheck matrix: {matrix.host}"),
        "DATA": script_json(page_data(matrix, comparison)),
    }
    return _SLOTS.sub(lambda m: slots[m.group(1)], template)
