"""Call protocols mined from host facts: a host method that gained a mandatory follow-up.

For a client call ``recv.m(...)`` on a host class R, a follow-up ``s`` is mandatory on the
target when the host raises a guard whose message says ``s()`` must be called after ``m()``
(e.g. vLLM's "State error: sample_tokens() must be called after execute_model() returns None.")
and R offers ``s``. It is drift when R did not offer ``s`` at baseline. Reported when the client
does not call ``s`` on the same receiver in the same function. No host-specific code: the guard
text is the evidence.
"""

from __future__ import annotations

from driftcheck.checks.context import CheckContext, finding, is_literal
from driftcheck.checks.declaration import Check, CheckId, Runs
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding, Fix
from driftcheck.host.annotations import accepts_none, return_change
from driftcheck.host.api import Found
from driftcheck.host.callers import call_sites
from driftcheck.host.facts import Guard, all_guards, follow_up, new_members
from driftcheck.kinds import FixSafety, Kind, Severity, Witness

CALL_PROTOCOL = CheckId(
    Kind.CALL_PROTOCOL.value,
    Kind.CALL_PROTOCOL,
    Severity.ERROR,
    Witness.WORKLOAD,
    fixes=(FixSafety.SAFE, FixSafety.UNSAFE, FixSafety.MANUAL),
    codemods=("follow-up-call",),
)
#: What this check reports; :mod:`driftcheck.checks.catalog` lists it.
CHECK = Check(__name__, (CALL_PROTOCOL,), runs=Runs.WHOLE_CLIENT, entry="protocol_findings")


def _followed(use: Use, method: str, uses: list[Use]) -> bool:
    return any(
        u.kind == "call"
        and u.member == method
        and u.scope == use.scope
        and u.receiver_expr == use.receiver_expr
        for u in uses
    )


def protocol_findings(ctx: CheckContext) -> list[Finding]:
    """Findings for calls whose mandatory follow-up (per a host guard) is missing."""
    guards = None
    out: list[Finding] = []
    follow_ups: dict[str, dict[str, list[Guard]]] = {}  # method -> follow-up -> its guards
    for use in ctx.uses:
        if use.kind != "call" or not (use.receiver and use.member):
            continue
        cls = ctx.target.resolve(use.receiver)
        if not isinstance(cls, Found):
            continue
        if guards is None:
            guards = all_guards(ctx.target)
            if not guards:
                return []
        fresh = new_members(ctx.baseline, ctx.target, use.receiver) if ctx.baseline else None
        by_follow_up = follow_ups.get(use.member)
        if by_follow_up is None:  # once per method: transformers calls .to() thousands of times
            by_follow_up = follow_ups[use.member] = {}
            for guard in guards:
                then = follow_up(guard, use.member)
                if then is not None:
                    by_follow_up.setdefault(then, []).append(guard)
        for then, found_guards in sorted(by_follow_up.items()):
            method = ctx.target.class_member(cls, then)
            if not isinstance(method, Found) or method.kind != "function":
                continue
            if fresh is not None and then not in fresh:
                continue  # the protocol (or at least the follow-up) predates the baseline
            if fresh is None and not _reaches(ctx, cls, use.member, found_guards):
                continue  # without a baseline, report only a protocol the receiver is bound by
            if _followed(use, then, ctx.uses):
                continue
            # The guard inside the guarded method itself is the primary evidence.
            # Evidence order: a guard inside the guarded method, not in a sibling implementation
            # of the receiver's base class (what the receiver delegates to is stronger evidence).
            ordered = sorted(  # a copy: the method's next call reads its guards as found
                found_guards,
                key=lambda g: (g.function != use.member, _sibling(ctx, g, cls), g.file),
            )
            out.append(_finding(use, then, ordered, method, ctx))
    return out


def _reaches(ctx: CheckContext, cls: Found, method: str, guards: list[Guard]) -> bool:
    """Without a baseline: the guard sits in the receiver's own MRO, or the receiver's method
    says it may return None (the state is left for the follow-up)."""
    mro = {c.path for c in ctx.target.mro(cls)[0]}
    for g in guards:
        if g.cls and f"{ctx.target.tree.module_name(g.file)}.{g.cls}" in mro:
            return True
    target = ctx.target.class_member(cls, method)
    sig = ctx.target.signature(target) if isinstance(target, Found) else None
    returns = (sig.returns or "") if sig else ""
    return "None" in returns.replace("NoneType", "None")


