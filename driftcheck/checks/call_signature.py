"""Call-site signature drift: calls that bound at baseline and cannot bind on the target.

Dataclass and pydantic-dataclass constructors are checked against their synthesised
``__init__`` (fields and ``InitVar``s), so a field that lost its default is caught.

The fix is the host's own edit where it shows one (``host.call_edits``): a keyword every host
call of the callable dropped with nothing in its place, or the value the host's calls pass for a
new required parameter, written in the client's own arguments.
"""

from __future__ import annotations

from driftcheck.checks.context import CheckContext, finding, side
from driftcheck.checks.declaration import Check, CheckId
from driftcheck.checks.history import keyword_warned_before, quoted
from driftcheck.checks.positional import rebound
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding, Fix
from driftcheck.host.annotations import same_type
from driftcheck.host.api import Found, Lookup
from driftcheck.host.call_edits import host_dropped, host_values
from driftcheck.host.callers import migrated_keyword, prefetch_keyword_calls
from driftcheck.host.signature import CallShape, Signature, bind
from driftcheck.kinds import FixSafety, Kind, Severity, Witness

CALL_SIGNATURE = CheckId(
    Kind.CALL_SIGNATURE.value,
    Kind.CALL_SIGNATURE,
    Severity.ERROR,
    Witness.BIND,
    fixes=(FixSafety.SAFE, FixSafety.UNSAFE, FixSafety.MANUAL),
    codemods=("rename-keyword", "remove-keyword", "add-keyword"),
)
#: What this check reports; :mod:`driftcheck.checks.catalog` lists it.
CHECK = Check(__name__, (CALL_SIGNATURE,))


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report new binding problems of a call (unexpected keyword, missing required, too many)."""
    if use.kind != "call" or use.shape is None or ctx.replaced_by_client(use):
        return []  # a call the client's own replacement takes is bound to its signature
    target = ctx.lookup(ctx.target, use)
    if not isinstance(target, Found):
        return []
    sig_t = ctx.target.signature(target)
    if sig_t is None:
        return []
    shape = use.shape.on(side(ctx.target))
    problems = bind(sig_t, shape)
    base_ev: Evidence | None = None
    base: Lookup = None
    sig_b = None
    if ctx.baseline is not None:
        base = ctx.lookup(ctx.baseline, use)
        sig_b = ctx.baseline.signature(base) if isinstance(base, Found) else None
        if sig_b is None:
            return []
        before = set(bind(sig_b, use.shape.on(side(ctx.baseline))))
        problems = [p for p in problems if p not in before]
        base_ev = Evidence(ctx.base.version, sig_b.file, sig_b.line)
    if any(p.code in ("too-many-positional", "missing-required") for p in problems):
        # What a positional shift explains, ``positional-shift`` says (one finding per cause):
        # arguments that no longer have a slot, and parameters the shifted ones used to fill.
        moved, *_ = rebound(use, ctx)
        refilled = {r.before.name for r in moved}
        problems = [
            p
            for p in problems
            if not (
                p.code == "too-many-positional"
                and any(r.how in ("keyword-only", "var-positional") for r in moved)
            )
            and not (p.code == "missing-required" and p.param in refilled)
        ]
    if not problems:
        return []
    name = use.symbol.rsplit(".", 1)[-1] if not use.member else use.member
    details = "; ".join(p.detail for p in problems)
    renames = _renames(problems, ctx, base, sig_b, sig_t)
    told = "".join(
        quoted(ctx.base.version, said)
        if said
        else f"; a decorator in {ctx.base.version} took {old} for {new}"
        if how == "decorator"
        else f"; the host's own {_site(how)[0]}() passes {new} where it passed {old}"
        for old, (said, new, how) in renames.items()
    )
    arrived = (
        [p.name for p in sig_t.params if sig_b.param(p.name) is None and p.kind != "var_keyword"]
        if sig_b is not None
        else []
    )
    fix = _fix_for(problems, renames, arrived)
    evidence = [e for e in (base_ev,) if e]
    evidence.append(Evidence(ctx.target.version, sig_t.file, sig_t.line))
    if (
        sig_b is not None
        and isinstance(base, Found)
        and not any(new for _, new, _ in renames.values())
    ):
        _prefetch_host_calls(ctx)
        edited = _host_edit(problems, ctx, (base.path, target.path), (sig_b, sig_t), shape)
        if edited is not None:
            fix, host_evidence = edited
            evidence += host_evidence
    for old, (_, new, how) in renames.items():
        function, where = _site(how)
        if function:
            file, line = where.rsplit(":", 1)
            note = f"{function}() passes {new}= where it passed {old}="
            evidence.append(Evidence(ctx.target.version, file, int(line), note))
    return [
        finding(
            use,
            CALL_SIGNATURE,
            symbol=target.path,
            message=(
                f"{name}(...) no longer binds in {ctx.target.name} {ctx.target.version}: "
                f"{details}{told}"
            ),
            evidence=tuple(evidence),
            fix=fix,
            at=shape.span_of(problems[0]),
        )
    ]


def _renames(
    problems: list, ctx: CheckContext, base: Lookup, sig_b: Signature | None, sig_t: Signature
) -> dict[str, tuple[str, str, str]]:
    """Removed keywords the host maps to a new one: keyword -> (baseline's message, new name,
    evidence). The evidence is the baseline's deprecation naming the new keyword, or the
    signature: a new parameter in the removed one's place, of the same kind and default."""
    out: dict[str, tuple[str, str, str]] = {}
    for problem in problems:
        if problem.code != "unexpected-keyword":
            continue
        said, new = keyword_warned_before(ctx.baseline, base, problem.param)
        how = "message" if new else ""
        alias = sig_b.param(problem.param) if sig_b is not None else None
        if not new and alias is not None and alias.alias_of:
            new, how = alias.alias_of, "decorator"  # the baseline's decorator mapped it
        if not new and sig_b is not None and isinstance(base, Found):
            gone = {p.name for p in sig_b.params if sig_t.param(p.name) is None}
            came = {p.name for p in sig_t.params if sig_b.param(p.name) is None}
            name = base.path.rsplit(".", 1)[-1]
            new, site = migrated_keyword(ctx.base, ctx.target, name, problem.param, gone, came)
            how = f"callers:{site.function}:{site.file}:{site.line}" if site else ""
        if new and sig_t.param(new) is None:
            new, how = "", ""
        old_param = sig_b.param(problem.param) if sig_b is not None else None
        new_param = sig_t.param(new) if new else None
        if how in ("message", "decorator") and not (
            old_param and new_param and same_type(old_param, new_param)
        ):
            how = "message-other-type"
        if said or new:
            out[problem.param] = (said, new, how)
    return out


