"""Migrations the host made in its own code: a result its own callers stopped unwrapping, a
keyword all of its own callers started passing, a result they started testing for None.

For a client call ``recv.m(...)`` whose result the client indexes ``[0]``, the host's own call
sites of ``.m(...)`` are read in both releases (:mod:`driftcheck.host.callers`), limited to
those that pass the keywords of the client's call the host's sites distinguish by (``unique_
reply_rank=``) and that use the result. When every such site took element ``[0]`` at baseline
(``f()[0]``, ``(x,) = f()``, a variable indexed ``[0]``) and none does on the target, the host
migrated its callers: the result is now the item itself, and the client's ``[0]`` takes the
first element of the item. The host's call sites in both releases are the evidence; the fix is
the host's own before/after: use the result directly.

When the method's signature changed and every one of the host's own calls of ``.m(...)`` on the
target passes a keyword that none of them passed at baseline (at least two calls on the
target), and the client's call does not, the host changed how the method is meant to be called:
a warning, with the host's value as an (unsafe) fix where all its calls pass the same literal.
When most of the host's own calls that keep the result of a method whose signature changed
(at least two) test it for None on the target and none did at baseline, a client call that
reads an attribute, an item or the elements of the result as is gets a warning.

Only methods whose signature changed, and those whose result the client indexes, are searched
for: all of them in one pass per release. A method named like a method of Python's own types
(``append``, ``items``, ``split``, ``__init__``) is never searched for: the host's calls of
``.items(...)`` are mostly calls of ``dict.items``, which tell nothing of the host's own method
(and searching for them read most of a large host's functions: 45% of torch 2.6's).
"""

from __future__ import annotations

from typing import cast

from driftcheck.checks.context import CheckContext, finding, is_literal
from driftcheck.checks.declaration import Check, CheckId
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding, Fix
from driftcheck.host.api import Found
from driftcheck.host.callers import CallSite, call_sites
from driftcheck.kinds import FixSafety, Kind, Severity, Witness

HOST_MIGRATION = CheckId(
    "host-migration",
    Kind.RETURN_SEMANTICS,
    Severity.ERROR,
    Witness.WORKLOAD,
    fixes=(FixSafety.SAFE, FixSafety.UNSAFE, FixSafety.MANUAL),
    codemods=("add-keyword", "unwrap-result"),
)
#: What this check reports; :mod:`driftcheck.checks.catalog` lists it.
CHECK = Check(__name__, (HOST_MIGRATION,))


#: Every attribute of Python's own containers and strings (``object``'s included): a host call
#: of ``.name(...)`` for one of these names cannot be told from a call of the builtin's method.
BUILTIN_METHODS = frozenset(
    name
    for kind in (list, tuple, dict, set, frozenset, str, bytes, bytearray)
    for name in dir(kind)
)


def attributable(member: str) -> bool:
    """Whether the host's own calls of ``.member(...)``, found by name, are calls of the host's
    method: not where Python's own types have a method of that name."""
    return member not in BUILTIN_METHODS


def check(use: Use, ctx: CheckContext) -> list[Finding]:
    """Report what the host's own callers of the method changed and the client's call lacks."""
    if use.kind != "call" or not use.member or ctx.baseline is None or use.receiver is None:
        return []
    if not attributable(use.member):
        return []
    out = _keywords_added(use, ctx)
    if use.result_indexed:
        out += _unwrapped(use, ctx)
    elif use.result in ("attribute", "subscripted", "iterated"):
        out += _none_checked(use, ctx)
    return out


def _none_checked(use: Use, ctx: CheckContext) -> list[Finding]:
    """The host's own callers started testing the result for None; this call reads it as is."""
    assert use.member is not None and ctx.baseline is not None
    changed = changed_members(ctx)
    if use.member not in changed:
        return []
    also = _searched_on_target(ctx)
    after = [s for s in call_sites(ctx.target, use.member, also) if s.result == "assigned"]
    before = [
        s
        for s in call_sites(ctx.baseline, use.member, _searched_with(ctx))
        if s.result == "assigned"
    ]
    checked = [s for s in after if s.none_checked]
    if not before or any(s.none_checked for s in before) or len(checked) < 2:
        return []
    if 2 * len(checked) < len(after):
        return []  # not the host's rule: most of its callers still take the result as is
    return [
        finding(
            use,
            HOST_MIGRATION,
            severity=Severity.WARNING,
            symbol=f"{use.receiver}.{use.member}",
            message=(
                f"{use.member}() may now return None: {len(checked)} of {ctx.target.name}'s "
                f"{len(after)} own calls that keep its result test it for None in "
                f"{ctx.target.version}, none did in {ctx.baseline.version}; this call's result "
                f"is {use.result} as is"
            ),
            evidence=(
                *(
                    Evidence(ctx.baseline.version, s.file, s.line, "no None test")
                    for s in before[:2]
                ),
                *(Evidence(ctx.target.version, s.file, s.line, "tests None") for s in checked[:3]),
            ),
            fix=Fix(
                FixSafety.MANUAL, f"handle a None result of {use.member}() here, as the host does"
            ),
            witness={"check": "workload", "reason": "a None result shows when it runs"},
        )
    ]


