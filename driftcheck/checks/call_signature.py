"""Call-site signature drift: calls that bound at baseline and cannot bind on the target.

Dataclass and pydantic-dataclass constructors are checked against their synthesised
``__init__`` (fields and ``InitVar``s), so a field that lost its default is caught.
"""

from __future__ import annotations

from driftcheck.checks.context import CheckContext, finding, side
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding, Fix
from driftcheck.host.api import Found
from driftcheck.host.signature import bind


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report new binding problems of a call (unexpected keyword, missing required, too many)."""
    if use.kind != "call" or use.shape is None:
        return []
    target = ctx.lookup(ctx.target, use)
    if not isinstance(target, Found):
        return []
    sig_t = ctx.target.signature(target)
    if sig_t is None:
        return []
    shape = use.shape.on(side(ctx.target))
    problems = bind(sig_t, shape)
    base_ev: Evidence | None = None
    if ctx.baseline is not None:
        base = ctx.lookup(ctx.baseline, use)
        sig_b = ctx.baseline.signature(base) if isinstance(base, Found) else None
        if sig_b is None:
            return []
        before = set(bind(sig_b, use.shape.on(side(ctx.baseline))))
        problems = [p for p in problems if p not in before]
        base_ev = Evidence(ctx.baseline.version, sig_b.file, sig_b.line)
    if not problems:
        return []
    name = use.symbol.rsplit(".", 1)[-1] if not use.member else use.member
    details = "; ".join(p.detail for p in problems)
    fix = _fix_for(problems)
    evidence = [e for e in (base_ev,) if e]
    evidence.append(Evidence(ctx.target.version, sig_t.file, sig_t.line))
    return [
        finding(
            use,
            "call-signature",
            symbol=target.path,
            message=f"{name}(...) no longer binds in {ctx.target.name} {ctx.target.version}: {details}",
            evidence=tuple(evidence),
            fix=fix,
            at=shape.span_of(problems[0]),
        )
    ]


def _fix_for(problems: list) -> Fix:
    removed = [p.param for p in problems if p.code == "unexpected-keyword"]
    missing = [p.param for p in problems if p.code == "missing-required"]
    if removed and not missing and len(problems) == len(removed):
        return Fix(
            "unsafe",
            f"drop the keyword(s) {', '.join(removed)} (the host no longer takes them)",
            codemod="remove-keyword",
            params=tuple((f"keyword{i or ''}", k) for i, k in enumerate(removed)),
        )
    if missing:
        return Fix("manual", f"pass the new required parameter(s): {', '.join(missing)}")
    return Fix("manual", "adapt the call to the new signature")
