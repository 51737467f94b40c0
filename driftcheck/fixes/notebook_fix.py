"""Fixes in notebooks: the edited code cells written back into the notebook's JSON.

Codemods edit a notebook's Python text (:mod:`driftcheck.client.notebooks`); what is written
is the notebook with only the changed cells' ``source`` replaced (outputs, metadata, ids and
the other cells untouched, in the file's own JSON style). A notebook's patch is a unified diff
of its JSON (``git apply`` and ``patch -p1`` take it), preceded by a readable header per changed
cell: ``# driftcheck: analysis.ipynb cell 3`` and the diff of that cell's source, each line
behind ``# `` (text before a diff's ``---`` line is ignored by both tools).
"""

from __future__ import annotations

import difflib

from driftcheck.client.notebooks import cell_source, changed_cells, write_back
from driftcheck.sources.trees import BOM


def on_disk(raw: str | None, old: str, new: str) -> tuple[str, str]:
    """The file's text before and after a fix: the notebook's JSON where ``raw`` is one, the
    code behind its BOM where ``raw`` starts with one (the analysed text has none)."""
    if raw is None:
        return old, new
    if raw.startswith(BOM):
        return raw, BOM + new
    return raw, write_back(raw, new)


def notebook_patch(rel: str, raw: str, new: str, diff: str) -> str:
    """The patch of a notebook: per changed cell a readable header, then ``diff`` (the
    unified diff of the JSON)."""
    head = []
    for n, source in sorted(changed_cells(raw, new).items()):
        head.append(f"# driftcheck: {rel} cell {n}\n")
        before = [line + "\n" for line in cell_source(raw, n)]
        after = [line + "\n" for line in source.splitlines()]
        for line in list(difflib.unified_diff(before, after, n=1))[2:]:
            head.append(f"# {line}" if line.endswith("\n") else f"# {line}\n")
    return "".join(head) + diff
