"""JSON report: the documented contract (``client``, ``host``, ``findings``) plus extras."""

from __future__ import annotations

import json
from typing import TextIO

from driftcheck.accepted import Triage
from driftcheck.pipeline import ScanResult


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
    json.dump(data, out, indent=2)
    out.write("\n")
