"""Return-semantics drift: a call whose result is used, where the return annotation changed shape.

griffe treats return changes as compatible; a caller that subscripts, unpacks or reads an
attribute off the result is broken when the return gained ``None``, became ``None``, or
changed from a container to an item (or back).
"""

from __future__ import annotations

from driftcheck.checks.context import CheckContext, finding
from driftcheck.checks.declaration import Check, CheckId
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding, Fix
from driftcheck.host.annotations import return_change
from driftcheck.host.api import Found, HostAPI
from driftcheck.host.facts import always_returns_none
from driftcheck.kinds import FixSafety, Kind, Severity, Witness

RETURN_SEMANTICS = CheckId(
    Kind.RETURN_SEMANTICS.value,
    Kind.RETURN_SEMANTICS,
    Severity.ERROR,
    Witness.WORKLOAD,
    fixes=(FixSafety.MANUAL,),
)
#: What this check reports; :mod:`driftcheck.checks.catalog` lists it.
CHECK = Check(__name__, (RETURN_SEMANTICS,))

MESSAGES = {
    "became-none": "now returns None",
    "gained-none": "may now return None",
    "container-to-item": "now returns a single item instead of a container",
    "item-to-container": "now returns a container instead of a single item",
}


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report a used result whose return annotation changed shape between baseline and target."""
    if use.kind != "call" or ctx.baseline is None or use.result in (None, "discarded"):
        return []
    target = ctx.lookup(ctx.target, use)
    base = ctx.lookup(ctx.baseline, use)
    if not (isinstance(target, Found) and isinstance(base, Found)):
        return []
    if target.kind != "function" or base.kind != "function":
        return []
    sig_t, sig_b = ctx.target.signature(target), ctx.baseline.signature(base)
    if sig_t is None or sig_b is None:
        return []
    change = return_change(sig_b.returns, sig_t.returns)
    if (
        change is None
        and (use.result in ("subscripted", "attribute", "iterated") or use.result_indexed)
        and "None" not in (sig_b.returns or "")
        and _now_always_none(ctx, base, target)
    ):
        change = "became-none"  # the body says so even where the annotation does not
    if change is None:
        return []
    if change == "container-to-item" and use.result == "attribute" and not use.result_indexed:
        return []  # an attribute read off the bare item: what the target wants (fixed code)
    name = use.member or use.symbol.rsplit(".", 1)[-1]
    return [
        finding(
            use,
            RETURN_SEMANTICS,
            severity=Severity.ERROR if change != "gained-none" else Severity.WARNING,
            symbol=target.path,
            message=(
                f"{name}() {MESSAGES[change]} in {ctx.target.name} {ctx.target.version} "
                f"(-> {sig_b.returns} became -> {sig_t.returns}); the result is {use.result}"
            ),
            evidence=(
                Evidence(ctx.baseline.version, sig_b.file, sig_b.line, f"-> {sig_b.returns}"),
                Evidence(ctx.target.version, sig_t.file, sig_t.line, f"-> {sig_t.returns}"),
            ),
            fix=Fix(FixSafety.MANUAL, "handle the new return shape at this call site"),
        )
    ]


def _now_always_none(ctx: CheckContext, base: Found, target: Found) -> bool:
    """The body now returns only None (whatever the annotation says) and did not before."""
    return _always_none(ctx.target, target) is True and _always_none(ctx.baseline, base) is False


def _always_none(api: HostAPI | None, found: Found) -> bool | None:
    """Whether a host function only ever returns None (kept in the snapshot; None: unknown)."""
    if api is None:
        return None

    def compute() -> bool | None:
        node = api.def_node(found)
        return None if node is None else always_returns_none(node)

    return api.fact(f"always-none:{found.path}:{found.line}", compute)
