"""The HTTP checks' entry: a use that is no HTTP use (a request, a response read, a server
launch) is answered here, so a scan of a client that never talks to the host's server loads
none of the HTTP checks or the host's HTTP-surface reader."""

from __future__ import annotations

import importlib

from driftcheck.checks.context import CheckContext
from driftcheck.client.http.use import HttpUse
from driftcheck.client.use import Use
from driftcheck.findings import Finding

#: The checks this entry runs, in order (routes, request bodies, response reads, launch flags).
MODULES = (
    "driftcheck.checks.http_routes",
    "driftcheck.checks.http_request",
    "driftcheck.checks.http_response",
    "driftcheck.checks.http_flags",
)


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Every HTTP check of one HTTP use."""
    if not isinstance(use, HttpUse):
        return []
    out: list[Finding] = []
    for name in MODULES:
        out.extend(importlib.import_module(name).check(use, ctx))
    return out
