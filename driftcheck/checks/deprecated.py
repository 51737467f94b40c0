"""Deprecations: a host function or property the client uses that now warns it is deprecated.

Read from the body (``warnings.warn(..., DeprecationWarning)``, ``@deprecated``): the code still
works, so this is a warning, and only when the baseline did not already warn.
"""

from __future__ import annotations

from driftcheck.checks.context import CheckContext, finding
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding, Fix
from driftcheck.host.api import Found
from driftcheck.host.facts import deprecations


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report a use of a host function that became deprecated."""
    if use.kind not in ("call", "attribute"):
        return []
    target = ctx.lookup(ctx.target, use)
    if not isinstance(target, Found) or target.kind != "function":
        return []
    notes = deprecations(ctx.target, target)
    if not notes:
        return []
    if ctx.baseline is not None:
        base = ctx.lookup(ctx.baseline, use)
        if not isinstance(base, Found) or deprecations(ctx.baseline, base):
            return []
    name = use.member or use.symbol.rsplit(".", 1)[-1]
    return [
        finding(
            use,
            "deprecated",
            symbol=target.path,
            message=f"{name} is deprecated in {ctx.target.name} {ctx.target.version}: {notes[0][:200]}",
            evidence=(Evidence(ctx.target.version, target.file, target.line, "deprecation"),),
            fix=Fix("manual", "move to the replacement the deprecation message names"),
        )
    ]