def _sibling(ctx: CheckContext, guard: Guard, receiver: Found) -> bool:
    """True when the guard's class shares a base with the receiver's class but is another one."""
    if not guard.cls:
        return False
    path = f"{ctx.target.tree.module_name(guard.file)}.{guard.cls}"
    cls = ctx.target.resolve(path)
    if not isinstance(cls, Found):
        return False
    mine = {c.path for c in ctx.target.mro(receiver)[0]}
    theirs = {c.path for c in ctx.target.mro(cls)[0]}
    return cls.path not in mine and bool((mine - {receiver.path}) & theirs)


def _finding(use: Use, then: str, guards: list[Guard], method: Found, ctx: CheckContext) -> Finding:
    short = use.receiver.rsplit(".", 1)[-1] if use.receiver else ""
    guard = guards[0]
    evidence = [Evidence(ctx.target.version, g.file, g.line, "guard") for g in guards[:3]]
    evidence.append(Evidence(ctx.target.version, method.file, method.line, f"{short}.{then}"))
    note = ""
    if ctx.baseline is not None:
        base = ctx.lookup(ctx.baseline, use)
        target = ctx.lookup(ctx.target, use)
        if isinstance(base, Found):
            evidence.insert(
                0, Evidence(ctx.baseline.version, base.file, base.line, f"{short}.{use.member}")
            )
        if isinstance(base, Found) and isinstance(target, Found):
            sb, st = ctx.baseline.signature(base), ctx.target.signature(target)
            if (
                sb
                and st
                and return_change(sb.returns, st.returns) in ("gained-none", "became-none")
            ):
                note = f" {use.member}() may now return None (-> {st.returns})."
    fix, shown = _as_the_host_does(use, then, method, ctx)
    evidence.extend(shown)
    return finding(
        use,
        CALL_PROTOCOL,
        symbol=f"{use.receiver}.{use.member}",
        message=(
            f"{use.receiver_expr}.{use.member}(...) must now be followed by "
            f"{use.receiver_expr}.{then}(...) in {ctx.target.name} {ctx.target.version}; "
            f'the host raises "{guard.message}"{note}'
        ),
        evidence=tuple(evidence),
        fix=fix,
    )


def _as_the_host_does(
    use: Use, then: str, method: Found, ctx: CheckContext
) -> tuple[Fix, list[Evidence]]:
    """The follow-up call as the host's own callers make it (its arguments: a literal as
    written, a variable as ``None`` where the follow-up's parameter takes ``None``)."""
    manual = Fix(FixSafety.MANUAL, f"call {use.receiver_expr}.{then}(...) after {use.member}(...)")
    assert use.member is not None
    sites = [s for s in call_sites(ctx.target, use.member) if any(m == then for m, _ in s.then)]
    if not sites:
        return manual, []
    site = sites[0]
    args = next(a for m, a in site.then if m == then)
    sig = ctx.target.signature(method)
    slots = (
        [p for p in sig.params if p.kind in ("positional_only", "positional_or_keyword")]
        if sig
        else []
    )
    values = []
    for i, text in enumerate(args):
        if is_literal(text):
            values.append(text)
        elif i < len(slots) and accepts_none(slots[i].annotation):
            values.append("None")
        else:
            return manual, []
    shown = [
        Evidence(
            ctx.target.version, s.file, s.line, f"the host calls {then}() after {use.member}()"
        )
        for s in sites[:2]
    ]
    said = ", ".join(values)
    where = f"{site.file}:{site.line}"
    used = use.result not in (None, "discarded")
    return (
        Fix(
            FixSafety.UNSAFE if used else FixSafety.SAFE,
            f"call {then}({said}) on the same receiver right after {use.member}(), as "
            f"{ctx.target.name} itself does ({where})"
            + (f"; this call's result is {use.result}: check what the code needs" if used else ""),
            codemod="follow-up-call",
            params=(("method", then), ("args", said)),
        ),
        shown,
    )
