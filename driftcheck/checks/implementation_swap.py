"""Implementation swaps: a config switch makes a host attribute hold another class.

Mined from the host (``self.x = A(...)`` under one condition, ``B(...)`` under another, or a
factory whose returns differ): when the client reads ``obj.x.member`` and an alternative class
that is new since the baseline lacks ``member``, the client breaks whenever the switch selects
it. Reported as information (the switch may be off by default); rules raise the severity for
releases where the default flips.
"""

from __future__ import annotations

from driftcheck.checks.context import CheckContext, finding
from driftcheck.checks.declaration import Check, CheckId
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding, Fix
from driftcheck.host.api import Found, HostAPI
from driftcheck.kinds import FixSafety, Kind, Severity, Witness

IMPLEMENTATION_SWAP = CheckId(
    "implementation-swap",
    Kind.BEHAVIOUR_CHANGE,
    Severity.INFO,
    Witness.WORKLOAD,
    fixes=(FixSafety.MANUAL,),
)
#: What this check reports; :mod:`driftcheck.checks.catalog` lists it.
CHECK = Check(__name__, (IMPLEMENTATION_SWAP,))


def alternatives(api: HostAPI, holder: str) -> list[tuple[str, str, int]]:
    """(class path, condition, line) of the classes a host attribute may hold."""
    owner_path, _, attr = holder.rpartition(".")
    owner = api.resolve(owner_path)
    if not isinstance(owner, Found):
        return []
    for klass in api.mro(owner)[0]:
        found = klass.obj.extra.get("driftcheck", {}).get("alternatives", {}).get(attr)
        if found:
            return [tuple(a) for a in found]
    return []


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report a member read off an attribute whose new alternative class lacks it."""
    if not (use.holder and use.member and use.receiver):
        return []
    alts = alternatives(ctx.target, use.holder)
    if len(alts) < 2:
        return []
    if ctx.lookup(ctx.target, use) is None:
        return []  # missing on the annotated class too: attribute-missing reports it once
    before = {a[0] for a in alternatives(ctx.baseline, use.holder)} if ctx.baseline else set()
    out = []
    for path, condition, line in alts:
        if path == use.receiver or path in before:
            continue
        cls = ctx.target.resolve(path)
        if not isinstance(cls, Found) or ctx.target.defined_in_host_mro(cls, use.member):
            continue
        short = path.rsplit(".", 1)[-1]
        owner_file = ctx.target.resolve(use.holder.rpartition(".")[0])
        evidence = [
            Evidence(ctx.target.version, cls.file, cls.line, f"{short} without {use.member}")
        ]
        if isinstance(owner_file, Found):
            evidence.insert(
                0, Evidence(ctx.target.version, owner_file.file, line, f"when {condition}")
            )
        out.append(
            finding(
                use,
                IMPLEMENTATION_SWAP,
                symbol=f"{use.holder}.{use.member}",
                message=(
                    f"{use.receiver_expr}.{use.member}: when {condition or 'selected'}, "
                    f"{use.holder.rsplit('.', 2)[-2]}.{use.holder.rsplit('.', 1)[-1]} is a {short} "
                    f"({path}), which has no {use.member!r} ({ctx.target.name} {ctx.target.version})"
                ),
                evidence=tuple(evidence),
                fix=Fix(FixSafety.MANUAL, f"do not rely on {use.member} there, or pin the switch"),
            )
        )
        break
    return out
