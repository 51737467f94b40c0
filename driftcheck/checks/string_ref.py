"""String references: host code named in strings.

* A dotted path into the host (``"vllm.x.Y"``) passed to the host is checked like an import.
* A method name passed to a dispatching host method (binding rules say which:
  ``collective_rpc("name")`` runs ``name`` on the worker class) must still exist on that class
  on the target (or in a client class mixed into it).
"""

from __future__ import annotations

from driftcheck.checks.context import CheckContext, finding
from driftcheck.checks.declaration import Check, CheckId
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding, Fix
from driftcheck.host.api import Found, HostAPI
from driftcheck.kinds import FixSafety, Kind, Severity, Witness

STRING_REF = CheckId(
    Kind.STRING_REF.value,
    Kind.STRING_REF,
    Severity.ERROR,
    Witness.RESOLVE,
    fixes=(FixSafety.MANUAL,),
)
#: What this check reports; :mod:`driftcheck.checks.catalog` lists it.
CHECK = Check(__name__, (STRING_REF,))


def _dispatch_target(api: HostAPI, callee: str, dispatch: dict[str, str]) -> str | None:
    owner, _, method = callee.rpartition(".")
    cls = api.resolve(owner)
    if not isinstance(cls, Found):
        return None
    mro = {c.path for c in api.mro(cls)[0]}
    for key, target in dispatch.items():
        k_owner, _, k_method = key.rpartition(".")
        if k_method == method and k_owner in mro:
            return target
    return None


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report a string naming host code that the target no longer has."""
    if use.kind != "string-ref" or not use.member:
        return []
    value = use.member
    if "." in value:
        if not ctx.target.owns(value) or value in ctx.client_names:
            return []
        if ctx.target.resolve(value) is not None:
            return []
        if ctx.baseline is not None and not isinstance(ctx.baseline.resolve(value), Found):
            return []
        return [_finding(use, ctx, value, f'"{value}" names {value}, which does not exist')]
    cls_path = _dispatch_target(ctx.target, use.symbol, ctx.bindings.dispatch)
    if cls_path is None:
        return []
    if value in ctx.mixed_methods.get(cls_path, set()):
        return []
    cls = ctx.target.resolve(cls_path)
    if not isinstance(cls, Found) or ctx.target.class_member(cls, value) is not None:
        return []
    base_ev = None
    if ctx.baseline is not None:
        bcls = ctx.baseline.resolve(cls_path)
        got = ctx.baseline.class_member(bcls, value) if isinstance(bcls, Found) else None
        if not isinstance(got, Found):
            return []
        base_ev = ctx.evidence(ctx.baseline, got)
    short = cls_path.rsplit(".", 1)[-1]
    msg = f'"{value}" is dispatched to {short}.{value}, which does not exist'
    return [
        _finding(
            use,
            ctx,
            f"{cls_path}.{value}",
            msg,
            base_ev,
            ctx.evidence(ctx.target, cls, f"{short} without {value}"),
        )
    ]


def _finding(
    use: Use, ctx: CheckContext, symbol: str, msg: str, *evidence: Evidence | None
) -> Finding:
    return finding(
        use,
        STRING_REF,
        symbol=symbol,
        message=f"{msg} in {ctx.target.name} {ctx.target.version}",
        evidence=tuple(e for e in evidence if e),
        fix=Fix(FixSafety.MANUAL, "name the method or class that replaced it"),
    )