def _site(how: str) -> tuple[str, str]:
    """(function, file:line) of a rename the host's own callers made; empty otherwise."""
    if not how.startswith("callers:"):
        return "", ""
    _, function, where = how.split(":", 2)
    return function, where


def _fix_for(
    problems: list,
    renames: dict[str, tuple[str, str, str]] | None = None,
    arrived: list[str] | None = None,
) -> Fix:
    """The fix for a call that no longer binds. Dropping a keyword drops its value: where the
    host gained parameters meanwhile, one may be its new name (pydantic 2's ``constr(regex=)``
    became ``pattern=``), so the drop is left to a person."""
    renames = renames or {}
    removed = [p.param for p in problems if p.code == "unexpected-keyword"]
    missing = [p.param for p in problems if p.code == "missing-required"]
    mapped = [k for k in removed if renames.get(k, ("", "", ""))[1]]
    if mapped and mapped == removed and len(problems) == len(removed):
        pairs = [(old, renames[old][1], renames[old][2]) for old in mapped]
        safe = all(how in ("message", "decorator") for _, _, how in pairs)
        said = ", ".join(f"{old} to {new}" for old, new, _ in pairs)
        sites = [f"{_site(how)[0]} at {_site(how)[1]}" for _, _, how in pairs if _site(how)[0]]
        why = (
            "the host's deprecation names them, for values of the same type"
            if safe
            else "the host's own callers made that change, " + ", ".join(sites)
            if sites
            else "the host names them; the values' types may differ"
        )
        params: list[tuple[str, str]] = []
        for i, (old, new, _) in enumerate(pairs):
            params += [(f"keyword{i or ''}", old), (f"new{i or ''}", new)]
        return Fix(
            FixSafety.SAFE if safe else FixSafety.UNSAFE,
            f"rename the keyword(s) {said} ({why})",
            codemod="rename-keyword",
            params=tuple(params),
        )
    if removed and not missing and len(problems) == len(removed) and arrived:
        return Fix(
            FixSafety.MANUAL,
            f"{', '.join(removed)}= is gone; the host added {', '.join(arrived[:6])}: pass the "
            "value to the one that took its place, or drop it if none did",
        )
    if removed and not missing and len(problems) == len(removed):
        return Fix(
            FixSafety.UNSAFE,
            f"drop the keyword(s) {', '.join(removed)} (the host no longer takes them)",
            codemod="remove-keyword",
            params=tuple((f"keyword{i or ''}", k) for i, k in enumerate(removed)),
        )
    if missing:
        return Fix(FixSafety.MANUAL, f"pass the new required parameter(s): {', '.join(missing)}")
    return Fix(FixSafety.MANUAL, "adapt the call to the new signature")


