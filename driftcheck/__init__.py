"""driftcheck: find API drift between a client package and the host library it calls into.

The command line (``driftcheck``) is a thin layer over this API::

    from driftcheck import scan
    result = scan("speculators==0.3.0", against="vllm==0.16.0")
    for finding in result.findings:
        print(finding.file, finding.line, finding.kind, finding.message)
"""

from __future__ import annotations

from driftcheck.errors import DriftcheckError, FetchError, SourceError, UsageError
from driftcheck.findings import Evidence, Finding, Fix
from driftcheck.pipeline import ScanResult, scan
from driftcheck.sources.specs import PackageSpec, parse_spec

__all__ = [
    "DriftcheckError",
    "Evidence",
    "FetchError",
    "Finding",
    "Fix",
    "PackageSpec",
    "ScanResult",
    "SourceError",
    "UsageError",
    "parse_spec",
    "scan",
]
