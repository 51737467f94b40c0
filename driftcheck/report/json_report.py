"""JSON report: the documented contract (``client``, ``host``, ``findings``) plus extras."""

from __future__ import annotations

import json
from typing import TextIO

from driftcheck.accepted import Triage
from driftcheck.report.locations import cell_location
from driftcheck.result import ScanResult


def render(result: ScanResult, out: TextIO, *, triage: Triage | None = None, **_: object) -> None:
    """Write the scan result as JSON.

    With an accepted-drift triage, ``accepted`` lists the findings it silenced (with their
    reasons) and ``stale`` its entries that no longer occur.
    """
    data = result.to_dict()
    if triage is not None:
        data["accepted_file"] = str(triage.path) if triage.path else None
        data["accepted"] = [{**f.to_dict(), "reason": e.reason} for f, e in triage.accepted]
        data["stale"] = [e.to_dict() for e in triage.stale]
    groups = [data["findings"], data.get("accepted", [])]
    for package in data.get("packages", []):
        package["findings"] = [
            f for f in data["findings"] if f["file"].startswith(package["path"] + "/")
        ]
    for item in (f for group in groups for f in group):
        with_cell(result, item)
    json.dump(data, out, indent=2)
    out.write("\n")


def with_cell(result: ScanResult, item: dict) -> None:
    """A notebook finding's cell: ``cell`` (its number in the notebook, from 1, markdown cells
    counted), ``cell_line`` and ``cell_end_line`` (lines within the cell); ``line`` stays the
    line of the notebook's code as driftcheck reads it (every code cell after a marker line)."""
    cell = cell_location(result, item.get("file", ""), item.get("line", 0))
    if cell is None:
        return
    item["cell"], item["cell_line"] = cell
    item["cell_end_line"] = cell[1] + max(item.get("end_line", 0) - item["line"], 0)