def changed_members(ctx: CheckContext) -> list[str]:
    """The methods the client calls on host receivers whose signature differs between the
    releases: the only ones whose host callers may have had to change (searched together)."""
    cached = ctx.__dict__.get("_changed_members")
    if cached is not None:
        return cached
    out: set[str] = set()
    for u in ctx.uses:
        if (
            u.kind == "call"
            and u.member
            and u.receiver
            and attributable(u.member)
            and _signature_changed(u, ctx)
        ):
            out.add(u.member)
    ctx.__dict__["_changed_members"] = sorted(out)
    return ctx.__dict__["_changed_members"]


def _searched_with(ctx: CheckContext) -> list[str]:
    """The members whose host call sites one pass over the host's files gathers together:
    the changed ones and every method whose result the client indexes (each is asked for its
    own sites; searched one by one, a large host's files were read once per method)."""
    cached = ctx.__dict__.get("_searched_with")
    if cached is None:
        indexed = {
            u.member
            for u in ctx.uses
            if u.kind == "call" and u.member and u.result_indexed and attributable(u.member)
        }
        cached = ctx.__dict__["_searched_with"] = sorted(indexed | set(changed_members(ctx)))
    return cast(list[str], cached)


def _searched_on_target(ctx: CheckContext) -> list[str]:
    """The members whose call sites are gathered on the target: the changed ones, and those
    whose result the client indexes where some baseline call site took element ``[0]`` and
    the baseline's sites alone do not already rule the finding out (the target's sites of the
    others are never asked for: :func:`_unwrapped` stops at the baseline's). A call that passes
    no keyword is compared with every baseline site that uses the result, so unless all of
    them unwrap it, only a call with keywords needs the target's sites. The baseline's sites
    of an indexed member are what its first use asks for anyway."""
    cached = ctx.__dict__.get("_searched_on_target")
    if cached is None:
        changed = set(changed_members(ctx))
        indexed: set[str] = set()
        keyworded: set[str] = set()  # indexed by a call that passes keywords
        for u in ctx.uses:
            if (
                u.kind == "call"
                and u.member
                and u.receiver is not None
                and u.result_indexed
                and attributable(u.member)
            ):
                indexed.add(u.member)
                if _keywords_of(u):
                    keyworded.add(u.member)
        unwraps = set()
        for m in sorted(indexed - changed):
            _, some, every = _kept_sites(ctx, m)
            if some and (every or m in keyworded):
                unwraps.add(m)
        cached = ctx.__dict__["_searched_on_target"] = sorted(changed | unwraps)
    return cast(list[str], cached)


def _keywords_of(use: Use) -> set[str]:
    """The keywords the client's call passes."""
    return set(use.shape.keywords) if use.shape else set()


def _signature_changed(use: Use, ctx: CheckContext) -> bool:
    if ctx.baseline is None:
        return False
    t, b = ctx.lookup(ctx.target, use), ctx.lookup(ctx.baseline, use)
    if not isinstance(t, Found) or not isinstance(b, Found):
        return False
    st, sb = ctx.target.signature(t), ctx.baseline.signature(b)
    if st is None or sb is None:
        return False
    shape = [(p.name, p.kind, p.default) for p in st.params], st.returns
    return shape != ([(p.name, p.kind, p.default) for p in sb.params], sb.returns)