def _prefetch_host_calls(ctx: CheckContext) -> None:
    """Before the first host edit a scan reads: the callables of every call of the client that
    stops binding, so that the host's calls of all of them are mined in one pass over each
    release's files instead of one pass per callable (the lookups are the ones the check makes
    anyway, and are memoised)."""
    if ctx.__dict__.get("_host_calls_prefetched") or ctx.baseline is None:
        return
    ctx.__dict__["_host_calls_prefetched"] = True
    names: tuple[set[str], set[str]] = (set(), set())
    for use in ctx.uses:
        if use.kind != "call" or use.shape is None or ctx.replaced_by_client(use):
            continue
        target = ctx.lookup(ctx.target, use)
        sig_t = ctx.target.signature(target) if isinstance(target, Found) else None
        if sig_t is None:
            continue
        base = ctx.lookup(ctx.baseline, use)
        sig_b = ctx.baseline.signature(base) if isinstance(base, Found) else None
        if sig_b is None:
            continue
        before = set(bind(sig_b, use.shape.on(side(ctx.baseline))))
        if any(
            p.code in ("unexpected-keyword", "missing-required") and p not in before
            for p in bind(sig_t, use.shape.on(side(ctx.target)))
        ):
            assert isinstance(base, Found) and isinstance(target, Found)
            names[0].add(base.path.rsplit(".", 1)[-1])
            names[1].add(target.path.rsplit(".", 1)[-1])
    prefetch_keyword_calls(ctx.baseline, names[0])
    prefetch_keyword_calls(ctx.target, names[1])


def _host_edit(
    problems: list,
    ctx: CheckContext,
    paths: tuple[str, str],
    sigs: tuple[Signature, Signature],
    shape: CallShape,
) -> tuple[Fix, list[Evidence]] | None:
    """The fix the host's own calls show (``host.call_edits``): keywords every host call dropped
    with nothing in their place, or the value the host passes for one new required parameter.
    None where the host's calls show nothing, or disagree."""
    assert ctx.baseline is not None
    names = (paths[0].rsplit(".", 1)[-1], paths[1].rsplit(".", 1)[-1])
    sig_b, sig_t = sigs
    base_v, target_v = ctx.base.version, ctx.target.version
    removed = [p.param for p in problems if p.code == "unexpected-keyword"]
    missing = [p.param for p in problems if p.code == "missing-required"]
    if removed and len(removed) == len(problems):
        drops = {k: host_dropped(ctx.baseline, ctx.target, names, sigs, k) for k in removed}
        if not all(drops.values()):
            return None
        # The host's calls no longer need the value; the client's value changes nothing only
        # where the parameter had none of its own (required) or the client passes its default.
        safe = all(
            (old := sig_b.param(k)) is not None
            and (old.required or (old.default is not None and shape.literal(k) == old.default))
            for k in removed
        )
        first = {k: d[0] for k, d in drops.items()}
        cited = ", ".join(
            f"{d.after.function}() at {d.before.file}:{d.before.line} ({base_v}) and "
            f"{d.after.file}:{d.after.line} ({target_v})"
            for d in first.values()
        )
        why = "" if safe else "; the client's value may still mean something the callable did"
        evidence = [
            e
            for d in first.values()
            for e in (
                Evidence(base_v, d.before.file, d.before.line, f"{d.before.function}() passes it"),
                Evidence(target_v, d.after.file, d.after.line, f"{d.after.function}() dropped it"),
            )
        ]
        return (
            Fix(
                FixSafety.SAFE if safe else FixSafety.UNSAFE,
                f"drop the keyword(s) {', '.join(removed)} (the host's own call dropped it and "
                f"passes nothing in its place: {cited}{why})",
                codemod="remove-keyword",
                params=tuple((f"keyword{i or ''}", k) for i, k in enumerate(removed)),
            ),
            evidence,
        )
    if len(missing) != 1 or len(problems) != 1:
        return None
    param = missing[0]
    values = host_values(ctx.target, names[1], sig_t, param)
    if not values:
        return None
    cites = [
        Evidence(
            target_v, v.call.file, v.call.line, f"{v.call.function}() passes {param}={v.source}"
        )
        for v in values[:3]
    ]
    passed = set(shape.keywords)
    fits = [v for v in values if v.complete and set(v.uses) <= passed]
    if fits and len(fits) == len(values) and len({v.template for v in values}) == 1:
        template, safe = fits[0].template, True  # every host call passes it, in these terms
    elif len({v.template for v in fits if param in v.call.filled}) == 1:
        # Calls disagree, but a factory fills the value in for callers that leave it out.
        template, safe = next(v.template for v in fits if param in v.call.filled), False
    else:
        shown = "; ".join(
            f"{v.source} ({v.call.function}() at {v.call.file}:{v.call.line})" for v in values[:3]
        )
        return (
            Fix(
                FixSafety.MANUAL,
                f"pass the new required parameter {param}: the host's own calls pass {shown}",
            ),
            cites,
        )
    shown = template.replace("{arg:", "<").replace("}", ">")
    site = next(v.call for v in fits if v.template == template and (safe or param in v.call.filled))
    why = "" if safe else " for callers that leave it out; other host calls pass their own value"
    return (
        Fix(
            FixSafety.SAFE if safe else FixSafety.UNSAFE,
            f"pass {param}={shown}, as the host's own {site.function}() does "
            f"({site.file}:{site.line}){why}",
            codemod="add-keyword",
            params=(("keyword", param), ("value", template)),
        ),
        cites,
    )
