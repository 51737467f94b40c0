"""Attributes and methods read off a typed host receiver that the target class no longer has."""

from __future__ import annotations

from driftcheck.checks.context import CheckContext, finding
from driftcheck.checks.history import quoted, warned_before
from driftcheck.client.guards import same_expression
from driftcheck.client.use import Use
from driftcheck.findings import Finding, Fix
from driftcheck.host.api import Found


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report ``recv.member`` where ``member`` existed on the receiver's class at baseline only."""
    if not (use.receiver and use.member) or use.kind not in ("attribute", "call"):
        return []
    if ctx.lookup(ctx.target, use) is not None:
        return []
    if any(
        name == use.member and holds and same_expression(expr, use.receiver_expr or "")
        for expr, name, holds in use.guards
    ):
        return []  # ``if hasattr(x, "m"): x.m`` runs only where the member is there
    base = ctx.lookup(ctx.baseline, use) if ctx.baseline else None
    if ctx.baseline is not None and not isinstance(base, Found):
        return []
    if not ctx.once(use.file, f"{use.receiver}.{use.member}@{use.line}"):
        return []
    evidence = [ctx.evidence(ctx.baseline, base)] if ctx.baseline else []
    cls = ctx.target.resolve(use.receiver)
    if isinstance(cls, Found):
        evidence.append(ctx.evidence(ctx.target, cls, note=f"class without {use.member}"))
    short = use.receiver.rsplit(".", 1)[-1]
    via = f" ({use.via})" if use.via else ""
    before = warned_before(ctx.baseline, base)
    told = quoted(ctx.baseline.version, before) if ctx.baseline is not None else ""
    return [
        finding(
            use,
            "attribute-missing",
            symbol=f"{use.receiver}.{use.member}",
            message=(
                f"{use.receiver_expr or short}.{use.member}: {short} has no attribute "
                f"{use.member!r} in {ctx.target.name} {ctx.target.version}{via}{told}"
            ),
            evidence=tuple(e for e in evidence if e),
            fix=Fix(
                "manual",
                before[:200] or f"{short}.{use.member} was removed or renamed; use its replacement",
            ),
        )
    ]
