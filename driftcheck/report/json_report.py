"""JSON report: the documented contract (``client``, ``host``, ``findings``) plus extras."""

from __future__ import annotations

import json
from typing import TextIO

from driftcheck.pipeline import ScanResult


def render(result: ScanResult, out: TextIO, **_: object) -> None:
    """Write the scan result as JSON."""
    json.dump(result.to_dict(), out, indent=2)
    out.write("\n")
