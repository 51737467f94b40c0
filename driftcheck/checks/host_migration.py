"""Migrations the host made in its own code: a result the host's own callers stopped unwrapping.

For a client call ``recv.m(...)`` whose result the client indexes ``[0]``, the host's own call
sites of ``.m(...)`` are read in both releases (:mod:`driftcheck.host.callers`), limited to
those that pass the keywords of the client's call the host's sites distinguish by (``unique_
reply_rank=``) and that use the result. When every such site took element ``[0]`` at baseline
(``f()[0]``, ``(x,) = f()``, a variable indexed ``[0]``) and none does on the target, the host
migrated its callers: the result is now the item itself, and the client's ``[0]`` takes the
first element of the item. The host's call sites in both releases are the evidence; the fix is
the host's own before/after: use the result directly.
"""

from __future__ import annotations

from driftcheck.checks.context import CheckContext, finding
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding, Fix
from driftcheck.host.callers import CallSite, call_sites


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report ``[0]`` on a result the host's own callers stopped unwrapping."""
    if use.kind != "call" or not use.member or not use.result_indexed or ctx.baseline is None:
        return []
    if use.receiver is None:
        return []
    before = [s for s in call_sites(ctx.baseline, use.member) if s.result != "discarded"]
    if not any(s.unwrapped for s in before):
        return []
    after = [s for s in call_sites(ctx.target, use.member) if s.result != "discarded"]
    keys = _keys(use, before + after)
    was = [s for s in before if keys <= set(s.keywords)]
    now = [s for s in after if keys <= set(s.keywords)]
    if not was or not now or not all(s.unwrapped for s in was) or any(s.unwrapped for s in now):
        return []
    how = (
        f"{use.member}(..., {', '.join(f'{k}=...' for k in sorted(keys))})"
        if keys
        else (f"{use.member}(...)")
    )
    b, t = was[0], now[0]
    return [
        finding(
            use,
            "host-migration",
            symbol=f"{use.receiver}.{use.member}",
            message=(
                f"{how} now returns the item itself: {ctx.target.name}'s own callers took "
                f"element [0] of its result in {ctx.baseline.version} ({b.file}:{b.line}) and "
                f"use it directly in {ctx.target.version} ({t.file}:{t.line}); indexing it "
                "takes the first element of the item"
            ),
            evidence=(
                *(Evidence(ctx.baseline.version, s.file, s.line, "unwraps [0]") for s in was[:3]),
                *(Evidence(ctx.target.version, s.file, s.line, "uses it whole") for s in now[:3]),
            ),
            fix=Fix(
                "safe",
                f"use the result directly, as {ctx.target.name}'s own callers do",
                codemod="unwrap-result",
            ),
        )
    ]


def _keys(use: Use, sites: list[CallSite]) -> set[str]:
    """The client's keywords that the host's own sites pass too: the calls alike the client's."""
    mine = set(use.shape.keywords) if use.shape else set()
    return {k for k in mine if any(k in s.keywords for s in sites)}