def _keywords_added(use: Use, ctx: CheckContext) -> list[Finding]:
    assert use.member is not None and ctx.baseline is not None
    shape = use.shape
    if shape is None or shape.double_star:
        return []
    changed = changed_members(ctx)
    if use.member not in changed:
        return []
    got = _host_added_keywords(ctx, use.member)
    if got is None:
        return []
    after, before, added = got
    new = added - set(shape.keywords)
    out = []
    for k in sorted(new):
        values = {s.values[s.keywords.index(k)] for s in after if len(s.values) == len(s.keywords)}
        fix = Fix(FixSafety.MANUAL, f"pass {k}= as {ctx.target.name}'s own calls do")
        if len(values) == 1 and is_literal(next(iter(values))):
            value = next(iter(values))
            fix = Fix(
                FixSafety.UNSAFE,
                f"pass {k}={value}, as every one of {ctx.target.name}'s own calls does",
                codemod="add-keyword",
                params=(("keyword", k), ("value", value)),
            )
        out.append(
            finding(
                use,
                HOST_MIGRATION,
                severity=Severity.WARNING,
                symbol=f"{use.receiver}.{use.member}({k}=)",
                message=(
                    f"every one of {ctx.target.name}'s own calls of {use.member}() passes {k}= "
                    f"in {ctx.target.version} ({len(after)} calls), none did in "
                    f"{ctx.baseline.version}; this call does not"
                ),
                evidence=(
                    *(
                        Evidence(ctx.baseline.version, s.file, s.line, f"no {k}=")
                        for s in before[:2]
                    ),
                    *(
                        Evidence(ctx.target.version, s.file, s.line, f"passes {k}=")
                        for s in after[:3]
                    ),
                ),
                fix=fix,
                witness={"check": "workload", "reason": f"what {k}= changes shows when it runs"},
            )
        )
    return out


def _host_added_keywords(
    ctx: CheckContext, member: str
) -> tuple[list[CallSite], list[CallSite], set[str]] | None:
    """The host's own calls of ``.member(...)`` on the target (at least two) and at baseline
    (at least one), and the keywords every target call passes and no baseline call did; None
    where there are too few calls. Once per member: a method the host calls thousands of times
    (``.size()``) was read again for each of the client's thousands of calls."""
    assert ctx.baseline is not None
    memo: dict[str, tuple | None] = ctx.__dict__.setdefault("_host_added_keywords", {})
    if member not in memo:
        memo[member] = None
        after = call_sites(ctx.target, member, also=_searched_on_target(ctx))
        before = (
            call_sites(ctx.baseline, member, also=_searched_with(ctx)) if len(after) >= 2 else []
        )
        if before:
            common = set.intersection(*(set(s.keywords) for s in after))
            memo[member] = (after, before, common - {k for s in before for k in s.keywords})
    return cast(tuple[list[CallSite], list[CallSite], set[str]] | None, memo[member])


def _unwrapped(use: Use, ctx: CheckContext) -> list[Finding]:
    assert use.member is not None and ctx.baseline is not None
    before, some, every = _kept_sites(ctx, use.member)
    if not some or not (every or _keywords_of(use)):
        return []  # no keyword: compared with every baseline site, which must all unwrap
    after = [
        s
        for s in call_sites(ctx.target, use.member, _searched_on_target(ctx))
        if s.result != "discarded"
    ]
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
            HOST_MIGRATION,
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
                FixSafety.SAFE,
                f"use the result directly, as {ctx.target.name}'s own callers do",
                codemod="unwrap-result",
            ),
        )
    ]


def _kept_sites(ctx: CheckContext, member: str) -> tuple[list[CallSite], bool, bool]:
    """The baseline's own calls of ``.member(...)`` that use the result, and whether some of
    them and whether all of them unwrap it; once per member (transformers indexes
    ``.size()[0]`` thousands of times, and each of its calls filtered torch's thousands of
    sites again)."""
    assert ctx.baseline is not None
    memo: dict[str, tuple[list[CallSite], bool, bool]] = ctx.__dict__.setdefault("_kept_sites", {})
    if member not in memo:
        sites = call_sites(ctx.baseline, member, _searched_with(ctx))
        kept = [s for s in sites if s.result != "discarded"]
        memo[member] = (
            kept,
            any(s.unwrapped for s in kept),
            all(s.unwrapped for s in kept),
        )
    return memo[member]


def _keys(use: Use, sites: list[CallSite]) -> set[str]:
    """The client's keywords that the host's own sites pass too: the calls alike the client's."""
    mine = _keywords_of(use)
    return {k for k in mine if any(k in s.keywords for s in sites)}
